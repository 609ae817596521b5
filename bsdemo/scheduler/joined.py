"""Identical requests ride one run: a training run asked for with exactly the settings of a run
already queued or running (a room pressing Run on a lesson's defaults) joins it instead of
queueing a copy. Each asker keeps a job of its own (its id, its Stop, its place in the limits);
its page is drawn from the run it joined, live, and the run's end is its end.

- A follower costs no device time: it is not queued, needs no worker and is not counted against
  the per-address or queue limits (its browser's own active-run limit still holds).
- Stop on a follower leaves the run to the others. Stop on the run's starter while others follow
  it hands the run to them: the starter's page shows it stopped ("left"), the run goes on. Only
  when nobody is left does the run itself stop.
- The run is attended while any asker's page is open (a follower's heartbeat attends it too).
- A follower is never kept in the run store: the run it joined is, once.

A part of `Scheduler` (bsdemo.scheduler.core), as the reaper is; every method runs with the
scheduler's lock held."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bsdemo.config import RunConfig
from bsdemo.jobkinds import KINDS
from bsdemo.runs import ACTIVE, JobSnapshot
from bsdemo.scheduler.job import Job

LEFT = "You stopped watching this run; it goes on for {n} other student(s) who asked for the same settings."
DETACHED = (
    "Cancelled: you stopped watching the run you had joined (it goes on for the others who asked for it)."
)


class Joining:
    """Mixed into Scheduler: uses its jobs and `_finish`."""

    def _joinable(self, cfg: RunConfig, kind: str, skip: Sequence[Job] = ()) -> Job | None:
        """A queued or running job of `kind` (one its declaration lets a second browser join: a
        training run) with exactly these settings (never one in `skip`: jobs about to be
        superseded)."""
        settings, skipped = vars(cfg), {job.id for job in skip}
        for job in self._jobs.values():
            if (
                job.id not in skipped
                and job.kind == kind
                and KINDS[kind].joins
                and job.status in ACTIVE
                and job.follows is None
                and job.group is None
                and not job.cancel_requested
                and vars(job.config) == settings
            ):
                return job
        return None

    def _join(self, job: Job, lead: Job) -> None:
        # it stays "queued": never counted as running; charts and texts name the run it rides
        job.follows, job.rode, job.run_id = lead.id, True, lead.id
        lead.followers.append(job.id)
        job.notice = (
            "Joined a run with the same settings that another student started: "
            "the same measured run, shown to both of you."
        )

    def _lead_of(self, job: Job) -> Job | None:
        """The run a follower rides, while it rides one."""
        if job.follows is None or job.status not in ACTIVE:
            return None
        return self._jobs.get(job.follows)

    def _follower_snapshot(self, job: Job, lead_snapshot: JobSnapshot) -> JobSnapshot:
        """The joined run, drawn as this follower's own job."""
        return dataclasses.replace(
            lead_snapshot,
            id=job.id,
            owner=job.owner,
            submitted_at=job.submitted_at,
            notice=job.notice,
            stored_at=None,
        )

    def _attend_lead(self, job: Job, now: float) -> None:
        lead = self._lead_of(job)
        if lead is not None:
            lead.last_seen = max(lead.last_seen, now)

    def _detach(self, job: Job, message: str = DETACHED) -> Job:
        """Stop for a follower: it leaves the run it rode (returned; the run goes on)."""
        lead = self._jobs[job.follows]
        lead.followers.remove(job.id)
        job.follows = None
        self._finish(job, {"kind": "end", "status": "cancelled", "summary": {}, "message": message})
        return lead

    def _hand_over(self, job: Job) -> bool:
        """Stop for a run's starter while others follow it: the run becomes theirs (the
        starter's page shows it stopped) and goes on. False when nobody follows it."""
        if job.owner == "" or not any(f in self._jobs for f in job.followers):
            return False
        job.left_by, job.owner = job.owner, ""
        return True

    def _left_snapshot(self, job: Job, snap: JobSnapshot) -> JobSnapshot:
        """What the starter who left sees: the run stopped for them."""
        return dataclasses.replace(
            snap,
            owner=job.left_by,
            status="cancelled",
            queue_position=None,
            end={
                "kind": "end",
                "status": "cancelled",
                "summary": {},
                "message": LEFT.format(n=len(job.followers)),
            },
        )

    def _end_followers(self, lead: Job) -> None:
        """The run ended: so does every follower's job, with the run's record as its own."""
        for follower_id in lead.followers:
            job = self._jobs.get(follower_id)
            if job is None or job.status not in ACTIVE:
                continue
            job.follows, job.version = None, lead.version
            job.start, job.latest, job.result = lead.start, lead.latest, lead.result
            job.points = list(lead.points)
            job.steps, job.evals = lead.steps, lead.evals  # ended: never written again
            job.started_at, job.shared_device, job.node = (lead.started_at, lead.shared_device, lead.node)
            self._finish(job, lead.end)
        lead.followers = []
