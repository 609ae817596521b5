"""What lesson 11's architecture study shows, from its architecture_summary records: each
architecture's measured range beside the rule of thumb, and why they differ. Pure, unit-tested."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bsdemo.recipes.closing import join
from bsdemo.recipes.measurements import CONTENDED, contention
from bsdemo.timing import THREAD_CLOCK
from bsdemo.units import percent, setting

WORDS = {
    "agrees": "inside the rule of thumb",
    "overlaps": "overlaps the rule of thumb",
    "disagrees": "outside the rule of thumb",
}


def by_cpu_time(points: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the study's budget (and its samples/s) was the training thread's CPU time."""
    return any(p.get("budget_clock") == THREAD_CLOCK for p in points)


def budget_words(points: Sequence[Mapping[str, Any]], seconds: float) -> str:
    """How a run's budget reads on the page: "0.6 s of CPU time" or "2.5 s"."""
    return f"{setting(seconds)} s of CPU time" if by_cpu_time(points) else f"{setting(seconds)} s"


def architecture_verdict(
    summaries: Sequence[dict[str, Any]], seconds: float, points: Sequence[dict[str, Any]] = ()
) -> str | None:
    """The closing text (Markdown): a line per architecture, from its own numbers, and the load
    the runs shared the CPU with (a time budget buys fewer steps under load)."""
    measured = [s for s in summaries if s.get("range")]
    unjudged = [s for s in summaries if s.get("not_learned")]
    if not measured and not unjudged:
        return None
    lines = []
    for s in measured:
        lo, hi = s["range"]
        span = f"batch {lo}" if lo == hi else f"batches {lo}–{hi}"
        why = s["why"][:1].upper() + s["why"][1:]
        lines.append(
            f"- **{s['label']}**: {span} ({WORDS[s['agreement']]}, {s['rule_text']}). {why}".rstrip()
        )
    for s in unjudged:
        lines.append(f"- **{s['label']}**: not judged ({s['rule_text']}): {s['why']}".rstrip())
    agree = sum(s["agreement"] != "disagrees" for s in measured)
    busy = contention(points)
    cpu = by_cpu_time(points)
    load = (
        f"\n\n*Other processes used {percent(busy, 0)} of this machine's CPU time while these runs "
        + (
            "trained: the study took longer, but each run still trained for its own CPU time "
            "and its samples/s are by that clock, so the load did not cut the runs short. "
            "Short runs still vary: a rerun may land a batch differently.*"
            if cpu
            else "trained: each run's seconds bought fewer steps than on a quiet "
            "machine, and a rerun may land differently.*"
        )
        if busy is not None and busy > CONTENDED
        else ""
    )
    lead = (
        f"With {budget_words(points, seconds)} of training a run, the measured batch range of "
        f"{agree} of {len(measured)} architectures meets the rule of thumb's."
    )
    return join(
        lead,
        "A measured range is read only from runs that learned (closed at least "
        "half the gap from where they started to perfect), and is the batches that "
        "trained as well as the best one (within 2 accuracy points, or 25 % of the best "
        "Fréchet distance) at ≥ 50 % of the best samples/s"
        + (
            f"; {len(unjudged)} did not learn in this budget and "
            f"{'is' if len(unjudged) == 1 else 'are'} not judged"
            if unjudged
            else ""
        )
        + ":",
        "\n".join(lines),
        "The rules of thumb come from GPUs and long training: a GPU needs larger batches "
        "to fill, and a longer budget lets larger batches catch up on the updates they "
        "skip. Here the budget and the device are yours — run it again with more "
        "seconds, or on a GPU, and see the range move." + load,
    )
