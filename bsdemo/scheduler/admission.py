"""Admission: what may be queued (the limits, the sharing rules) and what may start now (a free
worker, the device to itself for a measurement, room in the device's memory).

Pure functions of the scheduler's state, plus the per-browser history of submits; the scheduler
calls them under its lock. Nothing here starts or stops anything.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable
from typing import Any

from bsdemo import footprint, jobkinds
from bsdemo.config import CheckedRunConfig, ConfigError, RunConfig
from bsdemo.jobkinds import Cost
from bsdemo.limits import Limits
from bsdemo.runs import ACTIVE
from bsdemo.scheduler.job import Job
from bsdemo.units import fixed, format_bytes, setting

# what a CUDA context and its kernels hold per worker process, outside torch's counters (about
# 0.3-0.6 GiB on current GPUs and drivers): kept out of what admission shares among runs
CUDA_CONTEXT_BYTES = 512 * 2**20
MAX_COMPARISON = 64  # runs in one comparison
EXCLUSIVE_WAIT = "a measurement has the device to itself until it ends"


def exclusive_wait(running: list[Job]) -> str:
    """What a run waits for behind the measurement that has the device: named by its kind."""
    kind = next((j.kind for j in running if j.exclusive), None)
    label = jobkinds.KINDS[kind].label if kind in jobkinds.KINDS else ""
    return f"a {label} has the device to itself until it ends" if label else EXCLUSIVE_WAIT


class ActiveRunError(RuntimeError):
    """A sharing limit says not now: the browser's, its address's or the server's queue is full,
    or too many runs were started in the last minute."""


# ----- what may be queued -----
def checked(
    cfg: RunConfig,
    kind: str,
    options: dict[str, Any] | None,
    limits: Limits,
    device: dict[str, Any] | None = None,
) -> tuple[CheckedRunConfig, dict, Cost]:
    """(checked cfg with its time cap, checked options, cost bound), or ConfigError. A config
    the page already checked (a CheckedRunConfig) is not checked again.

    A training run's cap is its own, at most max_wall_s (its engine ends it there and says so);
    any other kind's cap is max_wall_s for the whole job, kept by its worker. With the workers'
    device known, a job whose largest step cannot finish within its cap is refused
    (check_step_time)."""
    cfg, _ = cfg.validated()
    limit = limits.max_wall_s
    if kind == "train":
        cfg = cfg.with_time_limit(min(cfg.time_limit_s or limit, limit))
        wall = cfg.time_limit_s
    else:
        cfg, wall = cfg.with_time_limit(None), limit
    options, cost = jobkinds.assess(kind, cfg, options, limits, wall)
    if not jobkinds.KINDS[kind].unbounded_steps:
        check_step_time(cfg, cost, device, options)
    return cfg, options, cost


def check_step_time(
    cfg: RunConfig, cost: Cost, device: dict[str, Any] | None, options: dict[str, Any] | None = None
) -> None:
    """A ConfigError when one optimizer step of the job's largest batch needs more time than its
    whole cap even at the device's peak (footprint.step_flops_bound: a lower bound on the work,
    over the best speed this device showed): it could never finish a step, only hold a worker.
    It names the setting that makes the step large."""
    peak = (device or {}).get("peak_flops")
    if not peak or not cost.wall_s:
        return
    work = footprint.step_flops_bound(cfg, cost.effective_batch)
    least = work / peak
    if least <= cost.wall_s:
        return
    sizes = (options or {}).get("batch_sizes")
    if sizes and max(sizes) >= cost.effective_batch:  # the job's own list holds the big one
        name, value, lower = "batch_sizes", sizes, "the largest batch size"
    elif "micro_batch" in (options or {}):
        name, value, lower = "micro_batch", options["micro_batch"], "micro_batch or accum"
    elif cfg.accumulation_steps > 1 and cost.effective_batch == cfg.effective_batch_size:
        name, value = "accumulation_steps", cfg.accumulation_steps
        lower = "accumulation_steps or batch_size"
    else:
        name, value, lower = "batch_size", cfg.batch_size, "batch_size"
    raise ConfigError(
        name,
        value,
        (
            f"a job whose largest step can finish within its time cap of {setting(cost.wall_s)} s: one "
            f"step of {cost.effective_batch:,} samples needs at least {fixed(work / 1e9, 0)} GFLOP, and "
            f"this {(device or {}).get('type', 'device').upper()} peaks at {fixed(peak / 1e9, 0)} GFLOP/s, "
            f"so a step takes at least {fixed(least, 0)} s: lower {lower}, width or depth"
        ),
    )


def comparison(
    cfgs: list[RunConfig], limits: Limits, device: dict[str, Any] | None = None
) -> list[tuple[CheckedRunConfig, dict, Cost]]:
    """A comparison's runs, checked as one job: their steps add up, and so do their time caps
    (runs without one share what max_wall_s leaves). Raises ConfigError."""
    if not 1 <= len(cfgs) <= MAX_COMPARISON:
        raise ConfigError("runs", len(cfgs), f"a comparison of 1 to {MAX_COMPARISON} runs")
    valid = [cfg.validated()[0] for cfg in cfgs]
    limit = limits.max_wall_s
    given = sum(min(c.time_limit_s, limit) for c in valid if c.time_limit_s)
    uncapped = sum(not c.time_limit_s for c in valid)
    share = (limit - given) / uncapped if uncapped else 0.0
    if given > limit + 1e-9 or (uncapped and share <= 0):
        raise ConfigError(
            "time_limit_s",
            round(given, 3),
            f"at most {setting(limit)} s for the whole comparison on this server (its limit max_wall_s)",
        )
    valid = [c.with_time_limit(min(c.time_limit_s, limit) if c.time_limit_s else share) for c in valid]
    runs = [checked(c, "train", None, limits, device) for c in valid]
    costs = [cost for *_, cost in runs]
    limits.check(
        Cost(
            max(c.micro_batch for c in costs),
            max(c.effective_batch for c in costs),
            sum(c.steps for c in costs),
            sum(c.wall_s for c in costs),
            max(c.predicted_bytes for c in costs),
        )
    )
    return runs


def active_units(jobs: Iterable[Job], owner: str | None = None, address: str | None = None) -> set[int]:
    """Queued or running runs of an owner (or of an address), a comparison counted once."""
    return {
        j.group or j.id
        for j in jobs
        if j.status in ACTIVE
        and (owner is None or j.owner == owner)
        and (address is None or j.address == address)
    }


class SharingLimits:
    """Active runs per browser and per address (a comparison is one), the server's whole queue,
    and submits per minute per browser."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self._submits: dict[str, collections.deque[float]] = {}
        self._changes: dict[str, collections.deque[float]] = {}

    def admit(
        self, jobs: list[Job], owner: str, address: str | None, runs: int, replaces: bool = False
    ) -> None:
        """Raise ActiveRunError if `runs` more runs of owner's may not be queued now; else count
        them as submitted. A run that `replaces` one of the owner's (dropped from `jobs`: Live
        mode's change, a Run while one waits) adds nothing to the queue: it counts against the
        larger live_changes_per_minute instead of submits_per_minute."""
        lim = self.limits
        units = active_units(jobs, owner)
        if len(units) >= lim.max_active_per_session:
            raise ActiveRunError(
                f"you already have {len(units)} run(s) going or waiting (the "
                f"limit here is {lim.max_active_per_session}): stop one or wait "
                "for it to finish"
            )
        if address is not None:
            at_address = active_units(jobs, address=address)
            if len(at_address) >= lim.max_active_per_address:
                raise ActiveRunError(
                    f"{len(at_address)} runs from your network address are going "
                    f"or waiting (the limit here is {lim.max_active_per_address},"
                    " max_active_per_address): wait for one to finish"
                )
        active = sum(j.status in ACTIVE for j in jobs)
        if active + runs > lim.max_queued:
            raise ActiveRunError(
                f"the server's queue is full: {active} runs going or waiting "
                f"(the limit here is {lim.max_queued}, max_queued); try again "
                "in a minute"
            )
        now = time.monotonic()
        counts, most, what, name = (
            (
                self._changes,
                lim.live_changes_per_minute,
                "changes of a run's settings",
                "live_changes_per_minute",
            )
            if replaces
            else (self._submits, lim.submits_per_minute, "runs started", "submits_per_minute")
        )
        recent = counts.setdefault(owner, collections.deque())
        while recent and now - recent[0] > 60.0:
            recent.popleft()
        if len(recent) >= most:
            raise ActiveRunError(
                f"{len(recent)} {what} in the last minute (the limit here is "
                f"{most}, {name}); wait {60.0 - (now - recent[0]):.0f} s"
            )
        recent.append(now)


# ----- what may start now -----
def usable_memory(limits: Limits, device_info: dict[str, Any] | None, workers: int) -> int | None:
    """Device memory admission shares among concurrent runs: the device's total (or the limits'
    device_memory) less the margin and, on CUDA, the workers' contexts. None while no worker has
    reported its device, or when the device does not say."""
    info = device_info or {}
    total = limits.device_memory or info.get("total_memory_bytes")
    if not total:
        return None
    contexts = workers * CUDA_CONTEXT_BYTES if info.get("type") == "cuda" else 0
    return max(int(total * (1 - limits.memory_margin)) - contexts, 0)


def blocker(
    job: Job, running: int, exclusive: int, held: int, free_workers: int, workers: int, usable: int | None
) -> str | None:
    """Why job cannot start beside `running` jobs (`exclusive` of them measurements, holding
    `held` bytes) with `free_workers` of `workers` idle, or None."""
    if exclusive:
        return EXCLUSIVE_WAIT
    if job.exclusive and running:
        return f"a measurement needs the device to itself: waiting for {running} run(s) to end"
    if not free_workers:
        return f"all {workers} worker(s) are busy"
    if running and usable is not None and held + job.predicted_bytes > usable:
        return (
            f"waiting for memory: it needs {format_bytes(job.predicted_bytes)} "
            f"(predicted); {format_bytes(max(usable - held, 0))} of the "
            f"{format_bytes(usable)} shared here is free now"
        )
    return None


def alone_notice(job: Job, usable: int | None) -> str | None:
    """What to tell the owner of a run that starts alone predicted to need more than is shared."""
    if usable is None or job.predicted_bytes <= usable:
        return None
    return (
        f"Predicted to need {format_bytes(job.predicted_bytes)}, more than the "
        f"{format_bytes(usable)} this device shares out: it runs alone, and may run out of "
        "memory."
    )
