"""Batch-size sweeps: per batch size, warm-up steps then timed full training steps.

Each point runs the Training Lab's own loop (`train`) for warmup + timed optimizer steps with
evaluations off, so a sweep's samples/s is the lab's samples/s. After the first out-of-memory
the larger sizes are marked "not_tried" unless asked to continue. The end record carries the
fits t(B) = t0 + t1·B and M(B) = M0 + m·B, the largest batch that ran, and the throughput knee.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bsdemo.config import RunConfig
from bsdemo.engine.flops import device_peak_flops, flops_per_sample, tf32_ops
from bsdemo.engine.measure import HostLoad, device_info
from bsdemo.engine.train import check_budget, prepare, train
from bsdemo.fits import crossover_batch, knee_batch, linear_fit, nonnegative_fit
from bsdemo.jobkinds import sweep_config, sweep_point_steps

DEFAULT_WARMUP_STEPS = 3  # untimed: allocator, kernel selection, caches
DEFAULT_TIMED_STEPS = 8  # at least this many steps are timed; their median is the step time
# ... and they last at least this long: eight 0.3 ms steps are one scheduler hiccup away from a
# wrong point (repeat sweeps on a shared 2-core VM disagreed by up to 24% per point without it)
DEFAULT_MIN_TIMED_S = 0.1


def sweep(cfg: RunConfig, batch_sizes: Sequence[int], *, warmup_steps: int = DEFAULT_WARMUP_STEPS,
          timed_steps: int = DEFAULT_TIMED_STEPS, min_timed_s: float = DEFAULT_MIN_TIMED_S,
          memory_budget_bytes: int | None = None, continue_after_oom: bool = False,
          should_stop: Callable[[], bool] | None = None) -> Iterator[dict[str, Any]]:
    """Yield sweep_start, one sweep_point per batch size, then sweep_end (all plain dicts).

    Each point times at least `timed_steps` steps and at least `min_timed_s` seconds of them
    (at most MAX_TIMED_STEPS); 0 times exactly `timed_steps`."""
    cfg = sweep_config(cfg, batch_sizes)
    run = prepare(cfg)
    if memory_budget_bytes is not None:
        check_budget(run, memory_budget_bytes)  # before any output: a clear error
    probe = run.data.x_train[:8], run.data.y_train[:8]
    per_sample = flops_per_sample(run.model, *probe)
    math = tf32_ops(cfg.model) if run.device.type == "cuda" else []
    peak, peak_source = device_peak_flops(device_info(run.device), math)
    del run, probe
    yield {"kind": "sweep_start", "batch_sizes": list(batch_sizes), "config": vars(cfg).copy(),
           "warmup_steps": warmup_steps, "timed_steps": timed_steps, "min_timed_s": min_timed_s,
           "memory_budget_bytes": memory_budget_bytes, "exclusive": True,
           "train_samples": cfg.train_samples, "flops_per_sample": per_sample,
           "peak_flops": peak, "peak_source": peak_source}
    points: list[dict[str, Any]] = []
    stop_reason: str | None = None
    device: dict[str, Any] | None = None
    for b in batch_sizes:
        if stop_reason is None and should_stop is not None and should_stop():
            stop_reason = "the sweep was stopped"
        if stop_reason is not None:
            point = _point(b, "not_tried", message=f"Not tried: {stop_reason}.")
        elif b > cfg.train_samples:
            point = _point(b, "not_tried", message=f"Not tried: larger than the "
                           f"{cfg.train_samples} training samples.")
        else:
            load = HostLoad()
            point, device = _measure(cfg, b, warmup_steps, timed_steps, min_timed_s,
                                     memory_budget_bytes, should_stop)
            point["others_cpu_share"] = load.others_share()
            if point["samples_per_sec"] is not None:
                point["achieved_flops"] = per_sample * point["samples_per_sec"]
                if peak and point["achieved_flops"] > peak:
                    # no device beats its own peak: the reference was read low (a probe under
                    # load, or faster math than the datasheet's fp32), so the best rate
                    # achieved is the peak from here on, and the page says so
                    peak = point["achieved_flops"]
                    peak_source = (f"raised to the best rate measured here ({peak_source} read "
                                   "lower: a probe under load, or faster math such as TF32)")
                point["share_of_peak"] = point["achieved_flops"] / peak if peak else None
            if point["status"] == "oom" and not continue_after_oom:
                stop_reason = f"batch {b} ran out of memory"
        points.append(point)
        yield point
    yield _end(points, memory_budget_bytes, device) | {
        "flops_per_sample": per_sample, "peak_flops": peak, "peak_source": peak_source}


def _point(batch_size: int, status: str, **fields) -> dict[str, Any]:
    base = {"kind": "sweep_point", "batch_size": batch_size, "status": status,
            "samples_per_sec": None, "step_time_s": None, "peak_memory_bytes": None,
            "memory_source": None, "simulated": False, "utilization_pct": None,
            "memory_breakdown": None, "achieved_flops": None, "share_of_peak": None,
            "tokens_per_sec": None, "others_cpu_share": None,
            "message": ""}
    base.update(fields)
    return base


def _measure(cfg: RunConfig, b: int, warmup: int, timed: int, min_timed_s: float,
             budget: int | None, should_stop: Callable[[], bool] | None = None
             ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One point: warm-up, then timed full steps of batch b; should_stop (Stop, the job's time
    cap) ends it between two steps."""
    # room for partial last batches between the full ones; enough() ends the point early
    most = sweep_point_steps(timed, min_timed_s)
    run_cfg = dataclasses.replace(cfg, batch_size=b, accumulation_steps=1, epochs=None,
                                  max_steps=warmup + most)
    steps, full, start, end = [], [], None, None  # full: timed steps of a whole batch of b
    timed_s, seen = 0.0, 0

    def enough() -> bool:
        return len(full) >= timed and timed_s >= min_timed_s

    def stop() -> bool:
        return enough() or (should_stop is not None and should_stop())

    for event in train(run_cfg, evaluations=False, memory_budget_bytes=budget, should_stop=stop):
        if event.kind == "step":
            steps.append(event)
            # an epoch's partial last batch is a shorter step of fewer samples: timing it as a
            # step of b would mix two step times (at batch 1024 of digits' 1438, every other)
            if len(steps) > warmup and event.samples_seen - seen == b:
                full.append(event)
                timed_s += event.step_time_s
            seen = event.samples_seen
        elif event.kind == "start":
            start = event
        elif event.kind == "end":
            end = event
    if end.status == "cancelled" and enough():  # stopped by us: the point has its timed steps
        end = dataclasses.replace(end, status="completed")
    summary = end.summary
    device = start.device if start else None
    source = summary.get("memory_source")
    if end.status == "oom":
        return _point(b, "oom", memory_source=source, simulated=bool(summary.get("simulated")),
                      memory_breakdown=summary.get("memory_breakdown"),
                      message=summary.get("oom_error") or end.message), device
    if end.status != "completed":
        return _point(b, end.status, memory_source=source, message=end.message), device
    window = full or steps[warmup:] or steps
    partial = len(steps) - warmup - len(full) if full else 0
    step_time = statistics.median(e.step_time_s for e in window)
    peaks = [e.peak_memory_bytes for e in window if e.peak_memory_bytes is not None]
    utils = [e.utilization_pct for e in window if e.utilization_pct is not None]
    tokens = start.tokens_per_sample if start else 1
    return _point(b, "ok", samples_per_sec=b / step_time, step_time_s=step_time,
                  tokens_per_sec=b * tokens / step_time,
                  peak_memory_bytes=max(peaks) if peaks else None, memory_source=source,
                  utilization_pct=statistics.fmean(utils) if utils else None,
                  memory_breakdown=summary.get("memory_breakdown"),
                  message=f"{len(window)} timed steps after {warmup} warm-up"
                  + (f" ({partial} partial batches not timed)" if partial else "")), device


def _end(points: list[dict[str, Any]], budget: int | None,
         device: dict[str, Any] | None) -> dict[str, Any]:
    ok = [p for p in points if p["status"] == "ok"]
    sizes = [p["batch_size"] for p in ok]
    t_fit = nonnegative_fit(sizes, [p["step_time_s"] for p in ok])
    mem = [p for p in ok if p["peak_memory_bytes"] is not None]
    m_fit = linear_fit([p["batch_size"] for p in mem], [p["peak_memory_bytes"] for p in mem])
    capacity = budget or (device or {}).get("total_memory_bytes")
    predicted = None
    if m_fit is not None and capacity:
        limit = m_fit.solve(capacity)
        predicted = math.floor(limit) if limit is not None and limit >= 1 else None
    oom = next((p for p in points if p["status"] == "oom"), None)
    return {
        "kind": "sweep_end",
        "fit": {"t0_s": t_fit.intercept if t_fit else None,
                "t1_s_per_sample": t_fit.slope if t_fit else None,
                "r2_time": t_fit.r2 if t_fit else None,
                "t0_constrained": bool(t_fit and t_fit.constrained),
                "m0_bytes": m_fit.intercept if m_fit else None,
                "m_bytes_per_sample": m_fit.slope if m_fit else None,
                "r2_memory": m_fit.r2 if m_fit else None},
        "crossover_batch_size": crossover_batch(t_fit) if t_fit else None,
        "max_batch_size_fits": max(sizes) if sizes else None,  # the largest that ran: measured
        "predicted_max_batch_size": predicted,  # from the memory fit: a prediction
        "knee_batch_size": knee_batch(sizes, [p["samples_per_sec"] for p in ok]),
        "first_oom_batch_size": oom["batch_size"] if oom else None,
        "memory_budget_bytes": budget, "capacity_bytes": capacity, "device": device,
    }
