"""The scheduler: a FIFO queue of jobs, dispatched to warm worker processes.

One `Scheduler` per server process. It holds the jobs and the queue under one lock; admission
(bsdemo.scheduler.admission) says what may be queued and what may start; the pool
(bsdemo.scheduler.pool) runs them; events come back over the pool's results queue and are filed
into bounded, column-wise buffers (bsdemo.runs) that pages read with `snapshot()`.

This package never imports torch: the server process stays light and responsive.
"""

from __future__ import annotations

import atexit
import collections
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bsdemo.config import ConfigError, RunConfig
from bsdemo.jobkinds import KINDS, Cost
from bsdemo.limits import MAX_WORKERS, Limits, default_threads
from bsdemo.runs import (
    ACTIVE,
    EVAL_FIELDS,
    STEP_FIELDS,
    JobSnapshot,
    Series,
)
from bsdemo.scheduler import admission
from bsdemo.scheduler.dispatch import Dispatching
from bsdemo.scheduler.estimates import WaitEstimator
from bsdemo.scheduler.ids import JobIds
from bsdemo.scheduler.job import Job
from bsdemo.scheduler.joined import Joining
from bsdemo.scheduler.pool import WorkerPool
from bsdemo.scheduler.reaper import Reaper
from bsdemo.scheduler.serverview import ServerView
from bsdemo.scheduler.stored import StoreLink, serve
from bsdemo.scheduler.superseding import Superseding
from bsdemo.scheduler.tally import Tally
from bsdemo.store import Store

SEEN_OWNERS = 100_000  # browsers remembered as having queued a job (for first-job priority)
# an active job's copy for pages is remade at most this often (a page polls every 0.5 s): a room
# watching one run draws one copy, and its figures once (bsdemo.ui.widgets.shared_figures)
PUBLISH_S = 0.2


class Scheduler(Reaper, Joining, Superseding, Dispatching, ServerView):
    """FIFO queue + worker processes + bounded per-job buffers. Thread-safe."""

    def __init__(
        self,
        workers: int | None = None,
        max_points: int = 1000,
        keep_finished: int = 200,
        threads_per_worker: int | None = None,
        limits: Limits | None = None,
        store: Store | None = None,
        id_counter: Path | None = None,
        pool: Callable[[int, int, Limits], WorkerPool] | None = None,
        spool: Path | None = None,
    ):
        """workers: concurrent runs on the device (default: limits.workers). id_counter: the file
        job ids are reserved from (bsdemo.scheduler.ids). spool: the folder finished runs wait in
        while the store does not take them (bsdemo.scheduler.stored; None: in memory).
        pool(workers, threads, limits) makes the workers: local processes (WorkerPool), or a
        cluster's (bsdemo.cluster.workers)."""
        self.limits = limits or Limits()
        workers = workers or self.limits.workers
        if not 1 <= workers <= MAX_WORKERS:
            raise ConfigError("workers", workers, f"a whole number from 1 to {MAX_WORKERS}")
        self._lock = threading.RLock()
        self._jobs: dict[int, Job] = {}
        self._queue: collections.deque[int] = collections.deque()
        self._seen_owners: collections.OrderedDict[str, bool] = collections.OrderedDict()
        self._published: dict[int, tuple[float, JobSnapshot]] = {}  # active jobs' copies
        self._finished: collections.deque[int] = collections.deque()
        self._ids = JobIds(id_counter)
        self._max_points = max_points
        self._keep_finished = keep_finished
        self._device_info: dict[str, Any] | None = None
        self._closed = False
        self._sharing = admission.SharingLimits(self.limits)
        self._estimator = WaitEstimator(self.limits.max_wall_s)
        self._tally = Tally()
        self._stored = StoreLink(store, spool)
        self._pool = (pool or WorkerPool)(
            workers, threads_per_worker or default_threads(workers), self.limits
        )
        self._collector = threading.Thread(target=self._collect, name="bsdemo-collector", daemon=True)
        self._collector.start()
        atexit.register(self.close)

    # ----- submitting -----
    def submit(
        self,
        cfg: RunConfig,
        owner: str,
        kind: str = "train",
        options: dict[str, Any] | None = None,
        fresh: bool = False,
        address: str | None = None,
        supersede: bool = False,
    ) -> int:
        """Queue a job for owner (a browser) connecting from address; returns its id.

        kind "train" trains cfg; the other kinds (bsdemo.jobkinds.KINDS) run their engine
        function with `options`, alone on the device. Every kind is checked against the same
        limits first. Raises ConfigError (invalid, or over a limit) or ActiveRunError (a sharing
        limit: not now). A job of the owner's of the same kind that still waits to start is
        superseded: dropped, and the new one takes its place in the queue (a student who
        changes a setting while waiting never stacks stale runs for the room). `supersede` (Live
        mode: a setting changed) stops the owner's running job of that kind too.
        """
        cfg, options, cost = admission.checked(cfg, kind, options, self.limits, self._device_info)
        spec = KINDS[kind]  # what its declaration allows: a stored result, a join, Live mode
        if supersede and not spec.live:
            raise ConfigError(
                "supersede",
                kind,
                "a kind Live mode may replace: " + ", ".join(k.name for k in KINDS.values() if k.live),
            )
        stored = None
        if spec.stored and not fresh:
            stored = self._stored.find(cfg, self._device_info)
        with self._lock:
            if self._closed:
                raise RuntimeError("the scheduler is shut down")
            stale = self._waiting_of(owner, kind)
            going = self._going_of(owner, kind, stale) if supersede else []
            dropped = [j for j in (stale, *going) if j is not None]
            # the same settings as a run already going: ride it (bsdemo.scheduler.joined)
            lead = (
                self._joinable(cfg, kind, skip=dropped) if spec.joins and not fresh and not stored else None
            )
            if stored is None:
                # a follower costs no device time: only its browser's own limits apply; the
                # jobs it supersedes no longer count
                gone = {j.id for j in dropped}
                self._sharing.admit(
                    [j for j in self._jobs.values() if j.id not in gone],
                    owner,
                    None if lead else address,
                    0 if lead else 1,
                    replaces=bool(gone),
                )
            job = self._new_job(
                cfg,
                owner,
                cost,
                kind=kind,
                options=options,
                address=address,
                check_store=spec.stored and not fresh,
            )
            place = self._supersede(stale, job) if stale is not None else None
            for old in going:
                self._supersede_going(old, job)
            if stored is not None:
                self._serve(job, stored)
            elif lead is not None:
                self._join(job, lead)
            else:
                self._enqueue([job], place)
            self._dispatch()
            return job.id

    def submit_group(
        self, cfgs: list[RunConfig], owner: str, address: str | None = None, fresh: bool = False
    ) -> list[int]:
        """Queue several training runs for one owner at once (a comparison); FIFO order.

        They count as the owner's one active run: another submit waits until all are done.
        The whole comparison is one job for the limits (bsdemo.scheduler.admission.comparison).
        A run already in the run store for this device is served from it at once, as the lab's
        are (unless `fresh`). With several workers the others may run side by side, and are
        then marked shared_device.
        """
        runs = admission.comparison(cfgs, self.limits, self._device_info)
        stored = [None if fresh else self._stored.find(cfg, self._device_info) for cfg, _, _ in runs]
        with self._lock:
            if self._closed:
                raise RuntimeError("the scheduler is shut down")
            live = sum(hit is None for hit in stored)
            if live:
                self._sharing.admit(list(self._jobs.values()), owner, address, live)
            group, ids, queued = None, [], []
            for (cfg, _, cost), hit in zip(runs, stored, strict=True):
                job = self._new_job(
                    cfg, owner, cost, group=group, address=address, check_store=not fresh and hit is None
                )
                if group is None:  # the comparison is known by its first run's id
                    group = job.group = job.id
                if hit is not None:
                    self._serve(job, hit)
                else:
                    queued.append(job)
                ids.append(job.id)
            if queued:
                self._enqueue(queued)
            self._dispatch()
            return ids

    def _new_job(self, cfg: RunConfig, owner: str, cost: Cost, **fields) -> Job:
        """A registered job with fresh bounded buffers. Caller holds the lock."""
        job_id = self._ids.next()
        job = Job(
            id=job_id,
            run_id=job_id,
            owner=owner,
            config=cfg,
            submitted_at=time.time(),
            steps=Series(STEP_FIELDS, self._max_points),
            evals=Series(EVAL_FIELDS, self._max_points),
            predicted_bytes=cost.predicted_bytes,
            wall_s=cost.wall_s,
            **fields,
        )
        self._jobs[job.id] = job
        return job

    def _enqueue(self, jobs: list[Job], place: tuple[int, bool] | None = None) -> None:
        """Queue one browser's jobs (a comparison's together): a browser's first go ahead of
        every queued job of a browser that has had one before (a room's first curves before
        anyone's second try); otherwise, and among first ones, first come first served. `place`:
        the queue index and the repeat flag of a job they supersede, taken over as they were.
        Caller holds the lock."""
        owner = jobs[0].owner
        first = owner not in self._seen_owners
        self._seen_owners[owner] = True
        self._seen_owners.move_to_end(owner)
        while len(self._seen_owners) > SEEN_OWNERS:
            self._seen_owners.popitem(last=False)
        at = len(self._queue)
        if place is not None:
            at, first = place[0], not place[1]
        elif first:
            at = next((i for i, queued in enumerate(self._queue) if self._jobs[queued].repeat), at)
        for offset, job in enumerate(jobs):
            job.repeat = not first
            self._queue.insert(at + offset, job.id)

    def _serve(self, job: Job, stored) -> None:
        """Finish job from the run store. Caller holds the lock."""
        serve(job, stored)
        self._finished.append(job.id)

    # ----- a browser's view -----
    def can_submit(self, owner: str, kind: str | None = None) -> bool:
        """Whether the browser may queue a job now: below its limit of active runs, or (given
        the job's kind) holding a job of that kind that waits and would be superseded. Ignores
        the other limits."""
        with self._lock:
            units = admission.active_units(self._jobs.values(), owner)
            return len(units) < self.limits.max_active_per_session or (
                kind is not None and self._waiting_of(owner, kind) is not None
            )

    def waiting_job(self, owner: str, kind: str = "train") -> int | None:
        """The browser's job of this kind that has not started (a new submit supersedes it)."""
        with self._lock:
            job = self._waiting_of(owner, kind)
            return None if job is None else job.id

    def heartbeat(self, owner: str) -> None:
        """A page of this browser is open and polling: its runs are attended. Only the owner's
        heartbeat counts: a stranger watching a run from a link does not keep it alive."""
        now = time.monotonic()
        with self._lock:
            for job in self._jobs.values():
                if job.owner == owner and job.status in ACTIVE:
                    job.last_seen = now
                    self._attend_lead(job, now)  # a run others joined is theirs to attend too

    def cancel(self, job_id: int | None, owner: str | None = None) -> bool:
        """Stop a job: a queued one at once, a running one between two steps. With `owner`,
        only that owner's job. Returns whether a stop was requested."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.status not in ACTIVE or (owner is not None and job.owner != owner):
                return False
            if self._lead_of(job) is not None:  # it rode another's run: it leaves it
                lead = self._detach(job)
                if lead.owner == "" and not lead.followers:  # its starter had left: nobody now
                    self._stop(lead)
            elif not self._hand_over(job):  # a run others ride goes on for them
                self._stop(job)
            return True

    def _stop(self, job: Job, message: str = "Cancelled before it started.") -> None:
        """Stop a job for good (`message`: its end's, if it had not started). Caller holds the
        lock."""
        if job.status == "queued" and job.worker is None:
            self._queue.remove(job.id)
            self._finish(job, {"kind": "end", "status": "cancelled", "message": message, "summary": {}})
        else:
            job.cancel_requested = True
            if job.kill_at_stop is None:
                job.kill_at_stop = time.monotonic() + self.limits.stop_grace_s
            self._pool.stop(job.worker, job.id)

    def snapshot(self, job_id: int) -> JobSnapshot | None:
        """A copy of the job for drawing; looking does not attend it (see heartbeat)."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            lead = self._lead_of(job)
            if lead is not None:  # it rides another's run: that run, as its own
                return self._follower_snapshot(job, self._snapshot(lead))
            snap = self._snapshot(job)
            return snap if job.left_by is None else self._left_snapshot(job, snap)

    def _snapshot(self, job: Job) -> JobSnapshot:
        """The job's copy for drawing. A running job's is made at most once every PUBLISH_S:
        every page polling it meanwhile gets the same copy (and so can share the figures drawn
        from it) instead of a copy each; a queued one's place changes as others queue, and it
        has no curves to copy. Caller holds the lock."""
        now = time.monotonic()
        made, snap = self._published.get(job.id, (None, None))
        if snap is not None and now - made < PUBLISH_S and snap.status == job.status:
            return snap
        snap = self._copy(job)
        if job.status == "running":
            self._published[job.id] = (now, snap)
        else:
            self._published.pop(job.id, None)
        return snap

    def _copy(self, job: Job) -> JobSnapshot:
        """Caller holds the lock."""
        position = (self._queue.index(job.id) + 1) if job.id in self._queue else None
        wait, bound = None, False
        if position:
            estimates = self._waits()
            if job.id not in estimates:  # queued since the last estimate
                estimates = self._waits(force=True)
            wait, bound = estimates[job.id]
        return job.snapshot(position, wait, bound)

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

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()
        if self.store is not None:
            self._stored.flush(timeout=10)  # the last finished runs are kept
