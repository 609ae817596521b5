"""The scheduler: a FIFO queue of training jobs run by warm worker processes.

One `Scheduler` per server process. Workers are started with the `spawn` context (CUDA forbids
fork), import torch once, warm up, and then take jobs one at a time; events come back over one
results queue and land in bounded, column-wise buffers that pages read with `snapshot()`.

This module never imports torch: the server process stays light and responsive. The worker's
code is bsdemo.engine.worker, imported only in the child (`_worker_main`).
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import heapq
import logging
import multiprocessing as mp
import os
import queue
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any

from bsdemo import jobkinds
from bsdemo.config import ConfigError, RunConfig
from bsdemo.jobkinds import KINDS, Cost
from bsdemo.limits import MAX_WORKERS, Limits
from bsdemo.runs import ACTIVE, EVAL_FIELDS, STEP_FIELDS, JobSnapshot, Series, file_event
from bsdemo.store import RunStore
from bsdemo.units import format_bytes

log = logging.getLogger(__name__)
# measurements: nothing else may share the device meanwhile
EXCLUSIVE_KINDS = tuple(k.name for k in KINDS.values() if k.exclusive)
MAX_POINTS = 256  # sweep points / finder probes kept per job (a sweep has at most 64 sizes)
# what a CUDA context and its kernels hold per worker process, outside torch's counters (about
# 0.3-0.6 GiB on current GPUs and drivers): kept out of what admission shares among runs
CUDA_CONTEXT_BYTES = 512 * 2**20
ESTIMATE_EVERY_S = 0.5  # queue-wait estimates are recomputed at most this often


class ActiveRunError(RuntimeError):
    """A sharing limit says not now: the browser's, its address's or the server's queue is full,
    or too many runs were started in the last minute."""


@dataclass
class _Job:
    id: int
    owner: str
    config: RunConfig
    submitted_at: float
    steps: Series
    evals: Series
    status: str = "queued"
    worker: int | None = None
    start: dict | None = None
    latest: dict | None = None
    end: dict | None = None
    started_at: float | None = None
    finished_at: float | None = None
    shared_device: bool = False
    kind: str = "train"
    options: dict = field(default_factory=dict)
    points: list = field(default_factory=list)
    result: dict | None = None
    cancel_requested: bool = False
    group: int | None = None  # the comparison it belongs to (one unit for the session limit)
    last_seen: float = field(default_factory=time.monotonic)  # a page (or a caller) looked
    unattended: bool = False  # cancelled because nobody looked for the grace period
    stored_at: float | None = None
    predicted_bytes: int = 0  # the cost bound's memory at its largest batch: admission reserves it
    wait_reason: str | None = None
    notice: str | None = None
    address: str | None = None  # the client's connection address (per-address limit)
    wall_s: float | None = None  # the whole job's time cap (non-training kinds: the worker's)
    check_store: bool = False  # look in the run store before training (once the device is known)

    @property
    def exclusive(self) -> bool:
        return self.kind in EXCLUSIVE_KINDS

    def claim(self) -> int:
        """Device memory this run holds or will hold: the prediction, or more if measured."""
        latest = self.latest or {}
        measured = max((latest.get(k) or 0 for k in ("memory_reserved_bytes", "peak_memory_bytes")),
                       default=0)
        return max(self.predicted_bytes, measured)

    def workload(self) -> tuple:
        """What fixes a run's step time on one device (for wait estimates)."""
        c = self.config
        return (self.kind, c.dataset, c.model, c.norm, c.width, c.depth, c.batch_size,
                c.accumulation_steps, c.optimizer, c.samples)


@dataclass
class _Worker:
    index: int
    process: Any
    tasks: Any  # this worker's own task queue
    cancel: Any  # shared int: the id of a job to stop (checked between steps)
    job: int | None = None
    ready: bool = False
    started_at: float = field(default_factory=time.monotonic)


class Scheduler:
    """FIFO queue + worker processes + bounded per-job buffers. Thread-safe."""

    def __init__(self, workers: int | None = None, max_points: int = 1000, keep_finished: int = 200,
                 threads_per_worker: int | None = None, limits: Limits | None = None,
                 store: RunStore | None = None):
        """workers: concurrent runs on the device (default: limits.workers)."""
        self.limits = limits or Limits()
        workers = workers or self.limits.workers
        if not 1 <= workers <= MAX_WORKERS:
            raise ConfigError("workers", workers, f"a whole number from 1 to {MAX_WORKERS}")
        self._step_times: collections.OrderedDict[tuple, float] = collections.OrderedDict()
        self._durations: dict[str, collections.deque[float]] = {}
        self._estimates: tuple[float, dict[int, tuple[float, bool]]] = (-1.0, {})
        self.store = store
        self._submits: dict[str, collections.deque[float]] = {}
        self._ctx = mp.get_context("spawn")
        self._results = self._ctx.Queue()
        self._lock = threading.RLock()
        self._jobs: dict[int, _Job] = {}
        self._queue: collections.deque[int] = collections.deque()
        self._finished: collections.deque[int] = collections.deque()
        self._next_id = 1
        self._max_points = max_points
        self._keep_finished = keep_finished
        self._threads = threads_per_worker or default_threads(workers)
        self._device_info: dict[str, Any] | None = None
        self._closed = False
        self.restarts = 0  # workers replaced after dying
        self.store_error: str | None = None  # the last failure to write the run store
        self._workers = [self._start_worker(i) for i in range(workers)]
        self._collector = threading.Thread(target=self._collect, name="bsdemo-collector",
                                           daemon=True)
        self._collector.start()
        atexit.register(self.close)

    # ----- public API -----
    def submit(self, cfg: RunConfig, owner: str, kind: str = "train",
               options: dict[str, Any] | None = None, fresh: bool = False,
               address: str | None = None) -> int:
        """Queue a job for owner (a browser) connecting from address; returns its id.

        kind "train" trains cfg; the other kinds (bsdemo.jobkinds.KINDS) run their engine
        function with `options`, alone on the device. Every kind is checked against the same
        limits first. Raises ConfigError (invalid, or over a limit) or ActiveRunError (a sharing
        limit: not now).
        """
        cfg, options, cost = self._checked(cfg, kind, options)
        stored = None
        if kind == "train" and not fresh and self._device_info:
            stored = self._stored(cfg)
        with self._lock:
            if self._closed:
                raise RuntimeError("the scheduler is shut down")
            if stored is not None:
                return self._from_store(self._new_job(cfg, owner, cost, address=address), stored)
            self._admit(owner, address, 1)
            job = self._new_job(cfg, owner, cost, kind=kind, options=options, address=address,
                                check_store=kind == "train" and not fresh)
            self._queue.append(job.id)
            self._dispatch()
            return job.id

    def submit_group(self, cfgs: list[RunConfig], owner: str, address: str | None = None) -> list[int]:
        """Queue several training runs for one owner at once (a comparison); FIFO order.

        They count as the owner's one active run: another submit waits until all are done.
        The whole comparison is one job for the limits: its steps add up, and so do its time
        caps (runs without one share what the server's max_wall_s leaves). With several workers
        they may run side by side, and are then marked shared_device.
        """
        if not 1 <= len(cfgs) <= 64:
            raise ConfigError("runs", len(cfgs), "a comparison of 1 to 64 runs")
        checked = [cfg.validated()[0] for cfg in cfgs]
        limit = self.limits.max_wall_s
        given = sum(min(c.time_limit_s, limit) for c in checked if c.time_limit_s)
        uncapped = sum(not c.time_limit_s for c in checked)
        share = (limit - given) / uncapped if uncapped else 0.0
        if given > limit + 1e-9 or (uncapped and share <= 0):
            raise ConfigError("time_limit_s", round(given, 3),
                              f"at most {limit:g} s for the whole comparison on this server (its "
                              "limit max_wall_s)")
        checked = [dataclasses.replace(c, time_limit_s=min(c.time_limit_s, limit)
                                       if c.time_limit_s else share) for c in checked]
        runs = [self._checked(c, "train", None) for c in checked]
        self.limits.check(Cost(max(c.micro_batch for *_, c in runs),
                               max(c.effective_batch for *_, c in runs),
                               sum(c.steps for *_, c in runs), sum(c.wall_s for *_, c in runs),
                               max(c.predicted_bytes for *_, c in runs)))
        with self._lock:
            self._admit(owner, address, len(runs))
            ids = []
            group = self._next_id
            for cfg, _, cost in runs:
                job = self._new_job(cfg, owner, cost, group=group, address=address)
                self._queue.append(job.id)
                ids.append(job.id)
            self._dispatch()
            return ids

    def _checked(self, cfg: RunConfig, kind: str, options) -> tuple[RunConfig, dict, Cost]:
        """(validated cfg with its time cap, checked options, cost bound), or ConfigError.

        A training run's cap is its own, at most max_wall_s (its engine ends it there and says
        so); any other kind's cap is max_wall_s for the whole job, kept by its worker."""
        cfg, _ = cfg.validated()
        limit = self.limits.max_wall_s
        if kind == "train":
            cfg = dataclasses.replace(cfg, time_limit_s=min(cfg.time_limit_s or limit, limit))
            wall = cfg.time_limit_s
        else:
            cfg, wall = dataclasses.replace(cfg, time_limit_s=None), limit
        options, cost = jobkinds.assess(kind, cfg, options, self.limits, wall)
        return cfg, options, cost

    def _new_job(self, cfg: RunConfig, owner: str, cost: Cost, **fields) -> _Job:
        """A registered job with fresh bounded buffers. Caller holds the lock."""
        job = _Job(self._next_id, owner, cfg, time.time(), Series(STEP_FIELDS, self._max_points),
                   Series(EVAL_FIELDS, self._max_points), predicted_bytes=cost.predicted_bytes,
                   wall_s=cost.wall_s, **fields)
        self._next_id += 1
        self._jobs[job.id] = job
        return job

    def _active_units(self, owner: str | None = None, address: str | None = None) -> set[int]:
        """Queued or running runs of an owner (or of an address), a comparison counted once.
        Caller holds the lock."""
        return {j.group or j.id for j in self._jobs.values() if j.status in ACTIVE
                and (owner is None or j.owner == owner) and (address is None or j.address == address)}

    def _stored(self, cfg: RunConfig):
        """The run store's result for cfg on this device, or None; a store that fails to answer
        means running it fresh (and a line in the server log), never an error on the page."""
        if self.store is None or not self._device_info:
            return None
        try:
            return self.store.find(vars(cfg), self._device_info)
        except Exception as exc:  # noqa: BLE001 - a damaged store must not stop a run
            self.store_error = f"{type(exc).__name__}: {exc}"
            log.warning("run store lookup failed (%s); running it fresh", self.store_error)
            return None

    def _from_store(self, job: _Job, stored) -> int:
        """Finish job from a stored run (no worker, no device time). Caller holds the lock."""
        job.status = "completed"
        job.start, job.end = stored.start, stored.end
        job.started_at = job.finished_at = job.stored_at = stored.created
        job.steps.columns = {f: list(stored.steps.get(f, [])) for f in STEP_FIELDS}
        job.evals.columns = {f: list(stored.evals.get(f, [])) for f in EVAL_FIELDS}
        last = len(job.steps)
        job.latest = {f: job.steps.columns[f][-1] for f in STEP_FIELDS} if last else None
        self._finished.append(job.id)
        return job.id

    def _admit(self, owner: str, address: str | None, runs: int) -> None:
        """Sharing limits: active runs per browser and per address (a comparison is one), the
        server's whole queue, and submits per minute. Caller holds the lock."""
        lim = self.limits
        units = self._active_units(owner)
        if len(units) >= lim.max_active_per_session:
            raise ActiveRunError(f"you already have {len(units)} run(s) going or waiting (the "
                                 f"limit here is {lim.max_active_per_session}): stop one or wait "
                                 "for it to finish")
        if address is not None:
            at_address = self._active_units(address=address)
            if len(at_address) >= lim.max_active_per_address:
                raise ActiveRunError(f"{len(at_address)} runs from your network address are going "
                                     f"or waiting (the limit here is {lim.max_active_per_address},"
                                     " max_active_per_address): wait for one to finish")
        active = sum(j.status in ACTIVE for j in self._jobs.values())
        if active + runs > lim.max_queued:
            raise ActiveRunError(f"the server's queue is full: {active} runs going or waiting "
                                 f"(the limit here is {lim.max_queued}, max_queued); try again "
                                 "in a minute")
        now = time.monotonic()
        recent = self._submits.setdefault(owner, collections.deque())
        while recent and now - recent[0] > 60.0:
            recent.popleft()
        if len(recent) >= lim.submits_per_minute:
            raise ActiveRunError(f"{len(recent)} runs started in the last minute (the limit here "
                                 f"is {lim.submits_per_minute}); wait "
                                 f"{60.0 - (now - recent[0]):.0f} s")
        recent.append(now)

    def can_submit(self, owner: str) -> bool:
        """Whether the browser is below its limit of active runs (ignores the other limits)."""
        with self._lock:
            return len(self._active_units(owner)) < self.limits.max_active_per_session

    def heartbeat(self, owner: str) -> None:
        """A page of this browser is open and polling: its runs are attended. Only the owner's
        heartbeat counts: a stranger watching a run from a link does not keep it alive."""
        now = time.monotonic()
        with self._lock:
            for job in self._jobs.values():
                if job.owner == owner and job.status in ACTIVE:
                    job.last_seen = now

    def cancel(self, job_id: int | None, owner: str | None = None) -> bool:
        """Stop a job: a queued one at once, a running one between two steps. With `owner`,
        only that owner's job. Returns whether a stop was requested."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.status not in ACTIVE or (owner is not None and job.owner != owner):
                return False
            if job.status == "queued" and job.worker is None:
                self._queue.remove(job_id)
                self._finish(job, {"kind": "end", "status": "cancelled",
                                   "message": "Cancelled before it started.", "summary": {}})
            else:
                job.cancel_requested = True
                self._workers[job.worker].cancel.value = job_id
            return True

    def snapshot(self, job_id: int) -> JobSnapshot | None:
        """A copy of the job for drawing; looking does not attend it (see heartbeat)."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            position = (self._queue.index(job_id) + 1) if job_id in self._queue else None
            wait, bound = None, False
            if position:
                estimates = self._wait_estimates()
                if job_id not in estimates:  # queued since the last estimate
                    estimates = self._wait_estimates(force=True)
                wait, bound = estimates[job_id]
            return JobSnapshot(
                id=job.id, owner=job.owner, status=job.status, config=vars(job.config).copy(),
                queue_position=position, start=job.start, steps=job.steps.copy(),
                evals=job.evals.copy(), latest=job.latest, end=job.end, stride=job.steps.stride,
                submitted_at=job.submitted_at, started_at=job.started_at,
                finished_at=job.finished_at, shared_device=job.shared_device, kind=job.kind,
                options=dict(job.options), points=list(job.points), result=job.result,
                stored_at=job.stored_at, predicted_bytes=job.predicted_bytes,
                wait_reason=job.wait_reason if position == 1 else
                f"{position - 1} run(s) ahead of it in the queue" if position else None,
                estimated_wait_s=wait, wait_is_bound=bound, notice=job.notice)

    def active_job(self, owner: str) -> int | None:
        with self._lock:
            for job in self._jobs.values():
                if job.owner == owner and job.status in ACTIVE:
                    return job.id
        return None

    def wait(self, job_id: int, timeout: float = 60.0) -> JobSnapshot | None:
        """Block until the job ends (for the CLI, tests and benchmarks; pages poll instead).
        The caller is the job's owner, waiting: that attends the owner's jobs, as a page's
        heartbeat does (the runs of a comparison queued behind this one too)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                owner = self._jobs[job_id].owner if job_id in self._jobs else None
            if owner is not None:
                self.heartbeat(owner)
            snap = self.snapshot(job_id)
            if snap is None or snap.done:
                return snap
            time.sleep(0.02)
        return self.snapshot(job_id)

    @property
    def device_info(self) -> dict[str, Any] | None:
        """The workers' device, once a worker has started (None before)."""
        return self._device_info

    def load(self) -> dict[str, Any]:
        """What the server is doing now, for the sidebar: runs running and waiting, workers, and
        the device memory admission shares out and has given (predicted, or measured if more)."""
        with self._lock:
            running = [j for j in self._jobs.values() if j.status == "running"]
            return {"running": len(running), "queued": len(self._queue),
                    "workers": len(self._workers), "usable_memory_bytes": self.usable_memory(),
                    "held_memory_bytes": sum(j.claim() for j in running)}

    def workers_ready(self) -> int:
        with self._lock:
            return sum(w.ready for w in self._workers)

    def worker_pids(self) -> list[int]:
        with self._lock:
            return [w.process.pid for w in self._workers]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
        for w in workers:
            try:
                w.tasks.put(None)
            except (OSError, ValueError):
                pass
        for w in workers:
            w.process.join(timeout=2)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(timeout=2)

    # ----- internals -----
    def _start_worker(self, index: int) -> _Worker:
        tasks = self._ctx.Queue()
        cancel = self._ctx.RawValue("q", -1)  # lock-free: one writer, read between steps
        memory = (self.limits.device_memory, self.limits.memory_margin)  # its OS ceiling's basis
        process = self._ctx.Process(target=_worker_main, name=f"bsdemo-worker-{index}",
                                    args=(index, tasks, self._results, cancel, self._threads,
                                          memory),
                                    daemon=True)
        start_spawned(process)
        return _Worker(index, process, tasks, cancel)

    def usable_memory(self) -> int | None:
        """Device memory admission shares among concurrent runs: the device's total (or the
        limits' device_memory) less the margin and, on CUDA, the workers' contexts. None while
        no worker has reported its device, or when the device does not say."""
        info = self._device_info or {}
        total = self.limits.device_memory or info.get("total_memory_bytes")
        if not total:
            return None
        contexts = len(self._workers) * CUDA_CONTEXT_BYTES if info.get("type") == "cuda" else 0
        return max(int(total * (1 - self.limits.memory_margin)) - contexts, 0)

    def _blocker(self, job: _Job, running: int, exclusive: int, held: int, free_workers: int,
                 usable: int | None) -> str | None:
        """Why job cannot start beside `running` jobs (`exclusive` of them measurements, holding
        `held` bytes) with `free_workers` idle, or None. Caller holds the lock."""
        if exclusive:
            return "a measurement (sweep or finder) has the device to itself until it ends"
        if job.exclusive and running:
            return f"a measurement needs the device to itself: waiting for {running} run(s) to end"
        if not free_workers:
            return f"all {len(self._workers)} worker(s) are busy"
        if running and usable is not None and held + job.predicted_bytes > usable:
            return (f"waiting for memory: it needs {format_bytes(job.predicted_bytes)} "
                    f"(predicted); {format_bytes(max(usable - held, 0))} of the "
                    f"{format_bytes(usable)} shared here is free now")
        return None

    def _dispatch(self) -> None:
        """Start queued jobs, strictly FIFO, while the head fits. Caller holds the lock.

        A sweep or finder starts only on an otherwise idle device and holds it alone; a training
        run starts beside others only when its predicted memory and theirs fit the device
        (memory admission). The jobs behind a blocked head wait (head-of-line): nobody is
        overtaken, and the head's reason is shown to its owner.
        """
        usable = self.usable_memory()
        while self._queue:
            head = self._jobs[self._queue[0]]
            if head.check_store and self.store is not None:
                # queued before any worker had said which device it is (just after a restart):
                # the store is asked once it is known, so the run is served rather than trained
                # and stored a second time
                if not self._device_info:
                    head.wait_reason = "the training worker is starting"
                    return
                head.check_store = False
                stored = self._stored(head.config)
                if stored is not None:
                    self._queue.popleft()
                    self._from_store(head, stored)
                    continue
            running = [j for j in self._jobs.values() if j.status == "running"]
            free = [w for w in self._workers if w.job is None and w.process.is_alive()]
            head.wait_reason = self._blocker(head, len(running), sum(j.exclusive for j in running),
                                             sum(j.claim() for j in running), len(free), usable)
            if head.wait_reason is not None:
                return
            if not running and usable is not None and head.predicted_bytes > usable:
                head.notice = (f"Predicted to need {format_bytes(head.predicted_bytes)}, more "
                               f"than the {format_bytes(usable)} this device shares out: it runs "
                               f"alone, and may run out of memory.")
            job, worker = self._jobs[self._queue.popleft()], free[0]
            job.worker = worker.index
            job.status = "running"
            job.started_at = time.time()
            worker.job = job.id
            if running:
                for j in running + [job]:
                    j.shared_device = True
            # a training run's engine keeps its own cap; any other kind's worker keeps the job's
            wall = None if job.kind == "train" else job.wall_s
            worker.tasks.put((job.id, job.kind, vars(job.config).copy(), dict(job.options), wall))

    # ----- queue-wait estimates -----
    def _duration(self, job: _Job) -> tuple[float, bool]:
        """(predicted seconds a job takes, whether that is only its time cap). Lock held."""
        cap = job.config.time_limit_s or self.limits.max_wall_s
        step_time = self._step_times.get(job.workload())
        if job.kind == "train" and step_time is not None:
            return min(job.config.planned_steps * step_time, cap), False
        recent = self._durations.get(job.kind)
        if job.kind != "train" and recent:
            return min(sorted(recent)[len(recent) // 2], cap), False
        return cap, True

    def _remaining(self, job: _Job) -> tuple[float, bool]:
        """(predicted seconds until a running job ends, whether only its cap is known)."""
        cap = job.config.time_limit_s or self.limits.max_wall_s
        latest = job.latest
        if job.kind == "train" and latest and latest.get("step"):
            elapsed = latest["wall_time_s"]
            per_step = elapsed / latest["step"]
            left = (job.config.planned_steps - latest["step"]) * per_step
            return max(min(left, cap - elapsed), 0.0), False
        duration, bound = self._duration(job)
        return max(duration - (time.time() - (job.started_at or time.time())), 0.0), bound

    def _wait_estimates(self, force: bool = False) -> dict[int, tuple[float, bool]]:
        """Queued job id -> (predicted seconds until it starts, whether time caps are in it).

        Plays the queue forward: the running jobs end after their predicted remaining time, and
        each queued job starts, in order, at the first moment the dispatch rules let it (a free
        worker, exclusivity, memory). O(n log n) in the queue's length; cached for
        ESTIMATE_EVERY_S. Caller holds the lock.
        """
        now = time.monotonic()
        if not force and now - self._estimates[0] < ESTIMATE_EVERY_S:
            return self._estimates[1]
        usable = self.usable_memory()
        slots = sum(w.process.is_alive() for w in self._workers) or 1
        ends: list[tuple[float, int, _Job]] = []  # a heap of (end time, id, job) on the device
        bound = False
        for job in self._jobs.values():
            if job.status == "running":
                left, capped = self._remaining(job)
                heapq.heappush(ends, (left, job.id, job))
                bound |= capped
        count, exclusive, held = len(ends), sum(j.exclusive for *_, j in ends), \
            sum(j.claim() for *_, j in ends)
        estimates: dict[int, tuple[float, bool]] = {}
        t = 0.0
        for job_id in self._queue:
            job = self._jobs[job_id]
            while self._blocker(job, count, exclusive, held, slots - count, usable) is not None:
                t, _, ended = heapq.heappop(ends)  # never empty here: an idle device admits all
                count, exclusive, held = count - 1, exclusive - ended.exclusive, held - ended.claim()
            estimates[job_id] = (t, bound)
            duration, capped = self._duration(job)
            bound |= capped
            heapq.heappush(ends, (t + duration, job.id, job))
            count, exclusive, held = count + 1, exclusive + job.exclusive, held + job.claim()
        self._estimates = (now, estimates)
        return estimates

    def _finish(self, job: _Job, end: dict[str, Any]) -> None:
        """Caller holds the lock."""
        if job.unattended:
            end = dict(end, message=f"Cancelled: nobody watched this run for "
                                    f"{self.limits.unattended_grace_s:g} s (was its tab closed?). "
                                    + end.get("message", ""))
        job.end = end
        job.status = end["status"]
        job.finished_at = time.time()
        if job.started_at is not None and job.status in ("completed", "cancelled"):
            self._learn_duration(job)
        if (self.store is not None and job.kind == "train" and job.status == "completed"
                and job.start is not None and not job.shared_device):
            try:  # only runs measured alone: a stored result must be an honest one
                self.store.put(vars(job.config), job.start["device"], job.start,
                               job.steps.columns, job.evals.columns, end)
            except Exception as exc:  # noqa: BLE001 - a full disk must not stop the lab
                self.store_error = f"{type(exc).__name__}: {exc}"
                log.warning("run store write failed (%s); the run is not kept", self.store_error)
        if job.worker is not None:
            worker = self._workers[job.worker]
            if worker.job == job.id:
                worker.job = None
        self._finished.append(job.id)
        while len(self._finished) > self._keep_finished:
            self._jobs.pop(self._finished.popleft(), None)

    def _learn_duration(self, job: _Job) -> None:
        """Remember how fast a finished job ran, for the wait estimates of the ones like it."""
        step_time = (job.end.get("summary") or {}).get("step_time_s")
        if job.kind == "train" and step_time:
            self._step_times[job.workload()] = step_time
            self._step_times.move_to_end(job.workload())
            while len(self._step_times) > 512:
                self._step_times.popitem(last=False)
        elif job.kind != "train" and job.status == "completed":
            recent = self._durations.setdefault(job.kind, collections.deque(maxlen=8))
            recent.append(job.finished_at - job.started_at)

    def _collect(self) -> None:
        while not self._closed:
            try:
                message = self._results.get(timeout=0.2)
            except queue.Empty:
                message = None
            except (OSError, EOFError, ValueError):
                return  # the queue was closed under us: shutting down
            with self._lock:
                if message is not None:
                    self._handle(message)
                self._reap_dead_workers()
                self._reap_unattended()
                self._dispatch()

    def _reap_unattended(self) -> None:
        """Cancel runs nobody has looked at for the grace period (a closed tab). A Wi-Fi blip
        shorter than the grace costs nothing: the next poll re-attends them. Caller holds the
        lock."""
        now, grace = time.monotonic(), self.limits.unattended_grace_s
        for job in list(self._jobs.values()):
            if job.status in ACTIVE and not job.unattended and now - job.last_seen > grace:
                job.unattended = True
                self.cancel(job.id)

    def _handle(self, message: tuple) -> None:
        kind, index = message[0], message[1]
        if kind == "hello":
            self._workers[index].ready = True
            self._device_info = message[2]
            return
        job_id, events = message[2], message[3]
        job = self._jobs.get(job_id)
        if job is None or job.status not in ACTIVE:
            return  # late events of a job already ended (e.g. its worker was declared dead)
        for event in events:
            kind = event["kind"]
            if file_event(job, event):  # start, step, eval: filed as the CLI files them
                continue
            if kind in ("sweep_point", "find_probe"):
                if len(job.points) < MAX_POINTS:
                    job.points.append(event)
            elif kind == "sweep_start":
                job.start = event
            elif kind in ("sweep_end", "find_result", "accum_check"):
                job.result = event  # the worker's end record follows
            elif kind == "end":
                self._finish(job, event)

    def _reap_dead_workers(self) -> None:
        """A dead worker's job fails with a message; a fresh worker takes its place."""
        for i, worker in enumerate(self._workers):
            if worker.process.is_alive() or self._closed:
                continue
            code = worker.process.exitcode
            if worker.job is not None and worker.job in self._jobs:
                job = self._jobs[worker.job]
                if job.status in ACTIVE:
                    self._finish(job, {"kind": "end", "status": "failed", "summary": {},
                                       "message": f"The worker process running this job stopped "
                                                  f"unexpectedly (exit code {code}). The job is "
                                                  f"lost; a fresh worker has been started."})
            self.restarts += 1
            self._workers[i] = self._start_worker(i)


def start_spawned(process) -> None:
    """Start a spawn-context process without the parent's __main__.

    spawn re-runs the parent's __main__ in the child; under `streamlit run` (and after AppTest)
    that is the app script itself, which would start a scheduler inside the child. A bare
    stand-in while the child is prepared keeps the child to importing what its target needs.
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        process.start()
    finally:
        sys.modules["__main__"] = main


def _worker_main(index: int, tasks, results, cancel, threads: int, memory: tuple) -> None:
    """The worker process's entry point: its code, and torch, live in bsdemo.engine.worker."""
    from bsdemo.engine.worker import main

    main(index, tasks, results, cancel, threads, memory)


def _env_int(name: str, default: int, low: int, high: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ConfigError(name, raw, f"a whole number from {low} to {high}")
    return value


def default_threads(workers: int) -> int:
    """Torch threads per worker: BSDEMO_TORCH_THREADS, else the cores less one (the web server's,
    and on a laptop the browser's) shared among the workers.

    Measured on 2 cores with ten browser tabs polling (bench/load_test.py): a worker with 2
    threads took 0.3-4 s for a run that takes 0.08 s with 1, because OpenMP's threads wait on
    each other whenever the browser holds one of their cores.
    """
    return _env_int("BSDEMO_TORCH_THREADS", threads_rule(workers), 1, 256)


def threads_rule(workers: int) -> int:
    """The cores less one, shared among the workers (at least one each)."""
    spare = max(1, (os.cpu_count() or 1) - 1)
    return max(1, spare // workers)
