"""A newer job in an older one's place: a browser's job that still waits is dropped for its newer
Run, which takes over its place in the queue; Live mode's changed setting stops the browser's
running one (of a kind whose declaration allows it, bsdemo.jobkinds.Kind.live), its curve kept
and marked superseded. A rider of a run is detached, and a run others ride goes on for them.

A part of `Scheduler` (bsdemo.scheduler.core), as the reaper is; every method runs with the
scheduler's lock held."""

from __future__ import annotations

from bsdemo.runs import ACTIVE
from bsdemo.scheduler.job import Job


class Superseding:
    """Mixed into Scheduler: uses its jobs, queue, `_lead_of`, `_detach`, `_hand_over` and
    `_stop`."""

    def _waiting_of(self, owner: str, kind: str) -> Job | None:
        """The owner's job of this kind that has not started: queued, or riding a run that is
        itself still queued (never one of a comparison). Caller holds the lock."""
        for job in self._jobs.values():
            if (
                job.owner == owner
                and job.kind == kind
                and job.group is None
                and job.status == "queued"
                and job.worker is None
                and not job.cancel_requested
            ):
                lead = self._lead_of(job)
                if lead is None or (lead.status == "queued" and lead.worker is None):
                    return job
        return None

    def _going_of(self, owner: str, kind: str, skip: Job | None) -> list[Job]:
        """The owner's started jobs of this kind (never one of a comparison), riders of a started
        run included, that no Stop has reached yet. Caller holds the lock."""
        return [
            job
            for job in self._jobs.values()
            if job is not skip
            and job.owner == owner
            and job.kind == kind
            and job.group is None
            and job.status in ACTIVE
            and not job.cancel_requested
            and (job.worker is not None or self._lead_of(job) is not None)
        ]

    def _supersede_going(self, old: Job, by: Job) -> None:
        """Stop the owner's started job for its newer one (Live mode): between two steps, its
        curve kept and marked superseded. Caller holds the lock."""
        old.superseded_by = by.id
        if self._lead_of(old) is not None:
            self._detach(old, f"Superseded: run {by.id} with newer settings replaced it.")
        elif not self._hand_over(old):  # others ride it: it goes on for them
            self._stop(old)

    def _supersede(self, stale: Job, by: Job) -> tuple[int, bool] | None:
        """Drop the owner's waiting job for its newer one; returns the queue place the newer one
        takes over (None when the stale job was not in the queue itself: it rode another's run,
        or others ride it and it goes on for them). Caller holds the lock."""
        stale.superseded_by = by.id
        message = (
            f"Superseded before it started: a newer Run from this browser (run {by.id}) "
            "took its place in the queue."
        )
        if self._lead_of(stale) is not None:
            self._detach(stale, message)
            return None
        if self._hand_over(stale):
            return None
        place = self._queue.index(stale.id), stale.repeat
        self._stop(stale, message)
        return place
