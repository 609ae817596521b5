"""Dispatch and ending: which queued job starts on which worker, and what happens to the
records that come back.

A part of `Scheduler` (bsdemo.scheduler.core), as the reaper and the joining are; every method
runs with the scheduler's lock held (the collector thread takes it for each message).
"""

from __future__ import annotations

import queue
import time
from typing import Any

from bsdemo.jobkinds import POINT_KINDS, RESULT_KINDS, START_KINDS
from bsdemo.runs import ACTIVE, add_point, file_event, stable_rate
from bsdemo.scheduler import admission, devices
from bsdemo.scheduler.job import Job
from bsdemo.scheduler.pool import Worker
from bsdemo.units import setting

MAX_POINTS = 256  # sweep points / finder probes kept per job (a sweep has at most 64 sizes)
DISPATCH_LOOKUP_S = 0.5  # the longest a lookup under the scheduler's lock waits for the store
# a run takes turns on a busy worker only after waiting this long for an idle one: a short run
# (most lessons' defaults take well under a second alone) ends alone at full speed before the
# next starts; a room's runs that would queue for longer share the worker in turns
# (bsdemo.engine.worker) and all show their first points within about this wait
TURN_AFTER_S = 1.0


class Dispatching:
    """The scheduler's dispatch and ending (its attributes are the Scheduler's)."""

    # ----- dispatch -----
    def _running(self) -> list[Job]:
        return [j for j in self._jobs.values() if j.status == "running"]

    def _blocked(
        self, job: Job, running: int, exclusive: int, held: int, free: int, usable: int | None
    ) -> str | None:
        return admission.blocker(job, running, exclusive, held, free, len(self._pool), usable)

    def _dispatch(self) -> None:
        """Start queued jobs, strictly FIFO, while the head fits. Caller holds the lock.

        A sweep or finder starts only on an otherwise idle device and holds it alone; a training
        run starts beside others only when its predicted memory and theirs fit the device
        (memory admission) — device by device, where the workers sit on several
        (scheduler.devices). The jobs behind a blocked head wait (head-of-line): nobody is
        overtaken, and the head's reason is shown to its owner.
        """
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
                # under the lock: the store is given little time (a run not found trains)
                stored = self._stored.find(head.config, self._device_info, wait=DISPATCH_LOOKUP_S)
                if stored is not None:
                    self._queue.popleft()
                    self._serve(head, stored)
                    continue
            running, free = self._running(), self._pool.free()
            if time.time() - head.submitted_at < TURN_AFTER_S:  # an idle worker, or a moment
                free = [w for w in free if not w.jobs]
            spot = devices.place(head, free, running, self._pool.workers, self.limits)
            head.wait_reason = spot.reason
            if spot.worker is None:
                if head.wait_reason == admission.EXCLUSIVE_WAIT:
                    head.wait_reason = admission.exclusive_wait(spot.beside)
                elif not free and not running and self._pool.starting():
                    head.wait_reason = "the training worker is starting"
                return
            if not spot.beside:
                head.notice = admission.alone_notice(head, spot.usable) or head.notice
            self._start(self._jobs[self._queue.popleft()], spot.worker, spot.beside)

    def _start(self, job: Job, worker: Worker, beside: list[Job]) -> None:
        """Give job to a free worker, beside the running jobs. Caller holds the lock."""
        job.worker, job.status, job.started_at = worker.index, "running", time.time()
        self._tally.waited(job.kind, job.started_at - job.submitted_at)
        job.node = worker.node
        if job.wall_s:
            job.kill_at_cap = time.monotonic() + job.wall_s + self.limits.stop_grace_s
        # runs on other workers of the device run beside it; those its own worker holds take
        # turns with it, a step at a time, never beside it (bsdemo.engine.worker)
        others = [j for j in beside if j.worker != worker.index]
        if others:
            for j in [*others, job]:
                j.shared_device = True
        # a training run's engine keeps its own cap; any other kind's worker keeps the job's
        wall = None if job.kind == "train" else job.wall_s
        self._pool.give(worker, job.id, (job.id, job.kind, vars(job.config).copy(), dict(job.options), wall))
        mates = len(worker.jobs) - 1
        for held in worker.jobs:
            mate = self._jobs.get(held)
            if mate is not None:
                mate.turns_with = max(mate.turns_with, mates)

    def _waits(self, force: bool = False) -> dict[int, tuple[float, bool]]:
        """Queued job id -> (predicted seconds until it starts, whether caps are in it). Lock
        held."""
        usable = self.usable_memory()
        workers = self._pool.workers
        slots = sum(self._pool.room(w) for w in workers if w.process.is_alive()) or 1
        return self._estimator.waits(
            self._running(),
            [self._jobs[i] for i in self._queue],
            slots,
            lambda job, *state: self._blocked(job, *state, usable) is not None,
            force=force,
            sharing=lambda job: max(len(workers[job.worker].jobs), 1) if job.worker is not None else 1,
        )

    # ----- ending -----
    def _finish(self, job: Job, end: dict[str, Any]) -> None:
        """Caller holds the lock."""
        if job.unattended:
            end = dict(
                end,
                message=f"Cancelled: nobody watched this run for "
                f"{setting(self.limits.unattended_grace_s)} s (was its tab closed?). "
                + end.get("message", ""),
            )
        job.end = end
        job.status = end["status"]
        job.finished_at = time.time()
        job.version += 1
        self._published.pop(job.id, None)
        if job.rode:  # the run it rode is counted, learned from and kept, once
            self._finished.append(job.id)
            return
        self._tally.ended(job.kind, job.status)
        if job.kind == "train" and job.status == "completed":
            self._tally.run_speed(job.config.effective_batch_size, stable_rate(end.get("summary") or {}))
        if job.started_at is not None and job.status in ("completed", "cancelled"):
            self._estimator.learn(job)
        self._stored.keep(job)
        self._end_followers(job)
        if job.worker is not None:
            self._pool.release(job.worker, job.id)
        self._finished.append(job.id)
        while len(self._finished) > self._keep_finished:
            self._jobs.pop(self._finished.popleft(), None)

    def _collect(self) -> None:
        while not self._closed:
            try:
                message = self._pool.results.get(timeout=0.2)
            except queue.Empty:
                message = None
            except (OSError, EOFError, ValueError):
                return  # the queue was closed under us: shutting down
            with self._lock:
                if message is not None:
                    self._handle(message)
                self._reap_dead_workers()
                self._reap_unattended()
                self._end_overdue()
                self._dispatch()

    def _handle(self, message: tuple) -> None:
        kind, index = message[0], message[1]
        if kind == "hello":
            worker = self._pool[index]
            worker.ready, worker.info = True, message[2]
            worker.device = devices.device_key(message[2])
            self._device_info = message[2]
            return
        job_id, events = message[2], message[3]
        self._progress(self._pool[index])
        job = self._jobs.get(job_id)
        if job is None or job.status not in ACTIVE:
            return  # late events of a job already ended (e.g. its worker was declared dead)
        job.version += 1
        for event in events:
            kind = event["kind"]
            if file_event(job, event):  # start, step, eval: filed as the CLI files them
                continue
            if kind in POINT_KINDS:
                add_point(job.points, event, MAX_POINTS)
                if event.get("status") == "oom" and not event.get("replaces"):
                    self._tally.oom_point(job.kind)
            elif kind in START_KINDS:
                job.start = event
            elif kind in RESULT_KINDS:
                job.result = event  # the worker's end record follows
            elif kind == "end":
                self._finish(job, event)
