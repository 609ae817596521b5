"""Queue-wait estimates: how long until a queued job starts, learned from the jobs that ended.

A training run's step time is remembered per workload (what fixes it on one device); any other
kind's duration as the median of its last few. The queue is then played forward under the same
dispatch rules the scheduler uses (bsdemo.scheduler.admission.blocker). The scheduler calls it
under its lock.
"""

from __future__ import annotations

import collections
import heapq
import time
from collections.abc import Callable, Iterable

from bsdemo.scheduler.job import Job

ESTIMATE_EVERY_S = 0.5  # queue-wait estimates are recomputed at most this often
KEEP_WORKLOADS = 512  # step times remembered (least recently learned forgotten first)


class WaitEstimator:
    def __init__(self, max_wall_s: float):
        self.max_wall_s = max_wall_s
        self._step_times: collections.OrderedDict[tuple, float] = collections.OrderedDict()
        self._durations: dict[str, collections.deque[float]] = {}
        self._cache: tuple[float, dict[int, tuple[float, bool]]] = (-1.0, {})

    def learn(self, job: Job) -> None:
        """Remember how fast a finished job ran, for the wait estimates of the ones like it."""
        step_time = (job.end.get("summary") or {}).get("step_time_s")
        if job.kind == "train" and step_time:
            self._step_times[job.workload()] = step_time
            self._step_times.move_to_end(job.workload())
            while len(self._step_times) > KEEP_WORKLOADS:
                self._step_times.popitem(last=False)
        elif job.kind != "train" and job.status == "completed":
            recent = self._durations.setdefault(job.kind, collections.deque(maxlen=8))
            recent.append(job.finished_at - job.started_at)

    def duration(self, job: Job) -> tuple[float, bool]:
        """(predicted seconds a job takes, whether that is only its time cap)."""
        cap = job.config.time_limit_s or self.max_wall_s
        step_time = self._step_times.get(job.workload())
        if job.kind == "train" and step_time is not None:
            return min(job.config.planned_steps * step_time, cap), False
        recent = self._durations.get(job.kind)
        if job.kind != "train" and recent:
            return min(sorted(recent)[len(recent) // 2], cap), False
        return cap, True

    def remaining(self, job: Job, sharing: int = 1) -> tuple[float, bool]:
        """(predicted seconds until a running job ends, whether only its cap is known). sharing:
        the runs its worker steps in turns, itself included (its clock counts its own turns:
        what is left of it takes that many times as long on the wall clock)."""
        cap = job.config.time_limit_s or self.max_wall_s
        latest = job.latest
        if job.kind == "train" and latest and latest.get("step"):
            elapsed = latest["wall_time_s"]
            per_step = elapsed / latest["step"]
            left = (job.config.planned_steps - latest["step"]) * per_step
            return max(min(left, cap - elapsed), 0.0) * sharing, False
        duration, bound = self.duration(job)
        return max(duration - (time.time() - (job.started_at or time.time())), 0.0), bound

    def waits(
        self,
        running: Iterable[Job],
        queued: Iterable[Job],
        slots: int,
        blocked: Callable[[Job, int, int, int, int], bool],
        force: bool = False,
        sharing: Callable[[Job], int] = lambda job: 1,
    ) -> dict[int, tuple[float, bool]]:
        """Queued job id -> (predicted seconds until it starts, whether time caps are in it).

        Plays the queue forward: the running jobs end after their predicted remaining time, and
        each queued job starts, in order, at the first moment `blocked(job, running, exclusive,
        held bytes, free slots)` lets it. O(n log n) in the queue's length; cached for
        ESTIMATE_EVERY_S. slots: the runs the workers may hold at once (turns included);
        sharing(job): the runs a running job's worker steps in turns (see remaining).
        """
        now = time.monotonic()
        if not force and now - self._cache[0] < ESTIMATE_EVERY_S:
            return self._cache[1]
        ends: list[tuple[float, int, Job]] = []  # a heap of (end time, id, job) on the device
        bound = False
        for job in running:
            left, capped = self.remaining(job, sharing(job))
            heapq.heappush(ends, (left, job.id, job))
            bound |= capped
        count, exclusive, held = (
            len(ends),
            sum(j.exclusive for *_, j in ends),
            sum(j.claim() for *_, j in ends),
        )
        estimates: dict[int, tuple[float, bool]] = {}
        t = 0.0
        for job in queued:
            while blocked(job, count, exclusive, held, slots - count):
                t, _, ended = heapq.heappop(ends)  # never empty here: an idle device admits all
                count, exclusive, held = count - 1, exclusive - ended.exclusive, held - ended.claim()
            estimates[job.id] = (t, bound)
            duration, capped = self.duration(job)
            bound |= capped
            heapq.heappush(ends, (t + duration, job.id, job))
            count, exclusive, held = count + 1, exclusive + job.exclusive, held + job.claim()
        self._cache = (now, estimates)
        return estimates
