"""What a profile shows, in words and lines, from its records (pure Python): where the small
batch's step went, how the trace's fixed part compares with the step times' t0, and what cutting
the overhead bought at each batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bsdemo.profiling import GAP
from bsdemo.recipes import closing

TECHNIQUES = {"compile": "torch.compile", "cuda_graphs": "CUDA graphs"}
AGREE = 0.25  # trace's fixed part within this share of t0: "agrees"


def ms(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if us < 1e5 else f"{us / 1e6:.2f} s"


def fixed_and_growing(point: Mapping[str, Any], split: Mapping[str, Any] | None
                      ) -> tuple[float, float] | None:
    """(fixed, growing) µs of this point's profiled step by the trace's split."""
    if not split:
        return None
    return split["t0_us"], split["t1_us"] * point["batch_size"]


def point_line(point: Mapping[str, Any]) -> str:
    b = point["batch_size"]
    if point["status"] != "ok":
        return f"batch {b}: {point['status']}: {point.get('message', '')}"
    parts = point["parts_us"]
    step = point["shown_step_us"]
    shares = ", ".join(f"{name} {parts.get(name, 0) / step:.0%}"
                       for name in ("forward", "backward", "optimizer", "gap") if name in parts)
    plain = point["plain_step_s"]["median"]
    line = (f"batch {b}: step {plain * 1e3:.2f} ms unprofiled ({b / plain:,.0f} samples/s), "
            f"{point['profiled_step_s']['median'] * 1e3:.2f} ms profiled; "
            f"{point['operators_per_step']} operators; {shares.replace('gap', 'gaps')}")
    if point.get("kernels_per_step") is not None:
        line += (f"; {point['kernels_per_step']} kernels, GPU busy "
                 f"{point['gpu_busy_share']:.0%} of the step")
    return line


def cut_line(cut: Mapping[str, Any]) -> str:
    name = TECHNIQUES.get(cut["technique"], cut["technique"])
    b = cut["batch_size"]
    if cut["status"] != "ok":
        return f"batch {b}: {cut['message']}"
    return (f"batch {b}: eager {cut['eager_samples_per_sec']:,.0f} samples/s, {name} "
            f"{cut['cut_samples_per_sec']:,.0f} samples/s ({cut['speedup']:.2f}×; "
            f"{'compiling' if cut['technique'] == 'compile' else 'capturing'} took "
            f"{cut['prepare_s']:.1f} s, not counted)")


def end_lines(end: Mapping[str, Any]) -> list[str]:
    split, plain = end.get("split"), end.get("plain_fit")
    if not split or not plain:
        return ["(the split needs two batch sizes that ran)"]
    lines = [f"trace: t0 {ms(split['t0_us'])} fixed per step + {split['t1_us']:.2f} µs per "
             f"sample; less the profiler's own cost, t0 {ms(split['t0_less_profiler_us'])}",
             f"unprofiled steps: t0 {ms(plain['t0_us'])} + {plain['t1_us']:.2f} µs per sample"
             + (f" (trace ÷ steps: {end['t0_agreement']:.2f})"
                if end.get("t0_agreement") is not None else "")]
    top = [(name, us) for name, us in split["fixed_us"].items() if us > 0][:3]
    lines.append("largest fixed costs: " + ", ".join(f"{short(name)} {ms(us)}"
                                                     for name, us in top))
    return lines


def short(name: str) -> str:
    """An operator's name without autograd's prefix."""
    return name.replace("autograd::engine::evaluate_function: ", "").replace(
        GAP, "gaps (Python between operators)")


def profile_lines(event: Mapping[str, Any]) -> list[str]:
    """The CLI's lines for one record."""
    kind = event["kind"]
    if kind == "profile_start":
        return [f"profiling batch sizes {', '.join(map(str, event['batch_sizes']))} on "
                f"{event['device'].get('name') or event['device'].get('type')}: "
                f"{event['steps']} profiled steps each"]
    if kind == "profile_point":
        return [point_line(event)]
    if kind == "cut_point":
        return [cut_line(event)]
    if kind == "profile_end":
        return end_lines(event)
    return [event["message"]] if event.get("message") else []


def profile_verdict(points: Sequence[Mapping[str, Any]], cuts: Sequence[Mapping[str, Any]],
                    end: Mapping[str, Any], sweep_fit: Mapping[str, float] | None = None) -> str:
    """The closing text: where the small batch's step went, how the trace's split agrees with
    the step times, what the overhead cut bought at the small and the large batch. Plain text."""
    ok = sorted((p for p in points if p["status"] == "ok"), key=lambda p: p["batch_size"])
    if len(ok) < 2 or not end.get("split"):
        return "The profile needs two batch sizes that ran to split the step."
    small, large = ok[0], ok[-1]
    split = end["split"]
    fixed = split["t0_less_profiler_us"]

    def share(p: Mapping[str, Any]) -> float:  # of the step as the trace splits it
        whole = fixed + split["t1_us"] * p["batch_size"]
        return fixed / whole if whole > 0 else 0.0

    plain_small = small["plain_step_s"]["median"] * 1e6
    plain_large = large["plain_step_s"]["median"] * 1e6
    gap = small["parts_us"].get("gap", 0.0) / small["shown_step_us"]
    lead = (f"At batch {small['batch_size']} about {share(small):.0%} of a step is fixed cost "
            f"that does not grow with the batch; at batch {large['batch_size']}, "
            f"{share(large):.0%}.")
    text = [f"A step took {ms(plain_small)} at batch {small['batch_size']} and "
            f"{ms(plain_large)} at batch {large['batch_size']} (unprofiled). In the small "
            f"batch's trace, {gap:.0%} of the step had no PyTorch operator running at all "
            "(Python between operators, and the profiler's own bookkeeping)."]
    costs = dict((b, c) for b, c in end.get("profiler_cost_us") or [])
    if costs:
        text.append("Profiling added " + " and ".join(
            f"{ms(max(c, 0.0))} per step at batch {b}" for b, c in sorted(costs.items()))
            + " (profiled less unprofiled steps, both by the wall clock): the fixed part above "
            "is the trace's less the lower middle of these (a cost per operator call, so "
            "fixed), and what a profiled step has beyond that is the profiler's and the "
            "machine's other load.")
    others = [p.get("others_cpu_share") for p in ok if p.get("others_cpu_share") is not None]
    if others and max(others) >= 0.1:
        text.append(f"Other processes used up to {max(others):.0%} of the CPU while this ran.")
    if small.get("gpu_busy_share") is not None:
        text.append(f"The GPU was busy {small['gpu_busy_share']:.0%} of the batch-"
                    f"{small['batch_size']} step ({small['kernels_per_step']} kernels) and "
                    f"{large['gpu_busy_share']:.0%} at batch {large['batch_size']}.")
    top = [(name, us) for name, us in split["fixed_us"].items() if us > 0][:2]
    if top:
        text.append("The largest fixed costs: " + " and ".join(
            f"{short(name)} ({ms(us)})" for name, us in top) + ".")
    agreement = end.get("t0_agreement")
    if agreement is not None:
        verdict = ("agrees with" if abs(agreement - 1) <= AGREE else
                   "is larger than" if agreement > 1 else "is smaller than")
        text.append(f"The trace's fixed part less the profiler's own cost ({ms(fixed)}) "
                    f"{verdict} the t0 of the unprofiled steps ({ms(end['plain_fit']['t0_us'])};"
                    f" ratio {agreement:.2f}).")
    if sweep_fit and sweep_fit.get("t0_s"):
        ratio = fixed / (sweep_fit["t0_s"] * 1e6)
        text.append(f"The sweep's fitted t0 above is {ms(sweep_fit['t0_s'] * 1e6)} (trace ÷ "
                    f"sweep: {ratio:.2f}).")
    good = {c["batch_size"]: c for c in cuts if c.get("status") == "ok"}
    name = TECHNIQUES.get(end.get("technique", ""), end.get("technique", ""))
    if small["batch_size"] in good and large["batch_size"] in good:
        a, b = good[small["batch_size"]], good[large["batch_size"]]
        text.append(f"{name} changed samples/s by {a['speedup']:.2f}× at batch "
                    f"{small['batch_size']} and {b['speedup']:.2f}× at batch "
                    f"{large['batch_size']}" + _cut_reading(a["speedup"], b["speedup"]))
    elif cuts:
        text.append(next((c["message"] for c in cuts if c.get("status") != "ok"), ""))
    return closing.join(lead, " ".join(t for t in text if t))


def _cut_reading(small: float, large: float) -> str:
    if small > 1.05 and small > large:
        return (": the gain is largest where the fixed cost is most of the step, as cutting "
                "overhead should be.")
    if small < 0.95:
        return (": on this device it made the small batch slower, not faster (what it adds "
                "per call outweighed what it removed); the fixed cost stayed.")
    return ": about the same at both, so on this device the fixed cost was not what it cut."
