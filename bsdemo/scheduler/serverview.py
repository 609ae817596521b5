"""The server's view of its scheduler: the device, the run store's state, the load the sidebar
shows and the figures bsdemo.metrics exposes.

A part of `Scheduler` (bsdemo.scheduler.core), as the reaper and the dispatch are.
"""

from __future__ import annotations

from typing import Any

from bsdemo.scheduler import admission
from bsdemo.scheduler.tally import batch_bucket
from bsdemo.store import Store


class ServerView:
    """What the server reads of the scheduler (its attributes are the Scheduler's)."""

    # ----- the server's view -----
    @property
    def device_info(self) -> dict[str, Any] | None:
        """The workers' device, once a worker has started (None before)."""
        return self._device_info

    @property
    def store(self) -> Store | None:
        return self._stored.store

    @property
    def store_error(self) -> str | None:
        """The last failure to read or write the run store."""
        return self._stored.error

    @property
    def store_notice(self) -> str | None:
        """What the run store's state is, when it is not simply working (for the sidebar): the
        store's own notice, and the finished runs still waiting for it."""
        return self._stored.notice

    @property
    def store_waiting(self) -> int:
        """Finished runs not yet written to the run store."""
        return self._stored.waiting

    def flush_store(self, timeout: float = 30.0) -> bool:
        """Wait for the run store's pending writes (tests and shutdown)."""
        return self._stored.flush(timeout)

    @property
    def restarts(self) -> int:
        """Workers replaced after dying."""
        return self._pool.restarts

    def usable_memory(self) -> int | None:
        """Device memory admission shares among concurrent runs (admission.usable_memory)."""
        return admission.usable_memory(self.limits, self._device_info, len(self._pool))

    def load(self) -> dict[str, Any]:
        """What the server is doing now, for the sidebar: runs running and waiting, workers, and
        the device memory admission shares out and has given (predicted, or measured if more)."""
        with self._lock:
            running = self._running()
            return {
                "running": len(running),
                "queued": len(self._queue),
                "workers": len(self._pool),
                "usable_memory_bytes": self.usable_memory(),
                "held_memory_bytes": sum(j.claim() for j in running),
            }

    def metrics(self) -> dict[str, Any]:
        """What bsdemo.metrics exposes: the running totals (scheduler.tally), the queue, and
        each running job's latest step (by worker: a bounded label, never a run id)."""
        with self._lock:
            running = []
            for job in self._running():
                steps = job.steps.columns
                last = {
                    f: (steps.get(f) or [None])[-1]
                    for f in ("samples_per_sec", "peak_memory_bytes", "utilization_pct")
                }
                running.append(
                    {
                        "worker": job.worker,
                        "kind": job.kind,
                        "batch": batch_bucket(job.config.effective_batch_size),
                        **last,
                    }
                )
            return {
                "tally": self._tally.snapshot(),
                "queued": len(self._queue),
                "running": running,
                "workers": len(self._pool),
                "device": self._device_info,
            }

    def workers_ready(self) -> int:
        with self._lock:
            return sum(w.ready for w in self._pool.workers)

    def worker_pids(self) -> list[int]:
        with self._lock:
            return [w.process.pid for w in self._pool.workers]
