"""Lesson 11's architecture study: each architecture trained at each batch size for a fixed
budget (bsdemo.architectures says which runs, and reads them); one architecture_point per run,
an architecture_summary per architecture, then architectures_end."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bsdemo.architectures import ARCHITECTURES, DEFAULT_SECONDS, analyse, run_config
from bsdemo.config import RunConfig
from bsdemo.engine.measure import THREAD_CLOCK, WALL_CLOCK, HostLoad, cpu_clock, resolve_device
from bsdemo.engine.train import train
from bsdemo.jobkinds import JobStopped
from bsdemo.units import setting

WALL_SLACK = 6.0  # a CPU-time budget's run may take this many times as long on the wall clock


def architecture_point(
    cfg: RunConfig,
    architecture: str,
    batch: int,
    seconds: float,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Train one architecture at one batch for `seconds`; its samples/s, peak memory and
    quality at the end of the budget."""
    run_cfg = run_config(cfg, architecture, batch, seconds)
    # where the training thread does all the work (a one-thread CPU), the budget is its CPU
    # time: the same work however busy the machine, which only takes longer; the wall clock
    # (run_config's time cap, made looser here) is left as a bound. Elsewhere: the wall clock.
    by_cpu = cpu_clock(resolve_device(run_cfg.device)) is not None
    if by_cpu:
        run_cfg = dataclasses.replace(run_cfg, time_limit_s=seconds * WALL_SLACK)
    end = initial = None
    quality = ARCHITECTURES[architecture].quality
    load = HostLoad()  # what else used the CPU meanwhile
    # quality is the test split's: the train split is not evaluated (a fifth of the wait)
    for event in train(
        run_cfg, should_stop=should_stop, evaluations="test", cpu_budget_s=seconds if by_cpu else None
    ):
        if event.kind == "end":
            end = event
        elif event.kind == "eval" and event.step == 0:  # where it started: did it learn?
            initial = getattr(event, quality, None)
    s = end.summary
    if end.status == "cancelled" and not s.get("time_capped"):
        raise JobStopped(end.message)
    return {
        "kind": "architecture_point",
        "architecture": architecture,
        "batch_size": batch,
        "lr": run_cfg.lr,
        "warmup_steps": run_cfg.warmup_steps,
        "seconds": seconds,
        "budget_clock": THREAD_CLOCK if by_cpu else WALL_CLOCK,
        # the time budget ending the run is the plan, not a stop
        "status": "completed" if s.get("time_capped") else end.status,
        "steps": s.get("steps"),
        "epochs": s.get("epochs"),
        # by the training thread's CPU time where the budget is (like with like whatever
        # the load), else the wall clock
        "samples_per_sec": s.get("cpu_samples_per_sec") if by_cpu else s.get("samples_per_sec"),
        "wall_samples_per_sec": s.get("samples_per_sec"),
        "peak_memory_bytes": s.get("peak_memory_bytes"),
        "memory_source": s.get("memory_source"),
        "quality": s.get(quality),
        "initial_quality": initial,
        "test_accuracy": s.get("test_accuracy"),
        "frechet_reference": s.get("frechet_reference"),
        "others_cpu_share": load.others_share() if run_cfg.device != "cuda" else None,
        "message": end.message,
    }


def architecture_sweep(
    cfg: RunConfig,
    architectures: Sequence[str],
    batch_sizes: Sequence[int],
    seconds: float = DEFAULT_SECONDS,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    for name in architectures:
        points = []
        for batch in batch_sizes:
            if should_stop is not None and should_stop():
                raise JobStopped("Stopped before it finished.")
            points.append(architecture_point(cfg, name, batch, seconds, should_stop))
            yield points[-1]
        yield analyse(name, points)
    yield {
        "kind": "architectures_end",
        "architectures": list(architectures),
        "batch_sizes": list(batch_sizes),
        "seconds": seconds,
        "message": f"Trained {len(architectures)} architectures at {len(batch_sizes)} batch "
        f"sizes each, {setting(seconds)} s of training per run, the lr scaled by √(B/32).",
    }
