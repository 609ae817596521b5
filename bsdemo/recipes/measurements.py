"""The measurement lessons' verdicts and defaults: throughput, memory, accumulation, finder."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from bsdemo import footprint
from bsdemo.config import RunConfig
from bsdemo.lessons import BY_SLUG
from bsdemo.recipes.closing import join
from bsdemo.timing import DEVICE_CLOCK, THREAD_CLOCK
from bsdemo.units import fixed, format_bytes, percent, sig

# ----- throughput -----
CONTENDED = 0.15  # other processes' share of all CPU time above which a sweep says so


def contention(points: Sequence[dict[str, Any]]) -> float | None:
    """The mean share of all CPU time other processes used while the sweep's points ran."""
    shares = [p["others_cpu_share"] for p in points if p.get("others_cpu_share") is not None]
    return sum(shares) / len(shares) if shares else None


def throughput_verdict(end: dict[str, Any], points: Sequence[dict[str, Any]], peak_source: str | None) -> str:
    """What a sweep shows, in words from its own fit, knee and peak share, each named only
    where the rounds' noise allows it: a fixed overhead only when the fit found one, the fit's
    quality, the clock, and the load it was measured under."""
    lead = _throughput_lead(end, points)
    fit = end["fit"]
    r2 = fit.get("r2_time")
    quality = f" (R² {fixed(r2, 2)})" if r2 is not None else ""
    if fit.get("t0_s") is None:
        return join(lead, "Too few batch sizes ran to fit a model of step time.")
    if fit.get("t0_constrained") or not fit["t0_s"]:
        text = (
            "Step time grew in proportion to the batch, about "
            f"**{sig(fit['t1_s_per_sample'] * 1e6)} µs per sample**{quality}: the fit found no "
            "fixed per-step overhead it could measure (held at zero). At these sizes the "
            "work per sample dominates; try a smaller model or smaller batches to see the "
            "overhead."
        )
    else:
        text = (
            f"A step cost about **{sig(fit['t0_s'] * 1e3)} ms** of "
            "fixed overhead (kernel launches, Python, the optimizer) plus "
            f"**{sig(fit['t1_s_per_sample'] * 1e6)} µs per sample** — the model "
            f"t(B) = t0 + t1·B fitted to your points{quality}."
        )
        cross, span = end.get("crossover_batch_size"), end.get("crossover_range")
        if cross:
            text += (
                f" The two are equal at batch **{cross:.0f}** (68 % range {span[0]:.0f}–"
                f"{span[1]:.0f}): well below it a step is mostly overhead, so a larger "
                "batch adds samples almost for free; well above it each step grows with "
                "the batch."
            )
        elif span:
            text += (
                f" Where the two are equal is not clear from these rounds (somewhere in "
                f"batch {span[0]:.0f}–{span[1]:.0f})."
            )
    knee, span = end.get("knee_batch_size"), end.get("knee_range")
    largest = max((p["batch_size"] for p in points if p.get("status") == "ok"), default=None)
    if knee and knee == largest:
        text += (
            f" Samples/s were still rising at the largest batch that ran ({largest}): the "
            "device did not saturate within this sweep."
        )
    elif knee:
        text += f" Samples/s come within 10% of your best from batch {knee}."
    elif span:
        text += (
            f" Samples/s level off somewhere between batch {span[0]:.0f} and {span[1]:.0f}: "
            "the rounds disagree too much to name one knee."
        )
    if peak_source:
        text += (
            f" The share of peak FLOP/s (peak: {peak_source}) says how much useful "
            "arithmetic the device did; NVML's utilisation on a GPU only says a kernel was "
            "running."
        )
    busy = contention(points)
    clock = end.get("clock")
    if clock == THREAD_CLOCK:
        text += (
            " Each step was timed by its own thread's CPU time, which other processes "
            "taking the core do not lengthen: these are what the device does"
            + (
                f", though other processes kept about {percent(busy, 0)} of the CPU busy (the "
                "wall-clock rates, what you waited, are in the table)."
                if busy is not None and busy > CONTENDED
                else "."
            )
        )
    elif clock == DEVICE_CLOCK:
        text += (
            " Each step was timed between two CUDA events on the GPU's own timeline: "
            "what the device did, the wall-clock rates beside them in the table."
        )
    elif busy is not None and busy > CONTENDED:
        text += (
            f" While it measured, other processes kept about {percent(busy, 0)} of the CPU busy: "
            "these rates are lower and noisier than on an idle machine."
        )
    return join(lead, text)


def _throughput_lead(end: dict[str, Any], points: Sequence[dict[str, Any]]) -> str:
    """A sweep's takeaway: how far samples/s rose over the batches, and where they level off
    (only where the rounds allow naming it)."""
    ok = sorted(
        (p for p in points if p.get("status") == "ok" and p.get("samples_per_sec")),
        key=lambda p: p["batch_size"],
    )
    if len(ok) < 2:
        return "Too few batch sizes ran to compare their samples/s."
    first, best = ok[0], max(ok, key=lambda p: p["samples_per_sec"])
    text = (
        f"Samples/s rose {fixed(best['samples_per_sec'] / first['samples_per_sec'], 1)}× from "
        f"batch {first['batch_size']} to batch {best['batch_size']}"
    )
    knee, span = end.get("knee_batch_size"), end.get("knee_range")
    if knee and knee == ok[-1]["batch_size"]:
        return text + ", still rising at the largest batch."
    if knee:
        return text + f", within 10% of the best from batch {knee}."
    if span:
        return text + f", levelling off somewhere in batch {span[0]:.0f}–{span[1]:.0f}."
    return text + "."


# ----- gradient accumulation -----
def accumulation_verdict(r: dict[str, Any]) -> tuple[str, str]:
    """(level "success" | "warning" | "error", text) for an accum_check result: equivalent only
    when the first step's gradients agree and the parameters still agree after every step."""
    head = (
        f"Relative gradient difference **{sig(r['rel_grad_diff'])}** at the first step; "
        f"largest parameter difference after {r['steps']} steps "
        f"**{sig(r['max_abs_param_diff'])}** — "
    )
    shape = f"{r['accumulation_steps']} micro-batches of {r['micro_batch']}"
    if not r["equivalent"]:
        return "error", join(
            f"Not equivalent: {shape} did not give the gradient of one batch of {r['effective_batch_size']}.",
            head + "the accumulated gradient is not one big batch's.",
        )
    if r.get("drift_grew"):
        return "warning", join(
            f"Equivalent at the first step, but the parameters drifted apart by "
            f"{sig(r['max_abs_param_diff'], 2)} over {r['steps']} steps.",
            head
            + (
                "the gradients agree to float32 rounding, but over the steps that rounding grew: "
                "accumulation sums the same numbers in another order, and a model can amplify the "
                "tiny difference (normalisation layers divide by small variances). The same "
                "computation, not the same bits."
            ),
        )
    return "success", join(
        f"Equivalent: {shape} gave one batch of {r['effective_batch_size']}'s "
        f"gradient, to float32 rounding ({sig(r['rel_grad_diff'], 2)}).",
        head + "what is left is float32 rounding (summing in a different "
        "order), at the first step and after the last.",
    )


SAME_SPEED = 0.1  # accumulated samples/s within this share of one batch's: "about as fast"


def accumulation_why(r: dict[str, Any]) -> str:
    """Why the check came out as it did: each pitfall switched on, or, with none, what
    accumulation buys (memory) and what this run measured it cost in speed: faster, about as
    fast or slower, from the run's own samples/s (the same bands as the prediction's)."""
    k = r["accumulation_steps"]
    why = []
    if r["unscaled_loss"]:
        why.append(
            f"Without the 1/k the summed gradient is k = {k} times too large: the "
            f"relative difference is k − 1 = {k - 1}."
        )
    if r["norm"] == "batch":
        why.append(
            "BatchNorm normalises with each micro-batch's own mean and variance, so the "
            "forward pass itself differs from one batch of k·b."
        )
    if r["variable_length"]:
        why.append(
            "Each micro-batch averaged over its own tokens: a micro-batch with few "
            "tokens weighs as much as one with many. Divide the summed token losses by "
            "the token count of the whole batch instead."
        )
    if why:
        return " ".join(why)
    text = (
        "Accumulation saves memory: the activations of one micro-batch at a time. What it "
        "costs in speed depends on the device: "
    )
    big, small = r.get("big_samples_per_sec"), r.get("accumulated_samples_per_sec")
    if not big or not small:
        return text + "this run did not time it."
    ratio, shape = round(small / big, 2), f"{k} × {r['micro_batch']}"  # as shown
    if ratio < 1 - SAME_SPEED - 1e-9:
        return text + (
            f"here {shape} ran {fixed(ratio, 2)}× the samples/s of one batch, the same "
            "samples in smaller pieces that used the device less well."
        )
    if ratio > 1 + SAME_SPEED + 1e-9:
        return text + (
            f"here {shape} ran {fixed(ratio, 2)}× the samples/s of one batch: on this "
            f"device batch {r['effective_batch_size']} was no more efficient than "
            f"batch {r['micro_batch']} (the throughput page measures where samples/s "
            "stops rising)."
        )
    return text + (
        f"here {shape} ran about as fast as one batch ({fixed(ratio, 2)}×): the device "
        f"was as busy with batches of {r['micro_batch']}."
    )


MODULE_WORDS = {
    "Linear": "linear layer",
    "Conv2d": "conv layer",
    "BatchNorm1d": "BatchNorm",
    "BatchNorm2d": "BatchNorm",
    "LayerNorm": "LayerNorm",
    "GroupNorm": "GroupNorm",
    "Embedding": "embedding",
}


def layer_rows(per_layer: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-parameter gradient differences with names a person reads: each kind of layer
    numbered in the model's order ("net.4.weight" of an MLP's second Linear -> "linear layer 2
    weights"), not by its index among the model's modules. Without the module's type (a result
    stored before it was recorded): "layer 4 weights", the module index."""
    numbers: dict[str, int] = {}  # module path -> its number among layers of its kind
    counts: dict[str, int] = {}

    def name(row: dict[str, Any]) -> str:
        path, _, leaf = row["layer"].rpartition(".")
        kind = {"weight": "weights", "bias": "biases"}.get(leaf, leaf)
        module = row.get("module")
        if module is not None:
            words = MODULE_WORDS.get(module, module)
            if path not in numbers:
                counts[words] = numbers[path] = counts.get(words, 0) + 1
            return f"{words} {numbers[path]} {kind}"
        index = next((p for p in reversed(path.split(".")) if p.isdigit()), None)
        return f"layer {index} {kind}" if index is not None else f"{path} {kind}"

    return [
        {
            "parameter": name(row),
            "largest gradient difference": row["max_abs_grad_diff"],
            "gradient norm": row["grad_norm"],
        }
        for row in per_layer
    ]


# ----- the finder -----
FINDER_DEVICE_BATCH = 256  # the simulated device holds about this batch of the chosen model
FINDER_DEVICE_MARGIN = 0.10  # the margin the simulated device is sized with (page and CLI)


def simulated_device(cfg: RunConfig, margin: float) -> tuple[int, int]:
    """(bytes, batch) of the finder's default device on a CPU, where nothing limits memory (the
    host's gigabytes fit the whole training set of any model here, and "use the full batch" is
    no lesson): what the model's predicted footprint needs at about FINDER_DEVICE_BATCH (at most
    half the training set), with the margin on top."""
    checked = cfg.validated()[0]
    batch = max(1, min(FINDER_DEVICE_BATCH, checked.train_samples // 2))
    need = footprint.predict(dataclasses.replace(checked, batch_size=batch, accumulation_steps=1)).peak
    return int(need / (1.0 - margin)), batch


# ----- memory -----
def memory_verdict(end: dict[str, Any], points: Sequence[dict[str, Any]]) -> str | None:
    """What the memory sweep showed, from its fit and points; None without a fit."""
    fit = end.get("fit") or {}
    if fit.get("m0_bytes") is None:
        return None
    ok = [p for p in points if p["status"] == "ok" and p.get("memory_breakdown")]
    static = None
    if ok:
        parts = ok[0]["memory_breakdown"]
        static = sum(parts.get(k) or 0 for k in ("parameters", "gradients", "optimizer_state"))
    oom = next((p for p in points if p["status"] == "oom"), None)
    lead = (
        f"Memory grew {format_bytes(fit['m_bytes_per_sample'])} per sample on top of "
        f"{format_bytes(fit['m0_bytes'])} that no batch size changes"
        + (f"; batch {oom['batch_size']} ran out" if oom else "")
        + "."
    )
    text = f"Memory was {format_bytes(fit['m0_bytes'])} that did not depend on the batch"
    if static:
        text += f" (parameters, gradients and optimizer state: {format_bytes(static)} of it)"
    text += (
        f", plus {format_bytes(fit['m_bytes_per_sample'])} per sample — the activations "
        "kept for the backward pass. "
    )
    source = ok[0].get("memory_source") if ok else None
    if source == "accounted":
        text += (
            "On the CPU this line fits by construction (R² "
            f"{fixed(fit['r2_memory'], 3)}): accounted memory is a sum of per-sample terms, so "
            "the lesson is in its two numbers, not in how straight it is. It is a lower "
            "bound of what the process holds: the allocator's temporaries and Python's "
            "own objects come on top (the Fit-a-bigger-batch page reads the real peak). "
        )
    elif fit.get("r2_memory") is not None:
        text += f"The allocator's readings lie on that line with R² {fixed(fit['r2_memory'], 3)}. "
    largest = end.get("max_batch_size_fits")
    predicted = end.get("predicted_max_batch_size")
    if oom and largest:
        text += (
            f"Batch {largest} was the largest that ran; batch {oom['batch_size']} ran out "
            f"of memory" + (" (simulated)" if oom.get("simulated") else "") + "."
        )
        if predicted:
            text += (
                f" The line predicts batch {predicted} as the largest that fits: the "
                "finder verifies such a prediction with a real step."
            )
    elif largest:
        text += f"Every batch up to {largest} fitted."
    return join(lead, text)


def finder_use(r: dict[str, Any]) -> str:
    """The finder's advice, one sentence: "Use batch 250 × 4 accumulation steps."."""
    lesson = BY_SLUG["finder"]
    steps = r["accumulation_steps"]
    return lesson.text(
        "use_batch", batch=r["batch_size"], accum=lesson.text("accum", steps=steps) if steps > 1 else ""
    )


def finder_summary(r: dict[str, Any]) -> str:
    """A find_result's closing text, plain (the words: bsdemo/content/finder.toml): what
    `bsdemo find` prints and bsdemo.api.find_batch_size returns; the page shows the same advice
    (finder_use) in bold above its chart."""
    lesson = BY_SLUG["finder"]
    if r["batch_size"] is None:  # a search that ended on a diverged run says only that
        diverged = r.get("outcome") == "diverged"
        return lesson.text("diverged" if diverged else "no_fit", message=r["message"])
    text = " ".join(
        [
            finder_use(r),
            r["message"],
            lesson.text("tested", tested=", ".join(map(str, r["tested_batch_sizes"])), probes=r["probes"]),
        ]
    )
    if "lr_linear" in r:
        text += (
            " "
            + lesson.text(
                "lr_rules",
                batch=r["effective_batch_size"],
                linear=sig(r["lr_linear"], 4),
                sqrt=sig(r["lr_sqrt"], 4),
            ).strip()
        )
    return text
