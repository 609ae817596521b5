"""What the fit-a-bigger-batch measurement shows (lesson 10), from its fit_batch_result records:
how much larger a batch each technique fits than fp32, at what speed, and whether it changed the
result. Pure functions, unit-tested."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bsdemo.bounds import NOISE
from bsdemo.recipes.closing import join
from bsdemo.units import fixed, format_bytes, percent, signed

NAMES = {
    "bf16": "bf16 autocast",
    "fp16": "fp16 with a gradient scaler",
    "checkpointing": "Gradient checkpointing",
    "bf16+checkpointing": "bf16 with checkpointing",
}
SLOWER = 0.8  # a technique below this share of fp32's samples/s counts as "slower"
SAME_LOSS = 0.01  # a training-loss difference under this counts as "the same result"
REAL_SAVING = 0.1  # a real (allocator) peak this much under fp32's counts as a real saving


def real_over(results: Sequence[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The techniques whose allocator's real peak (measured on the CPU, at one common batch)
    ran over the budget that the accounting fitted them to."""
    return [r for r in results if r.get("real_peak_bytes") and r["real_peak_bytes"] > budget]


def budget_basis(results: Sequence[dict[str, Any]], budget: int) -> str:
    """What "fits" means on this page, said once for the chart and the text: on a device the
    allocator's measured peak within the budget; on the CPU the accounting's (a simulated
    device), and whether the allocator's real peaks stayed under it."""
    if not any(r.get("real_peak_bytes") for r in results):
        return f"Memory budget {format_bytes(budget)}; each batch verified by a real step"
    over = real_over(results, budget)
    return f"Memory budget {format_bytes(budget)} by the accounting (a simulated device); " + (
        f"real peaks over it: {len(over)} of {len(results)}" if over else "real peaks under it"
    )


def _peaks(rows: Sequence[dict[str, Any]]) -> str:
    return ", ".join(f"{r['technique']} {format_bytes(r['real_peak_bytes'])}" for r in rows)


def fit_prediction(results: Sequence[dict[str, Any]]) -> tuple[int, str] | None:
    """Which technique fitted the largest single batch (answers: bf16 autocast, gradient
    checkpointing, both together), with the numbers; accumulation is not a single batch."""
    by = {r["technique"]: r["max_batch_size"] for r in results}
    options = [t for t in ("bf16", "checkpointing", "bf16+checkpointing") if t in by]
    if len(options) < 3:
        return None
    best = max(options, key=lambda t: by[t])
    return options.index(best), ", ".join(f"{t} {by[t]:,}" for t in options)


def fit_verdict(results: Sequence[dict[str, Any]], budget: int, device: str) -> str | None:
    """The closing text (Markdown) of a finished measurement, or None without an fp32 run."""
    by = {r["technique"]: r for r in results}
    base = by.get("fp32")
    if base is not None and not base["max_batch_size"] and base.get("device_oom_batch"):
        return (
            f"Out of memory: the device ran out at batch {base['device_oom_batch']:,}, an "
            f"fp32 memory probe, before the {format_bytes(budget)} budget; nothing was "
            "fitted."
        )
    if base is None or not base["max_batch_size"]:
        return None
    fitted = [by[t] for t in NAMES if by.get(t) and by[t]["max_batch_size"]]
    most = max(fitted, key=lambda r: r["max_batch_size"], default=None)
    lead = (
        f"Under {format_bytes(budget)}, fp32 fits batch {base['max_batch_size']:,}"
        + (
            f"; {NAMES[most['technique']][:1].lower() + NAMES[most['technique']][1:]} fits "
            f"the most, {most['max_batch_size']:,} (by the accounting)"
            if most and most["max_batch_size"] > base["max_batch_size"]
            else ""
        )
        + "."
    )
    parts = [
        f"Under {format_bytes(budget)}, plain fp32 fits "
        f"batch {base['max_batch_size']:,} ({fixed(base['bytes_per_sample'], 0)} bytes of "
        f"activations a sample on top of {format_bytes(base['fixed_bytes'])} for the "
        f"model, its gradients and optimizer state) at {fixed(base['samples_per_sec'], 0)} "
        "samples/s."
    ]
    real_base = base.get("real_peak_bytes")
    over = real_over(results, budget)
    if over:  # the accounting's fit is not the allocator's: said where the chart says "fits"
        parts[0] += (
            f" On this CPU the budget is applied to the accounting; the allocator's "
            f"real peaks at batch {over[0]['real_batch']:,} ran over it "
            f"({_peaks(over)}): a real device of {format_bytes(budget)} would fit "
            "smaller batches than these."
        )
    parts += [
        _technique_line(name, by[name], base, by.get("bf16"))
        for name in ("bf16", "fp16", "checkpointing", "bf16+checkpointing")
        if by.get(name) and by[name]["max_batch_size"]
    ]
    acc = by.get("accumulation")
    if acc and acc["max_batch_size"]:
        parts.append(_accumulation_line(acc, real_base))
    short = [r for r in results if r.get("device_oom_batch")]
    if short:  # the device's own memory ended the search before the budget did
        parts.append(
            "- The device itself ran out of memory before the budget: "
            + ", ".join(f"{r['technique']} at batch {r['device_oom_batch']:,}" for r in short)
            + "; those largest batches are the device's, not the budget's."
        )
    changed = [
        (r["technique"], r["loss_vs_fp32"])
        for r in results
        if r["technique"] != "fp32" and r["loss_vs_fp32"] is not None and abs(r["loss_vs_fp32"]) >= SAME_LOSS
    ]
    steps, batch = base["budget_steps"], base["budget_batch"]
    if base["loss_after"] is None:
        parts.append(
            f"The loss comparison ({steps} steps at batch {batch} from the same start) "
            "ran out of the device's memory: it was not made."
        )
    elif changed:
        parts.append(
            f"After {steps} steps at batch {batch} from the same start, the training "
            "loss differed from fp32's: "
            + ", ".join(f"{t} by {signed(d, 3)}" for t, d in changed)
            + " — check before you trust "
            "it."
        )
    else:
        parts.append(
            f"After {steps} steps at batch {batch} from the same start, every "
            f"technique's training loss is within {SAME_LOSS} of fp32's "
            f"({fixed(base['loss_after'], 4)}): none of them changed the result here."
        )
    # the measurement's opening, a line per technique, then what the loss comparison showed
    items = parts[1:-1]
    return join(lead, parts[0], "\n".join(items), parts[-1])


def _technique_line(name: str, r: dict[str, Any], base: dict[str, Any], alone: dict[str, Any] | None) -> str:
    """One technique against fp32: how much larger a batch it fits (by the accounting, and
    whether the allocator's real peak agrees), and its speed, with what slowed it."""
    grow = r["max_batch_size"] / base["max_batch_size"]
    speed = r["samples_per_sec"] / base["samples_per_sec"]
    text = f"{NAMES[name]} fits {r['max_batch_size']:,} ({fixed(grow, 1)}× fp32's)"
    real, real_base = r.get("real_peak_bytes"), base.get("real_peak_bytes")
    if real is not None and real_base:  # the CPU: accounting, and the allocator's real peak
        at = (
            f"at batch {r['real_batch']:,} the allocator's real peak was "
            f"{format_bytes(real)} against fp32's {format_bytes(real_base)}"
        )
        if real <= (1 - REAL_SAVING) * real_base:
            text += f" by the accounting; {at} ({percent(1 - real / real_base, 0)} less): a real saving"
        else:
            text += (
                f" by the accounting, but not in real memory: {at}, no lower — on this "
                "machine it would not fit a larger batch"
            )
    if name == "checkpointing" and speed > 1 + NOISE:  # it does fp32's work and more
        return (
            f"- {text}. Its timing was too noisy to read: it came out {fixed(speed, 2)}× as "
            "fast as fp32, which a technique that runs the forward pass twice "
            "cannot be. No conclusion about its speed is drawn; run it again when "
            "the machine is quieter."
        )
    text += f". It ran at {fixed(r['samples_per_sec'], 0)} samples/s ({fixed(speed, 2)}× fp32's)"
    if name in ("bf16", "fp16"):
        text += (
            f" with {fixed(r['bytes_per_sample'], 0)} accounted bytes a sample instead of "
            f"{fixed(base['bytes_per_sample'], 0)}"
        )
        if speed < SLOWER:
            text += ": on this device mixed precision bought memory with time"
        elif speed > 1 + NOISE:
            text += ": on this device it was faster as well"
    elif name == "checkpointing" and speed < 1:
        text += f" — the recomputed forward passes cost {percent(1 / speed - 1, 0)} more time a sample"
    elif speed < SLOWER:  # bf16 + checkpointing: blame what measured slow
        slow_bf16 = (
            alone is not None
            and alone["samples_per_sec"]
            and alone["samples_per_sec"] / base["samples_per_sec"] < SLOWER
        )
        text += (
            " — mostly bf16's arithmetic on this device (bf16 alone was slower too), plus the recomputation"
            if slow_bf16
            else " — the recomputed forward passes: bf16 alone was not slower here"
        )
    return f"- {text}."


def _accumulation_line(acc: dict[str, Any], real_base: int | None) -> str:
    """Accumulation's effective batch, at one micro-batch's memory (and the real peak's extra
    gradient while the micro-batches are summed)."""
    memory = "at the memory of one micro-batch"
    if acc.get("real_peak_bytes") and real_base:
        extra = acc["real_peak_bytes"] - real_base
        real = (
            f"the allocator's real peak {format_bytes(acc['real_peak_bytes'])} against "
            f"fp32's {format_bytes(real_base)} for one batch of {acc['real_batch']:,}"
        )
        memory = (
            f"at the memory of one micro-batch and one more gradient ({real}: "
            f"{format_bytes(extra)} more while the micro-batches' gradients are summed, "
            "however many there are)"
            if extra > REAL_SAVING * real_base
            else f"{memory} ({real})"
        )
    return (
        f"- Accumulation reaches an effective batch of {acc['effective_batch_size']:,} "
        f"({acc['accumulation_steps']} micro-batches of {acc['max_batch_size']:,}) {memory}: "
        "the batch the optimizer sees is not limited by memory, only by time."
    )
