"""Batch-size sweeps: per batch size, warm-up steps then timed full training steps.

Each point runs the Training Lab's own loop (`train`) for warmup + timed optimizer steps with
evaluations off, so a sweep's samples/s is the lab's samples/s. After the first out-of-memory
the larger sizes are marked "not_tried" unless asked to continue. The end record carries the
fits t(B) = t0 + t1·B and M(B) = M0 + m·B, the largest batch that ran, and the throughput knee.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bsdemo.config import RunConfig
from bsdemo.engine.flops import device_peak_flops, flops_per_sample, tf32_ops
from bsdemo.engine.measure import device_info
from bsdemo.engine.rounds import (
    _Block,
    _block,
    _failed_point,
    _measured_point,
    _per_round,
    _point,
    measure_in_rounds,
    probe,
    throughput_in_rounds,
)
from bsdemo.engine.train import check_budget, prepare
from bsdemo.fits import linear_fit, step_time_reading
from bsdemo.jobkinds import sweep_config
from bsdemo.tunables import (
    SWEEP_MIN_TIMED_S,
    SWEEP_ROUNDS,
    SWEEP_TIMED_STEPS,
    SWEEP_WARMUP_STEPS,
)

__all__ = ["probe", "sweep", "throughput_in_rounds"]


def sweep(
    cfg: RunConfig,
    batch_sizes: Sequence[int],
    *,
    warmup_steps: int = SWEEP_WARMUP_STEPS,
    timed_steps: int = SWEEP_TIMED_STEPS,
    min_timed_s: float = SWEEP_MIN_TIMED_S,
    rounds: int = SWEEP_ROUNDS,
    memory_budget_bytes: int | None = None,
    continue_after_oom: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield sweep_start, a sweep_point per batch size as its first round ends, the same point
    again (`replaces`: True) after each later round, then sweep_end (all plain dicts).

    Round 1 measures the sizes in the order given: memory, an out-of-memory (after which the
    larger sizes are not tried unless continue_after_oom), warm-up, the first timings. Rounds 2
    to `rounds` measure every size that ran again, each round in its own shuffled order, so
    that load that comes and goes falls on different sizes in different rounds; a size whose
    rounds still disagree by more than timing.NOISY gets up to `rounds` more. Each point times at
    least `timed_steps` steps lasting at least `min_timed_s` seconds, shared out over its
    rounds (0: exactly `timed_steps`)."""
    cfg = sweep_config(cfg, batch_sizes)
    run = prepare(cfg)
    if memory_budget_bytes is not None:
        check_budget(run, memory_budget_bytes)  # before any output: a clear error
    probe = run.data.x_train[:8], run.data.y_train[:8]
    per_sample = flops_per_sample(run.model, *probe, run.loss)
    math_ops = tf32_ops(cfg.model) if run.device.type == "cuda" else []
    peak, peak_source = device_peak_flops(device_info(run.device), math_ops)
    del run, probe
    yield {
        "kind": "sweep_start",
        "batch_sizes": list(batch_sizes),
        "config": vars(cfg).copy(),
        "warmup_steps": warmup_steps,
        "timed_steps": timed_steps,
        "min_timed_s": min_timed_s,
        "rounds": rounds,
        "memory_budget_bytes": memory_budget_bytes,
        "exclusive": True,
        "train_samples": cfg.train_samples,
        "flops_per_sample": per_sample,
        "peak_flops": peak,
        "peak_source": peak_source,
    }
    per_round = _per_round(timed_steps, min_timed_s, rounds)
    points: dict[int, dict[str, Any]] = {}
    blocks: dict[int, list[_Block]] = {}
    stop_reason: str | None = None
    device: dict[str, Any] | None = None

    def stopped() -> bool:
        return should_stop is not None and should_stop()

    def finish(b: int) -> dict[str, Any]:
        """The point of batch b from its rounds so far, with its share of the peak."""
        nonlocal peak, peak_source
        point = _measured_point(b, blocks[b], warmup_steps)
        point["achieved_flops"] = per_sample * point["samples_per_sec"]
        if peak and point["achieved_flops"] > peak:
            # no device beats its own peak: the reference was read low (a probe under load, or
            # faster math than the datasheet's fp32), so the best rate achieved is the peak from
            # here on, and the page says so
            peak = point["achieved_flops"]
            peak_source = (
                f"raised to the best rate measured here ({peak_source} read lower: a "
                "probe under load, or faster math such as TF32)"
            )
        point["share_of_peak"] = point["achieved_flops"] / peak if peak else None
        return point

    for b in batch_sizes:  # round 1, in the given order
        if stop_reason is None and stopped():
            stop_reason = "the sweep was stopped"
        if stop_reason is not None:
            point = _point(b, "not_tried", message=f"Not tried: {stop_reason}.")
        elif b > cfg.train_samples:
            point = _point(
                b, "not_tried", message=f"Not tried: larger than the {cfg.train_samples} training samples."
            )
        else:
            block = _block(cfg, b, warmup_steps, *per_round, memory_budget_bytes, should_stop)
            device = block.device or device
            if block.status == "ok":
                blocks[b] = [block]
                point = finish(b)
            else:
                point = _failed_point(b, block)
            if point["status"] == "oom" and not continue_after_oom:
                stop_reason = f"batch {b} ran out of memory"
        points[b] = point
        yield point
    for todo in measure_in_rounds(cfg, blocks, rounds, per_round, memory_budget_bytes, should_stop, first=1):
        for b in todo:
            points[b] = finish(b) | {"replaces": True}
            yield points[b]
    yield _end([points[b] for b in batch_sizes], memory_budget_bytes, device) | {
        "flops_per_sample": per_sample,
        "peak_flops": peak,
        "peak_source": peak_source,
    }


def _end(points: list[dict[str, Any]], budget: int | None, device: dict[str, Any] | None) -> dict[str, Any]:
    ok = [p for p in points if p["status"] == "ok"]
    sizes = [p["batch_size"] for p in ok]
    reading = step_time_reading({p["batch_size"]: p["timing"]["round_step_time_s"] for p in ok})
    t_fit = reading.fit
    mem = [p for p in ok if p["peak_memory_bytes"] is not None]
    m_fit = linear_fit([p["batch_size"] for p in mem], [p["peak_memory_bytes"] for p in mem])
    capacity = budget or (device or {}).get("total_memory_bytes")
    predicted = None
    if m_fit is not None and capacity:
        limit = m_fit.solve(capacity)
        predicted = math.floor(limit) if limit is not None and limit >= 1 else None
    oom = next((p for p in points if p["status"] == "oom"), None)
    clocks = {p["timing"]["clock"] for p in ok}
    return {
        "kind": "sweep_end",
        "fit": {
            "t0_s": t_fit.intercept if t_fit else None,
            "t1_s_per_sample": t_fit.slope if t_fit else None,
            "r2_time": t_fit.r2 if t_fit else None,
            "t0_constrained": bool(t_fit and t_fit.constrained),
            "t0_range_s": reading.t0_range,
            "t1_range_s_per_sample": reading.t1_range,
            "m0_bytes": m_fit.intercept if m_fit else None,
            "m_bytes_per_sample": m_fit.slope if m_fit else None,
            "r2_memory": m_fit.r2 if m_fit else None,
        },
        # named only where the rounds' noise leaves it within one doubling; the range always
        "crossover_batch_size": reading.crossover,
        "crossover_range": reading.crossover_range,
        "max_batch_size_fits": max(sizes) if sizes else None,  # the largest that ran: measured
        "predicted_max_batch_size": predicted,  # from the memory fit: a prediction
        "knee_batch_size": reading.knee,
        "knee_range": reading.knee_range,
        "clock": clocks.pop() if len(clocks) == 1 else None,
        "first_oom_batch_size": oom["batch_size"] if oom else None,
        "memory_budget_bytes": budget,
        "capacity_bytes": capacity,
        "device": device,
    }
