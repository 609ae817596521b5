"""What the scheduler has done since it started, as running totals (pure Python): runs ended by
kind and status, out-of-memory events (a run's, or a measurement's point), and how long jobs
waited in the queue (a histogram's buckets). bsdemo.metrics turns these into Prometheus
metrics; totals only grow, as a Prometheus counter must."""

from __future__ import annotations

import bisect
import threading
from typing import Any

# queue waits, seconds: a lecture's runs wait from nothing to minutes
WAIT_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Tally:
    def __init__(self):
        self._lock = threading.Lock()
        self._ended: dict[tuple[str, str], int] = {}
        self._oom: dict[str, int] = {}
        self._waits: dict[str, list[int]] = {}  # kind -> count per bucket (+Inf last)
        self._wait_sum: dict[str, float] = {}
        self._speed: dict[int, float] = {}  # batch bucket -> latest completed run's samples/s

    def ended(self, kind: str, status: str) -> None:
        with self._lock:
            self._ended[(kind, status)] = self._ended.get((kind, status), 0) + 1
            if status == "oom":
                self._oom[kind] = self._oom.get(kind, 0) + 1

    def run_speed(self, batch_size: int, samples_per_sec: float | None) -> None:
        """A completed training run's samples/s, kept per batch bucket (the latest one)."""
        if samples_per_sec:
            with self._lock:
                self._speed[batch_bucket(batch_size)] = samples_per_sec

    def oom_point(self, kind: str) -> None:
        """A measurement's point that ran out of memory (the job itself goes on)."""
        with self._lock:
            self._oom[kind] = self._oom.get(kind, 0) + 1

    def waited(self, kind: str, seconds: float) -> None:
        with self._lock:
            counts = self._waits.setdefault(kind, [0] * (len(WAIT_BUCKETS) + 1))
            counts[bisect.bisect_left(WAIT_BUCKETS, seconds)] += 1
            self._wait_sum[kind] = self._wait_sum.get(kind, 0.0) + max(seconds, 0.0)

    def snapshot(self) -> dict[str, Any]:
        """Plain data (it may cross a process or a Ray call): ended [(kind, status, n)], oom
        {kind: n}, waits {kind: {"buckets": [(le, cumulative)], "sum", "count"}}."""
        with self._lock:
            waits = {}
            for kind, counts in self._waits.items():
                running, buckets = 0, []
                for le, n in zip((*WAIT_BUCKETS, float("inf")), counts, strict=True):
                    running += n
                    buckets.append((le, running))
                waits[kind] = {"buckets": buckets, "sum": self._wait_sum[kind], "count": running}
            return {
                "ended": [(k, s, n) for (k, s), n in sorted(self._ended.items())],
                "oom": dict(self._oom),
                "waits": waits,
                "speed": sorted(self._speed.items()),
            }


def batch_bucket(batch_size: int) -> int:
    """The power of two at or above a batch size: a bounded label (at most 17 values up to the
    largest batch), never the user's own number."""
    return 1 << max(int(batch_size) - 1, 0).bit_length()
