"""What a profile shows, in words and lines, from its records (pure Python): where the small
batch's step went, how the trace's split compares with the unprofiled steps', and what cutting
the overhead bought at each batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bsdemo.profiling import GAP, technique_name
from bsdemo.recipes import closing
from bsdemo.units import fixed, percent, sig

AGREE = 0.25  # the trace's growing part within this share of the steps' t1: "agrees"


def ms(us: float) -> str:
    return f"{sig(us / 1e3)} ms" if us < 1e5 else f"{sig(us / 1e6)} s"


def point_line(point: Mapping[str, Any]) -> str:
    b = point["batch_size"]
    if point["status"] != "ok":
        return f"batch {b}: {point['status']}: {point.get('message', '')}"
    parts = point["parts_us"]
    step = point["shown_step_us"]
    shares = ", ".join(
        f"{name} {percent(parts.get(name, 0) / step, 0)}"
        for name in ("forward", "backward", "optimizer", "gap")
        if name in parts
    )
    plain = point["plain_own_s"]["median"]
    line = (
        f"batch {b}: step {sig(plain * 1e3)} ms unprofiled ({fixed(b / plain, 0)} samples/s), "
        f"{sig(point['profiled_own_s']['median'] * 1e3)} ms profiled; "
        f"{point['operators_per_step']} operators; {shares.replace('gap', 'gaps')}"
    )
    if point.get("kernels_per_step") is not None:
        line += (
            f"; {point['kernels_per_step']} kernels, GPU busy "
            f"{percent(point['gpu_busy_share'], 0)} of the step"
        )
    return line


def cut_line(cut: Mapping[str, Any]) -> str:
    name = technique_name(cut["technique"])
    b = cut["batch_size"]
    if cut["status"] != "ok":
        return f"batch {b}: {cut['message']}"
    return (
        f"batch {b}: eager {fixed(cut['eager_samples_per_sec'], 0)} samples/s, {name} "
        f"{fixed(cut['cut_samples_per_sec'], 0)} samples/s ({fixed(cut['speedup'], 2)}×; "
        f"{'compiling' if cut['technique'] == 'compile' else 'capturing'} took "
        f"{fixed(cut['prepare_s'], 1)} s, not counted)"
    )


def end_lines(end: Mapping[str, Any]) -> list[str]:
    split, plain = end.get("split"), end.get("plain_fit")
    if not split or not plain:
        return ["(the split needs two batch sizes that ran)"]
    lines = [
        f"unprofiled steps: t0 {ms(plain['t0_us'])} fixed per step + {sig(plain['t1_us'])} µs per sample",
        f"trace: t0 {ms(split['t0_us'])} + {sig(split['t1_us'])} µs per sample (trace ÷ "
        f"steps: t0 {fixed(end['t0_agreement'], 2)}, t1 {fixed(end['t1_agreement'], 2)}; a profiled "
        "step's times)",
    ]
    top = [(name, us) for name, us in split["fixed_us"].items() if us > 0][:3]
    lines.append(
        "largest fixed costs in the trace: " + ", ".join(f"{short(name)} {ms(us)}" for name, us in top)
    )
    if end.get("cut_fit"):
        name = technique_name(end.get("technique", ""))
        (e0, e1), (c0, c1) = end["cut_fit"]["eager"], end["cut_fit"]["cut"]
        lines.append(
            f"overhead cut: t0 {ms(max(e0, 0.0))} eager, {ms(max(c0, 0.0))} with {name}"
            f" (t1 {sig(e1)} and {sig(c1)} µs per sample)"
        )
    return lines


def short(name: str) -> str:
    """An operator's name without autograd's prefix."""
    return name.replace("autograd::engine::evaluate_function: ", "").replace(
        GAP, "gaps (Python between operators)"
    )


def profile_lines(event: Mapping[str, Any]) -> list[str]:
    """The CLI's lines for one record."""
    kind = event["kind"]
    if kind == "profile_start":
        return [
            f"profiling batch sizes {', '.join(map(str, event['batch_sizes']))} on "
            f"{event['device'].get('name') or event['device'].get('type')}: "
            f"{event['steps']} profiled steps each (the faster half read)"
        ]
    if kind == "profile_point":
        return [point_line(event)]
    if kind == "cut_point":
        return [cut_line(event)]
    if kind == "profile_end":
        return end_lines(event)
    return [event["message"]] if event.get("message") else []


def profile_verdict(
    points: Sequence[Mapping[str, Any]],
    cuts: Sequence[Mapping[str, Any]],
    end: Mapping[str, Any],
    sweep_fit: Mapping[str, float] | None = None,
) -> str:
    """The closing text: where the small batch's step went, how the trace's split agrees with
    the step times, what the overhead cut bought at the small and the large batch. Plain text."""
    ok = sorted((p for p in points if p["status"] == "ok"), key=lambda p: p["batch_size"])
    if len(ok) < 2 or not end.get("split"):
        return "The profile needs two batch sizes that ran to split the step."
    small, large = ok[0], ok[-1]
    split, plain = end["split"], end["plain_fit"]

    def share(p: Mapping[str, Any]) -> float:  # of the unprofiled step, by its t0 + t1·B
        whole = plain["t0_us"] + plain["t1_us"] * p["batch_size"]
        return plain["t0_us"] / whole if whole > 0 else 0.0

    plain_small = small["plain_own_s"]["median"] * 1e6
    plain_large = large["plain_own_s"]["median"] * 1e6
    gap = small["parts_us"].get("gap", 0.0) / small["shown_step_us"]
    lead = (
        f"At batch {small['batch_size']} about {percent(share(small), 0)} of a step is fixed cost "
        f"that does not grow with the batch; at batch {large['batch_size']}, "
        f"{percent(share(large), 0)}."
    )
    text = [
        f"A step took {ms(plain_small)} at batch {small['batch_size']} and "
        f"{ms(plain_large)} at batch {large['batch_size']} (unprofiled): t0 = "
        f"{ms(plain['t0_us'])} fixed, plus {sig(plain['t1_us'])} µs per sample. In the small "
        f"batch's trace, {percent(gap, 0)} of the step had no PyTorch operator running at all "
        "(Python between operators, and the profiler's own bookkeeping)."
    ]
    top = [(name, us) for name, us in split["fixed_us"].items() if us > 0][:2]
    if top and split["t0_us"] > 0:
        text.append(
            "Of the trace's fixed part, the largest pieces: "
            + " and ".join(f"{short(name)} ({percent(us / split['t0_us'], 0)})" for name, us in top)
            + "."
        )
    others = max((p.get("others_cpu_share") or 0.0 for p in ok), default=0.0)
    t0_ratio, t1_ratio = end.get("t0_agreement"), end.get("t1_agreement")
    told = False
    if t0_ratio is not None and t1_ratio is not None:
        grows = (
            "agrees with"
            if abs(t1_ratio - 1) <= AGREE
            else "is larger than"
            if t1_ratio > 1
            else "is smaller than"
        )
        why = ""
        if abs(t1_ratio - 1) > AGREE and others >= 0.1:
            why = (
                f", as a trace is timed by the wall clock and other processes used up to "
                f"{percent(others, 0)} of the CPU meanwhile"
            )
            told = True
        text.append(
            f"The trace's growing part {grows} the unprofiled steps' (t1 ratio "
            f"{fixed(t1_ratio, 2)}{why}); its fixed part is {fixed(t0_ratio, 2)}× their t0."
        )
    costs = dict((b, c) for b, c in end.get("profiler_cost_us") or [])
    if costs:
        text.append(
            "Profiled steps took "
            + " and ".join(f"{ms(max(c, 0.0))} more at batch {b}" for b, c in sorted(costs.items()))
            + " than unprofiled ones (by the step's own clock: the profiler's cost, and whatever "
            "else the machine did meanwhile), so read a trace's times as shares of the step, "
            "not as its speed (the trace is read from the faster half of its steps)."
        )
    if sweep_fit and sweep_fit.get("t0_s"):
        ratio = plain["t0_us"] / (sweep_fit["t0_s"] * 1e6)
        text.append(
            f"The sweep's fitted t0 above is {ms(sweep_fit['t0_s'] * 1e6)} (these "
            f"steps' t0 ÷ the sweep's: {fixed(ratio, 2)})."
        )
    if others >= 0.1 and not told:
        text.append(f"Other processes used up to {percent(others, 0)} of the CPU while this ran.")
    if small.get("gpu_busy_share") is not None:
        text.append(
            f"The GPU was busy {percent(small['gpu_busy_share'], 0)} of the batch-"
            f"{small['batch_size']} step ({small['kernels_per_step']} kernels) and "
            f"{percent(large['gpu_busy_share'], 0)} at batch {large['batch_size']}."
        )
    good = {c["batch_size"]: c for c in cuts if c.get("status") == "ok"}
    name = technique_name(end.get("technique", ""))
    if small["batch_size"] in good and large["batch_size"] in good:
        a, b = good[small["batch_size"]], good[large["batch_size"]]
        verb = "compiling" if end.get("technique") == "compile" else "capturing"
        text.append(
            f"{name} changed samples/s by {fixed(a['speedup'], 2)}× at batch "
            f"{small['batch_size']} and {fixed(b['speedup'], 2)}× at batch "
            f"{large['batch_size']} ({verb} took {fixed(a['prepare_s'] + b['prepare_s'], 1)} s,"
            f" not counted)" + _cut_reading(a["speedup"], b["speedup"])
        )
        fits = end.get("cut_fit")
        if fits:
            text.append(
                f"Through both batches, t0 went from {ms(max(fits['eager'][0], 0.0))} "
                f"eager to {ms(max(fits['cut'][0], 0.0))} with {name}."
            )
    elif cuts:
        text.append(next((c["message"] for c in cuts if c.get("status") != "ok"), ""))
    return closing.join(lead, " ".join(t for t in text if t))


CUT_SAME = 0.05  # a speed-up within this of 1 (as shown, two decimals) is "about the same"


def cut_effect(speedup: float) -> str:
    """ "faster", "slower" or "same": one reading of an overhead cut's speed-up, as the page shows
    it (two decimals), for its chart's title and its text alike."""
    shown = round(speedup, 2)
    return "faster" if shown > 1 + CUT_SAME else "slower" if shown < 1 - CUT_SAME else "same"


def cut_title(cuts: Sequence[Mapping[str, Any]]) -> str:
    """The overhead-cut chart's title, from the speed-ups it draws: "cutting" only where it cut."""
    ok = [c for c in cuts if c.get("status") == "ok"]
    name = technique_name(ok[0]["technique"]) if ok else "the cut"
    effects = {cut_effect(c["speedup"]) for c in ok}
    if effects == {"faster"}:
        return f"Cutting the fixed cost: {name} made the steps faster"
    if effects == {"slower"}:
        return f"{name} made the steps slower: it cut no fixed cost here"
    if effects <= {"same"}:
        return f"{name}: about the same speed"
    return f"{name}: faster at some batch sizes, not at others"


def _cut_reading(small: float, large: float) -> str:
    if cut_effect(small) == "faster" and round(small, 2) > round(large, 2):
        return (
            ": the gain is largest where the fixed cost is most of the step, as cutting overhead should be."
        )
    if cut_effect(small) == "slower":
        return (
            ": on this device it made the small batch slower, not faster (what it adds "
            "per call outweighed what it removed); the fixed cost stayed."
        )
    if cut_effect(small) == cut_effect(large) == "same":
        return ": about the same at both, so on this device the fixed cost was not what it cut."
    return (
        ": not the pattern of a cut fixed cost, whose gain is largest at the small batch "
        "and fades as the batch grows."
    )
