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
from dataclasses import dataclass, field
from typing import Any

from bsdemo.config import RunConfig
from bsdemo.engine.flops import device_peak_flops, flops_per_sample, tf32_ops
from bsdemo.engine.measure import HostLoad, device_info
from bsdemo.engine.train import check_budget, prepare, train
from bsdemo.fits import StepTimeReading, linear_fit, step_time_reading
from bsdemo.jobkinds import sweep_config, sweep_point_steps
from bsdemo.timing import (
    DEVICE_CLOCK,
    NOISY,
    THREAD_CLOCK,
    WALL_CLOCK,
    disagreement,
    round_order,
    spread,
)
from bsdemo.tunables import (
    SWEEP_MIN_TIMED_S,
    SWEEP_ROUND_WARMUP_STEPS,
    SWEEP_ROUNDS,
    SWEEP_TIMED_STEPS,
    SWEEP_WARMUP_STEPS,
)


def sweep(cfg: RunConfig, batch_sizes: Sequence[int], *, warmup_steps: int = SWEEP_WARMUP_STEPS,
          timed_steps: int = SWEEP_TIMED_STEPS, min_timed_s: float = SWEEP_MIN_TIMED_S,
          rounds: int = SWEEP_ROUNDS, memory_budget_bytes: int | None = None,
          continue_after_oom: bool = False, should_stop: Callable[[], bool] | None = None
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
    yield {"kind": "sweep_start", "batch_sizes": list(batch_sizes), "config": vars(cfg).copy(),
           "warmup_steps": warmup_steps, "timed_steps": timed_steps, "min_timed_s": min_timed_s,
           "rounds": rounds, "memory_budget_bytes": memory_budget_bytes, "exclusive": True,
           "train_samples": cfg.train_samples, "flops_per_sample": per_sample,
           "peak_flops": peak, "peak_source": peak_source}
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
            peak_source = (f"raised to the best rate measured here ({peak_source} read lower: a "
                           "probe under load, or faster math such as TF32)")
        point["share_of_peak"] = point["achieved_flops"] / peak if peak else None
        return point

    for b in batch_sizes:  # round 1, in the given order
        if stop_reason is None and stopped():
            stop_reason = "the sweep was stopped"
        if stop_reason is not None:
            point = _point(b, "not_tried", message=f"Not tried: {stop_reason}.")
        elif b > cfg.train_samples:
            point = _point(b, "not_tried", message=f"Not tried: larger than the "
                           f"{cfg.train_samples} training samples.")
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
    for todo in measure_in_rounds(cfg, blocks, rounds, per_round, memory_budget_bytes,
                                  should_stop, first=1):
        for b in todo:
            points[b] = finish(b) | {"replaces": True}
            yield points[b]
    yield _end([points[b] for b in batch_sizes], memory_budget_bytes, device) | {
        "flops_per_sample": per_sample, "peak_flops": peak, "peak_source": peak_source}


def _point(batch_size: int, status: str, **fields) -> dict[str, Any]:
    base = {"kind": "sweep_point", "batch_size": batch_size, "status": status,
            "samples_per_sec": None, "step_time_s": None, "peak_memory_bytes": None,
            "memory_source": None, "simulated": False, "utilization_pct": None,
            "memory_breakdown": None, "achieved_flops": None, "share_of_peak": None,
            "tokens_per_sec": None, "others_cpu_share": None, "timing": None,
            "message": ""}
    base.update(fields)
    return base


@dataclass
class _Block:
    """One round's measurement of one batch size: its timed full steps by both clocks."""
    status: str  # "ok", or the run's end status ("oom", "failed", "cancelled", ...)
    wall: list[float] = field(default_factory=list)  # seconds per timed full step
    # the same steps by the device's own clock, if it has one: the thread's CPU time (a
    # one-thread CPU) or CUDA event time; `own_clock` names it
    own: list[float] = field(default_factory=list)
    own_clock: str | None = None
    partial: int = 0  # an epoch's shorter last batches, not timed
    peak_memory_bytes: int | None = None
    utilization: list[float] = field(default_factory=list)
    others_cpu_share: float | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    device: dict[str, Any] | None = None
    tokens_per_sample: int = 1


def _per_round(timed_steps: int, min_timed_s: float, rounds: int) -> tuple[int, float, int]:
    """(steps, seconds, rounds) of one round's block: a point's minimums shared over its rounds."""
    return max(1, math.ceil(timed_steps / rounds)), min_timed_s / rounds, rounds


def _round_medians(blocks: list[_Block]) -> tuple[str, list[float]]:
    """(the clock, each round's median step time by it): the device's own clock (thread CPU
    time, CUDA event time) where every round has the same one, else the wall clock."""
    own = bool(blocks) and all(blk.own for blk in blocks) and len(
        {blk.own_clock for blk in blocks}) == 1
    return (blocks[0].own_clock if own else WALL_CLOCK,
            [statistics.median(blk.own if own else blk.wall) for blk in blocks])


def _block(cfg: RunConfig, b: int, warmup: int, timed: int, min_timed_s: float, rounds: int,
           budget: int | None, should_stop: Callable[[], bool] | None = None) -> _Block:
    """Warm-up, then at least `timed` full steps of batch b lasting at least min_timed_s (one
    of up to 2 × `rounds` rounds); should_stop (Stop, the job's time cap) ends it between two
    steps."""
    # room for partial last batches between the full ones; enough() ends the block early
    most = sweep_point_steps(timed, min_timed_s, rounds)
    run_cfg = dataclasses.replace(cfg, batch_size=b, accumulation_steps=1, epochs=None,
                                  max_steps=warmup + most)
    block = _Block("failed")
    steps, start, end = 0, None, None
    timed_s, seen = 0.0, 0

    def enough() -> bool:
        return len(block.wall) >= timed and timed_s >= min_timed_s

    def stop() -> bool:
        return enough() or (should_stop is not None and should_stop())

    load = HostLoad()
    for event in train(run_cfg, evaluations=False, memory_budget_bytes=budget, should_stop=stop):
        if event.kind == "step":
            steps += 1
            # an epoch's partial last batch is a shorter step of fewer samples: timing it as a
            # step of b would mix two step times (at batch 1024 of digits' 1438, every other)
            if steps > warmup and event.samples_seen - seen == b:
                block.wall.append(event.step_time_s)
                own, clock = ((event.cpu_time_s, THREAD_CLOCK) if event.cpu_time_s is not None
                              else (event.device_time_s, DEVICE_CLOCK))
                if own is not None:
                    block.own.append(own)
                    block.own_clock = clock
                if event.peak_memory_bytes is not None:
                    block.peak_memory_bytes = max(block.peak_memory_bytes or 0,
                                                  event.peak_memory_bytes)
                if event.utilization_pct is not None:
                    block.utilization.append(event.utilization_pct)
                timed_s += event.cpu_time_s or event.step_time_s
            elif steps > warmup:
                block.partial += 1
            seen = event.samples_seen
        elif event.kind == "start":
            start = event
        elif event.kind == "end":
            end = event
    block.others_cpu_share = load.others_share()
    block.summary, block.message = end.summary, end.message
    block.device = start.device if start else None
    block.tokens_per_sample = start.tokens_per_sample if start else 1
    if end.status == "cancelled" and block.wall:  # stopped by us, or Stop: the steps it timed count
        block.status = "ok"
    elif end.status == "completed":
        block.status = "ok" if block.wall else "failed"
        block.message = block.message if block.wall else "No full batch was timed."
    else:
        block.status = end.status
    if len(block.own) != len(block.wall):  # a clock is the whole block's, or no block's
        block.own, block.own_clock = [], None
    return block


def measure_in_rounds(cfg: RunConfig, blocks: dict[int, list[_Block]], rounds: int,
                      per_round: tuple[int, float, int], budget: int | None,
                      should_stop: Callable[[], bool] | None, first: int = 0
                      ) -> Iterator[list[int]]:
    """Measure every batch size in `blocks` round after round, each round in its own shuffled
    order, adding each round's _Block to its list; yields the sizes each round measured. Rounds
    `first` to `rounds` take every size, later ones (up to twice `rounds`) only a size whose
    rounds still disagree by more than timing.NOISY. Stop ends it between two blocks."""
    for r in range(first, 2 * rounds):
        todo = [b for b, done in blocks.items()
                if r < rounds or disagreement(_round_medians(done)[1]) > NOISY]
        if not todo or (should_stop is not None and should_stop()):
            return
        for b in round_order(todo, r, cfg.seed):
            if should_stop is not None and should_stop():
                return
            warmup = SWEEP_ROUND_WARMUP_STEPS if blocks[b] else SWEEP_WARMUP_STEPS
            block = _block(cfg, b, warmup, *per_round, budget, should_stop)
            if block.status == "ok":  # a round that failed (Stop) adds nothing
                blocks[b].append(block)
        yield todo


def probe(cfg: RunConfig, b: int, warmup: int, timed: int, budget: int | None,
          should_stop: Callable[[], bool] | None = None
          ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the sweep_point, the device) of one quick measurement of batch b: warm-up and exactly
    `timed` steps (the finder's memory probes)."""
    block = _block(cfg, b, warmup, timed, 0.0, 1, budget, should_stop)
    point = (_measured_point(b, [block], warmup) if block.status == "ok"
             else _failed_point(b, block))
    return point, block.device


def throughput_in_rounds(cfg: RunConfig, sizes: Sequence[int], budget: int | None,
                         should_stop: Callable[[], bool] | None = None,
                         rounds: int = SWEEP_ROUNDS, timed_steps: int = SWEEP_TIMED_STEPS,
                         min_timed_s: float = SWEEP_MIN_TIMED_S
                         ) -> tuple[StepTimeReading, list[dict[str, Any]]]:
    """Samples/s of `sizes` by the sweep's protocol (rounds, shuffled, the stable clock): the
    reading (knee and crossover with their ranges) and one row per size that ran."""
    per_round = _per_round(timed_steps, min_timed_s, rounds)
    blocks: dict[int, list[_Block]] = {b: [] for b in sizes}
    for _ in measure_in_rounds(cfg, blocks, rounds, per_round, budget, should_stop):
        pass
    ran = {b: _measured_point(b, done, SWEEP_WARMUP_STEPS) for b, done in blocks.items() if done}
    reading = step_time_reading({b: p["timing"]["round_step_time_s"] for b, p in ran.items()})
    rows = [{"batch_size": b, "samples_per_sec": p["samples_per_sec"],
             "samples_per_sec_q1": p["timing"]["samples_per_sec"]["q1"],
             "samples_per_sec_q3": p["timing"]["samples_per_sec"]["q3"],
             "rounds": p["timing"]["rounds"], "clock": p["timing"]["clock"],
             "peak_memory_bytes": p["peak_memory_bytes"]}
            for b, p in sorted(ran.items())]
    return reading, rows


def _failed_point(b: int, block: _Block) -> dict[str, Any]:
    summary, source = block.summary, block.summary.get("memory_source")
    if block.status == "oom":
        return _point(b, "oom", memory_source=source, simulated=bool(summary.get("simulated")),
                      memory_breakdown=summary.get("memory_breakdown"),
                      message=summary.get("oom_error") or block.message)
    return _point(b, block.status, memory_source=source, message=block.message)


def _measured_point(b: int, blocks: list[_Block], warmup: int) -> dict[str, Any]:
    """A batch size's point from all its rounds: the median step and the middle half of the
    steps by the stable clock (the device's own where it has one), the wall clock beside it."""
    clock, rounds = _round_medians(blocks)
    own = clock != WALL_CLOCK
    times = [t for blk in blocks for t in (blk.own if own else blk.wall)]
    step, wall = spread(times), spread([t for blk in blocks for t in blk.wall])
    rate = step.per(b)
    shares = [blk.others_cpu_share for blk in blocks if blk.others_cpu_share is not None]
    peaks = [blk.peak_memory_bytes for blk in blocks if blk.peak_memory_bytes is not None]
    utils = [u for blk in blocks for u in blk.utilization]
    partial = sum(blk.partial for blk in blocks)
    first = blocks[0]
    return _point(
        b, "ok", samples_per_sec=rate.median, step_time_s=step.median,
        tokens_per_sec=rate.median * first.tokens_per_sample,
        peak_memory_bytes=max(peaks) if peaks else None,
        memory_source=first.summary.get("memory_source"),
        utilization_pct=statistics.fmean(utils) if utils else None,
        memory_breakdown=first.summary.get("memory_breakdown"),
        others_cpu_share=statistics.fmean(shares) if shares else None,
        timing={"clock": clock, "rounds": len(blocks), "steps": step.n,
                "step_time_s": step.as_dict(), "samples_per_sec": rate.as_dict(),
                "round_step_time_s": rounds, "wall_step_time_s": wall.as_dict(),
                "wall_samples_per_sec": wall.per(b).median},
        message=f"{step.n} timed steps in {len(blocks)} round(s) after {warmup} warm-up, "
                f"timed by {clock}" + (f" ({partial} partial batches not timed)" if partial else ""))


def _end(points: list[dict[str, Any]], budget: int | None,
         device: dict[str, Any] | None) -> dict[str, Any]:
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
        "fit": {"t0_s": t_fit.intercept if t_fit else None,
                "t1_s_per_sample": t_fit.slope if t_fit else None,
                "r2_time": t_fit.r2 if t_fit else None,
                "t0_constrained": bool(t_fit and t_fit.constrained),
                "t0_range_s": reading.t0_range, "t1_range_s_per_sample": reading.t1_range,
                "m0_bytes": m_fit.intercept if m_fit else None,
                "m_bytes_per_sample": m_fit.slope if m_fit else None,
                "r2_memory": m_fit.r2 if m_fit else None},
        # named only where the rounds' noise leaves it within one doubling; the range always
        "crossover_batch_size": reading.crossover, "crossover_range": reading.crossover_range,
        "max_batch_size_fits": max(sizes) if sizes else None,  # the largest that ran: measured
        "predicted_max_batch_size": predicted,  # from the memory fit: a prediction
        "knee_batch_size": reading.knee, "knee_range": reading.knee_range,
        "clock": clocks.pop() if len(clocks) == 1 else None,
        "first_oom_batch_size": oom["batch_size"] if oom else None,
        "memory_budget_bytes": budget, "capacity_bytes": capacity, "device": device,
    }
