"""The scheduler's write-through to the run store: a run already measured on this device is
served from it; a run measured alone is kept in it. A store that fails never stops a run: the
failure is kept in `error` (the sidebar says so) and logged, and the run goes on fresh.

Writes happen on a thread of their own, never under the scheduler's lock: a store that is locked
or slow (each statement waits at most bsdemo.store.BUSY_S) delays only its own queue of writes,
never a page's poll."""

from __future__ import annotations

import logging
import queue
import threading

from bsdemo.config import RunConfig
from bsdemo.runs import EVAL_FIELDS, STEP_FIELDS
from bsdemo.scheduler.job import Job
from bsdemo.store import Store

log = logging.getLogger(__name__)
SETTLE_S = 5.0  # how long a lookup outside the scheduler's lock waits for pending writes


class StoreLink:
    def __init__(self, store: Store | None):
        self.store = store
        self.error: str | None = None  # the last failure to read or write the run store
        self._writes: queue.Queue = queue.Queue()
        if store is not None:
            threading.Thread(target=self._write, name="bsdemo-store-writer", daemon=True).start()

    def find(self, cfg: RunConfig, device: dict | None, settle: bool = False):
        """The store's result for cfg on device, or None (no store, no device known yet, not
        there, or the store failed to answer). settle: first wait for the writes asked for so
        far (not under the scheduler's lock)."""
        if self.store is None or not device:
            return None
        if settle:  # a run that has just finished is found (bounded: the store may be locked)
            self.flush(timeout=SETTLE_S)
        try:
            return self.store.find(vars(cfg), device)
        except Exception as exc:  # noqa: BLE001 - a damaged store must not stop a run
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("run store lookup failed (%s); running it fresh", self.error)
            return None

    def keep(self, job: Job) -> None:
        """Keep a completed training run, if it was measured alone: a stored result must be an
        honest one."""
        if (self.store is None or job.kind != "train" or job.status != "completed"
                or job.start is None or job.shared_device):
            return
        # copies, taken under the scheduler's lock; the write itself happens on the writer thread
        self._writes.put((vars(job.config).copy(), job.start["device"], job.start,
                          {k: list(v) for k, v in job.steps.columns.items()},
                          {k: list(v) for k, v in job.evals.columns.items()}, job.end))

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every write asked for so far is done (tests, shutdown); whether it was."""
        done = threading.Event()
        self._writes.put(done)
        return done.wait(timeout)

    def _write(self) -> None:
        while True:
            item = self._writes.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                self.store.put(*item)
            except Exception as exc:  # noqa: BLE001 - a full disk must not stop the lab
                self.error = f"{type(exc).__name__}: {exc}"
                log.warning("run store write failed (%s); the run is not kept", self.error)


def serve(job: Job, stored) -> None:
    """Finish job from a stored run (no worker, no device time)."""
    job.status = "completed"
    job.start, job.end = stored.start, stored.end
    job.started_at = job.finished_at = job.stored_at = stored.created
    job.steps.columns = {f: list(stored.steps.get(f, [])) for f in STEP_FIELDS}
    job.evals.columns = {f: list(stored.evals.get(f, [])) for f in EVAL_FIELDS}
    job.latest = {f: job.steps.columns[f][-1] for f in STEP_FIELDS} if len(job.steps) else None
