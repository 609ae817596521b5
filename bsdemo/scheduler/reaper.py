"""The scheduler's reaping: the jobs and workers it ends without their cooperation — runs nobody
watches any more, jobs still running past their time cap or their Stop, and dead workers. A part
of `Scheduler` (bsdemo.scheduler.core), kept apart because it only ever ends things; every method
runs with the scheduler's lock held."""

from __future__ import annotations

import time

from bsdemo.runs import ACTIVE
from bsdemo.units import setting


class Reaper:
    """Mixed into Scheduler: uses its jobs, pool, limits, `cancel`, `_running` and `_finish`."""

    def _reap_unattended(self) -> None:
        """Cancel runs nobody has looked at for the grace period (a closed tab). A Wi-Fi blip
        shorter than the grace costs nothing: the next poll re-attends them. Caller holds the
        lock."""
        now, grace = time.monotonic(), self.limits.unattended_grace_s
        for job in list(self._jobs.values()):
            if job.status in ACTIVE and not job.unattended and now - job.last_seen > grace:
                job.unattended = True
                self.cancel(job.id)

    def _progress(self, worker) -> None:
        """A worker that holds several runs in turns sent records: it is not stuck, so the runs
        it holds are not overdue. Each keeps its own time cap on its own clock (its turns only,
        bsdemo.engine.measure.RunClock); the backstop below, on the wall clock, then fires only
        for a worker that sent nothing for a whole cap and the grace. Caller holds the lock."""
        if len(worker.jobs) < 2:
            return
        now = time.monotonic()
        for held in worker.jobs:
            job = self._jobs.get(held)
            if job is not None and job.kill_at_cap is not None:
                job.kill_at_cap = max(job.kill_at_cap, now + job.wall_s + self.limits.stop_grace_s)

    def _end_overdue(self) -> None:
        """The cap that needs no cooperation: a job still running its grace period after its
        time cap or its Stop ends now, its worker killed (with its group's members) and replaced;
        the other jobs go on untouched. Caller holds the lock."""
        now, grace = time.monotonic(), self.limits.stop_grace_s
        for job in self._running():
            capped = job.kill_at_cap is not None and now >= job.kill_at_cap
            stopped = job.kill_at_stop is not None and now >= job.kill_at_stop
            if job.worker is None or job.status != "running" or not (capped or stopped):
                continue
            index = job.worker
            latest = job.latest or {}
            summary = {
                "steps": latest.get("step") or 0,
                "samples_seen": latest.get("samples_seen") or 0,
                "ended_by_server": True,
            }
            if capped and not (stopped and job.kill_at_stop < job.kill_at_cap):
                message = (
                    f"Ended at this server's time cap of {setting(job.wall_s)} s: it was still "
                    f"running {setting(grace)} s past it, so its worker was ended (and replaced). "
                    "What it reached until then is shown."
                )
                summary["time_capped"] = True
            else:
                message = (
                    f"Stopped: it had not stopped {setting(grace)} s after Stop, so its worker "
                    "was ended (and replaced). What it reached until then is shown."
                )
            self._finish(job, {"kind": "end", "status": "cancelled", "message": message, "summary": summary})
            self._lose_worker(
                index,
                "Ended: it took turns on a worker that had to be ended "
                "(another run on it did not stop in time). What it reached "
                "until then is shown.",
            )
            self._pool.kill(index)

    def _reap_dead_workers(self) -> None:
        """A dead worker's job fails with a message; a fresh worker takes its place."""
        for worker in list(self._pool.workers):
            if worker.process.is_alive() or self._closed:
                continue
            code = worker.process.exitcode
            # a local process has an exit code; a cluster's worker, what was lost
            what = code if isinstance(code, str) else f"exit code {code}"
            node = f" on node {worker.node[:12]}" if worker.node else ""
            self._lose_worker(
                worker.index,
                f"The worker process running this job{node} stopped "
                f"unexpectedly ({what}). The job is lost; a fresh "
                "worker has been started.",
                summary={},
            )
            self._pool.replace(worker.index)

    def _lose_worker(self, index: int, message: str, summary: dict | None = None) -> None:
        """Fail every active job the worker at index still holds (it is about to be ended or
        replaced): what each reached is kept, with `message`. Caller holds the lock."""
        for held in list(self._pool[index].jobs):
            job = self._jobs.get(held)
            if job is None or job.status not in ACTIVE:
                continue
            latest = job.latest or {}
            kept = (
                summary
                if summary is not None
                else {
                    "steps": latest.get("step") or 0,
                    "samples_seen": latest.get("samples_seen") or 0,
                    "ended_by_server": True,
                }
            )
            self._finish(job, {"kind": "end", "status": "failed", "summary": dict(kept), "message": message})
