"""What the student's runs say about a lesson's "Predict first" question: the index of the
answer (bsdemo.lessons.Lesson.answers) they support, and the numbers that show it; None when
the runs do not answer it yet. Pure functions of finished results, unit-tested."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bsdemo.recipes.comparisons import points
from bsdemo.recipes.measurements import SAME_SPEED
from bsdemo.runs import JobSnapshot, batch_extremes
from bsdemo.units import fixed, format_bytes, percent, signed

Judged = tuple[int, str] | None


def lab_prediction(snaps: Sequence[JobSnapshot]) -> Judged:
    """Updates per epoch at the smallest and the largest batch the student ran to the end."""
    pair = batch_extremes(snaps)
    if pair is None:
        return None
    small, large = pair
    a, b = small.updates_per_epoch, large.updates_per_epoch
    index = 0 if b > a else 1 if b == a else 2
    return index, (
        f"batch {small.effective_batch} made {a:,} updates per epoch, batch "
        f"{large.effective_batch} made {b:,}: ceil(N / B) falls as B grows"
    )


def throughput_prediction(points: Sequence[dict[str, Any]]) -> Judged:
    """A step at batch 64 against a step at batch 1, both measured in the sweep."""
    times = {
        p["batch_size"]: p["step_time_s"] for p in points if p.get("status") == "ok" and p.get("step_time_s")
    }
    if 1 not in times or 64 not in times:
        return None
    ratio = times[64] / times[1]
    index = 0 if ratio >= 32 else 1 if ratio < 1.5 else 2
    return index, (
        f"a step took {fixed(times[1] * 1e3, 2)} ms at batch 1 and {fixed(times[64] * 1e3, 2)} ms "
        f"at batch 64: {fixed(ratio, 1)} times as long for 64 times the samples"
    )


def regimes_prediction(rows: Sequence[dict[str, Any]]) -> Judged:
    """Which of the three regimes (regime_configs' order) made the most weight updates."""
    if len(rows) != 3 or any(r["status"] in ("queued", "running") for r in rows):
        return None
    counts = [r["weight updates"] or 0 for r in rows]
    index = max(range(3), key=counts.__getitem__)
    return index, ", ".join(f"{r['run']} made {c:,}" for r, c in zip(rows, counts, strict=True))


def lr_prediction(rows: Sequence[dict[str, Any]]) -> Judged:
    """The batch k times larger with the lr kept, against the reference (lr_variants' order)."""
    if len(rows) != 5 or any(r["status"] in ("queued", "running") for r in rows):
        return None
    ref, same = rows[0], rows[1]
    if ref["test accuracy"] is None or same["status"] not in ("completed", "diverged"):
        return None
    acc = same["test accuracy"] if same["status"] == "completed" else 0.0
    delta = points(acc, ref["test accuracy"])  # the words follow the number shown
    index = 1 if delta < -1 else 2 if delta > 1 else 0
    return index, (
        f"the reference reached {percent(ref['test accuracy'])}, the larger batch with the "
        f"same lr {percent(acc)} ({signed(delta)} points)"
    )


def memory_prediction(points: Sequence[dict[str, Any]]) -> Judged:
    """Peak memory at the largest batch that ran against half that batch, both measured."""
    peaks = {
        p["batch_size"]: p["peak_memory_bytes"]
        for p in points
        if p.get("status") == "ok" and p.get("peak_memory_bytes")
    }
    pairs = [b for b in sorted(peaks) if b // 2 in peaks and b % 2 == 0]
    if not pairs:
        return None
    big = pairs[-1]
    ratio = peaks[big] / peaks[big // 2]
    index = 0 if ratio >= 1.8 else 2 if ratio < 1.15 else 1
    return index, (
        f"batch {big // 2} peaked at {format_bytes(peaks[big // 2])} and batch {big} at "
        f"{format_bytes(peaks[big])}: × {fixed(ratio, 2)} for twice the batch — the "
        "activations double, the weights, gradients and optimizer state do not"
    )


def accumulation_prediction(result: dict[str, Any] | None) -> Judged:
    """Samples/s of k micro-batches of b against one batch of k·b, with both peaks."""
    if not result or not result.get("big_samples_per_sec"):
        return None
    # the ratio as shown (two decimals), in the Why's bands: the answer follows the figure
    ratio = round(result["accumulated_samples_per_sec"] / result["big_samples_per_sec"], 2)
    index = 0 if ratio > 1 + SAME_SPEED + 1e-9 else 2 if ratio < 1 - SAME_SPEED - 1e-9 else 1
    k, b = result["accumulation_steps"], result["micro_batch"]
    return index, (
        f"{k} × {b} trained {fixed(result['accumulated_samples_per_sec'], 0)} samples/s, "
        f"one batch of {k * b} {fixed(result['big_samples_per_sec'], 0)} (× {fixed(ratio, 2)}); "
        f"peak memory {format_bytes(result['accumulated_peak_memory_bytes'])} against "
        f"{format_bytes(result['big_peak_memory_bytes'])}"
    )


def doubling_trials(largest: int) -> int:
    """Trials doubling from batch 1 takes to pass `largest`: 1, 2, 4, … up to the largest power
    of two that fits, then the one that fails."""
    return max(1, int(largest)).bit_length() + 1


def finder_prediction(result: dict[str, Any] | None) -> Judged:
    """The trials doubling from batch 1 would take to pass the largest batch that fits (the
    last one failing), against the finder's own real runs."""
    if not result or not result.get("max_batch_size"):
        return None
    largest = int(result["max_batch_size"])
    trials = doubling_trials(largest)
    index = 0 if trials <= 3 else 1 if trials <= 8 else 2
    return index, (
        f"the largest batch that fits is {largest:,}: doubling from 1 takes {trials} "
        f"trials to pass it (and a bisection to pin it down); the finder took "
        f"{result['probes']} real runs"
    )
