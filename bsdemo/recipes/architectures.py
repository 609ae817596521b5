"""What lesson 11's architecture study shows, from its architecture_summary records: each
architecture's measured range beside the rule of thumb, and why they differ. Pure, unit-tested."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

WORDS = {"agrees": "inside the rule of thumb", "overlaps": "overlaps the rule of thumb",
         "disagrees": "outside the rule of thumb"}


def architecture_verdict(summaries: Sequence[dict[str, Any]], seconds: float) -> str | None:
    """The closing text (Markdown): a line per architecture, from its own numbers."""
    measured = [s for s in summaries if s.get("range")]
    if not measured:
        return None
    lines = []
    for s in measured:
        lo, hi = s["range"]
        span = f"batch {lo}" if lo == hi else f"batches {lo}–{hi}"
        lines.append(f"- **{s['label']}**: {span} ({WORDS[s['agreement']]}, {s['rule_text']}). "
                     f"{s['why']}".rstrip())
    agree = sum(s["agreement"] != "disagrees" for s in measured)
    return (f"**On this machine, with {seconds:g} s of training per run,** {agree} of "
            f"{len(measured)} architectures landed where the rule of thumb puts them. A measured "
            "range is the batches that trained as well as the best one (within 2 accuracy points, "
            "or 25 % of the best Fréchet distance) at ≥ 50 % of the best samples/s:\n\n"
            + "\n".join(lines)
            + "\n\nThe rules of thumb come from GPUs and long training: a GPU needs larger batches "
              "to fill, and a longer budget lets larger batches catch up on the updates they "
              "skip. Here the budget and the device are yours — run it again with more seconds, "
              "or on a GPU, and see the range move.")
