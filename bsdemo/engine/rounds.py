"""A batch size measured as the sweep measures it: blocks of warm-up then timed full steps of the
lab's own loop, taken in rounds in shuffled order, and the sweep_point made from them (the
sweep's, and the finder's probes and throughput reading)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bsdemo.config import RunConfig
from bsdemo.engine.measure import HostLoad
from bsdemo.engine.train import train
from bsdemo.fits import StepTimeReading, step_time_reading
from bsdemo.jobkinds import sweep_point_steps
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


def _point(batch_size: int, status: str, **fields) -> dict[str, Any]:
    base = {
        "kind": "sweep_point",
        "batch_size": batch_size,
        "status": status,
        "samples_per_sec": None,
        "step_time_s": None,
        "peak_memory_bytes": None,
        "memory_source": None,
        "simulated": False,
        "utilization_pct": None,
        "memory_breakdown": None,
        "achieved_flops": None,
        "share_of_peak": None,
        "tokens_per_sec": None,
        "others_cpu_share": None,
        "timing": None,
        "message": "",
    }
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
    own = bool(blocks) and all(blk.own for blk in blocks) and len({blk.own_clock for blk in blocks}) == 1
    return (
        blocks[0].own_clock if own else WALL_CLOCK,
        [statistics.median(blk.own if own else blk.wall) for blk in blocks],
    )


def _block(
    cfg: RunConfig,
    b: int,
    warmup: int,
    timed: int,
    min_timed_s: float,
    rounds: int,
    budget: int | None,
    should_stop: Callable[[], bool] | None = None,
) -> _Block:
    """Warm-up, then at least `timed` full steps of batch b lasting at least min_timed_s (one
    of up to 2 × `rounds` rounds); should_stop (Stop, the job's time cap) ends it between two
    steps."""
    # room for partial last batches between the full ones; enough() ends the block early
    most = sweep_point_steps(timed, min_timed_s, rounds)
    run_cfg = dataclasses.replace(
        cfg, batch_size=b, accumulation_steps=1, epochs=None, max_steps=warmup + most
    )
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
                own, clock = (
                    (event.cpu_time_s, THREAD_CLOCK)
                    if event.cpu_time_s is not None
                    else (event.device_time_s, DEVICE_CLOCK)
                )
                if own is not None:
                    block.own.append(own)
                    block.own_clock = clock
                if event.peak_memory_bytes is not None:
                    block.peak_memory_bytes = max(block.peak_memory_bytes or 0, event.peak_memory_bytes)
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


def measure_in_rounds(
    cfg: RunConfig,
    blocks: dict[int, list[_Block]],
    rounds: int,
    per_round: tuple[int, float, int],
    budget: int | None,
    should_stop: Callable[[], bool] | None,
    first: int = 0,
) -> Iterator[list[int]]:
    """Measure every batch size in `blocks` round after round, each round in its own shuffled
    order, adding each round's _Block to its list; yields the sizes each round measured. Rounds
    `first` to `rounds` take every size, later ones (up to twice `rounds`) only a size whose
    rounds still disagree by more than timing.NOISY. Stop ends it between two blocks."""
    for r in range(first, 2 * rounds):
        todo = [
            b for b, done in blocks.items() if r < rounds or disagreement(_round_medians(done)[1]) > NOISY
        ]
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


def probe(
    cfg: RunConfig,
    b: int,
    warmup: int,
    timed: int,
    budget: int | None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the sweep_point, the device) of one quick measurement of batch b: warm-up and exactly
    `timed` steps (the finder's memory probes)."""
    block = _block(cfg, b, warmup, timed, 0.0, 1, budget, should_stop)
    point = _measured_point(b, [block], warmup) if block.status == "ok" else _failed_point(b, block)
    return point, block.device


def throughput_in_rounds(
    cfg: RunConfig,
    sizes: Sequence[int],
    budget: int | None,
    should_stop: Callable[[], bool] | None = None,
    rounds: int = SWEEP_ROUNDS,
    timed_steps: int = SWEEP_TIMED_STEPS,
    min_timed_s: float = SWEEP_MIN_TIMED_S,
) -> tuple[StepTimeReading, list[dict[str, Any]]]:
    """Samples/s of `sizes` by the sweep's protocol (rounds, shuffled, the stable clock): the
    reading (knee and crossover with their ranges) and one row per size that ran."""
    per_round = _per_round(timed_steps, min_timed_s, rounds)
    blocks: dict[int, list[_Block]] = {b: [] for b in sizes}
    for _ in measure_in_rounds(cfg, blocks, rounds, per_round, budget, should_stop):
        pass
    ran = {b: _measured_point(b, done, SWEEP_WARMUP_STEPS) for b, done in blocks.items() if done}
    reading = step_time_reading({b: p["timing"]["round_step_time_s"] for b, p in ran.items()})
    rows = [
        {
            "batch_size": b,
            "samples_per_sec": p["samples_per_sec"],
            "samples_per_sec_q1": p["timing"]["samples_per_sec"]["q1"],
            "samples_per_sec_q3": p["timing"]["samples_per_sec"]["q3"],
            "rounds": p["timing"]["rounds"],
            "clock": p["timing"]["clock"],
            "peak_memory_bytes": p["peak_memory_bytes"],
        }
        for b, p in sorted(ran.items())
    ]
    return reading, rows


def _failed_point(b: int, block: _Block) -> dict[str, Any]:
    summary, source = block.summary, block.summary.get("memory_source")
    if block.status == "oom":
        return _point(
            b,
            "oom",
            memory_source=source,
            simulated=bool(summary.get("simulated")),
            memory_breakdown=summary.get("memory_breakdown"),
            message=summary.get("oom_error") or block.message,
        )
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
        b,
        "ok",
        samples_per_sec=rate.median,
        step_time_s=step.median,
        tokens_per_sec=rate.median * first.tokens_per_sample,
        peak_memory_bytes=max(peaks) if peaks else None,
        memory_source=first.summary.get("memory_source"),
        utilization_pct=statistics.fmean(utils) if utils else None,
        memory_breakdown=first.summary.get("memory_breakdown"),
        others_cpu_share=statistics.fmean(shares) if shares else None,
        timing={
            "clock": clock,
            "rounds": len(blocks),
            "steps": step.n,
            "step_time_s": step.as_dict(),
            "samples_per_sec": rate.as_dict(),
            "round_step_time_s": rounds,
            "wall_step_time_s": wall.as_dict(),
            "wall_samples_per_sec": wall.per(b).median,
        },
        message=f"{step.n} timed steps in {len(blocks)} round(s) after {warmup} warm-up, "
        f"timed by {clock}" + (f" ({partial} partial batches not timed)" if partial else ""),
    )
