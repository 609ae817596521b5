"""The scheduler's write-through to the run store: a run already measured on this device is
served from it; a run measured alone is kept in it. A store that fails never stops a run and
never loses one:

- a finished run waits in `pending` (and, where the server has a data folder, as a file in its
  spool: bsdemo.scheduler.spool) until the store has taken it; a write that fails (SQLite locked,
  PostgreSQL down or frozen) is tried again every WRITE_RETRY_S, and a restarted server writes
  what its spool still holds. `notice` says, while runs wait, how many and why;
- a lookup first asks `pending` (a run that has just finished is found at once, whatever the
  store is doing), then the store, waiting at most LOOKUP_S for it — and not at all while the
  store is not taking writes: a Run press never waits on a stuck store, it trains fresh.

Writes happen on a thread of their own, never under the scheduler's lock, and never under a
lock that a lookup needs: `pending` is guarded by a lock of its own that no store call holds."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from bsdemo.config import RunConfig
from bsdemo.jobkinds import KINDS
from bsdemo.runs import EVAL_FIELDS, STEP_FIELDS
from bsdemo.scheduler.job import Job
from bsdemo.scheduler.spool import PendingRun, Spool
from bsdemo.store import LOOKUP_S, Store, StoredRun, run_key

log = logging.getLogger(__name__)
WRITE_RETRY_S = 5.0  # a run the store did not take is offered again after this long


class StoreLink:
    def __init__(self, store: Store | None, spool: Path | None = None):
        """store: where finished runs are kept (None: nowhere). spool: a folder that keeps the
        runs still waiting for the store across a restart of the server (None: in memory)."""
        self.store = store
        self.error: str | None = None  # the last failure to read or write the run store
        self._spool = Spool(spool) if store is not None and spool is not None else None
        self._lock = threading.Lock()  # guards _pending and _failing; never held in a store call
        self._pending: dict[str, PendingRun] = {}  # run key -> run not yet in the store, in order
        self._failing: str | None = None  # why the last write failed, while runs wait
        self._wake = threading.Condition(self._lock)
        if store is None:
            return
        if self._spool is not None:
            for run in self._spool.load():
                self._pending[run.key(store.version)] = run
            # its own thread: a run reaches the disk at once, even while the writer waits on
            # a stuck store (a write may wait CALL_S)
            threading.Thread(target=self._spool_new, name="bsdemo-store-spooler", daemon=True).start()
        threading.Thread(target=self._write, name="bsdemo-store-writer", daemon=True).start()

    # ----- reading -----
    def find(self, cfg: RunConfig, device: dict | None, wait: float = LOOKUP_S):
        """The result for cfg on device — a finished run still waiting to be written, else the
        store's — or None (no store, no device known yet, not there, or the store did not answer
        within `wait` seconds: the run is then trained fresh)."""
        if self.store is None or not device:
            return None
        config = vars(cfg)
        with self._lock:
            waiting = self._pending.get(run_key(config, device, self.store.version))
            failing = self._failing
        if waiting is not None:
            return waiting.stored(self.store.host)
        if failing:  # the store is not taking writes: a lookup would only wait on it
            return None
        try:
            return self.store.find(config, device, wait=wait)
        except Exception as exc:  # noqa: BLE001 - a damaged or stuck store must not stop a run
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("run store lookup failed (%s); running it fresh", self.error)
            return None

    @property
    def waiting(self) -> int:
        """Finished runs not yet in the store."""
        with self._lock:
            return len(self._pending)

    @property
    def notice(self) -> str | None:
        """What the page says about the store: its own notice, and the runs waiting for it."""
        if self.store is None:
            return None
        with self._lock:
            count, failing = len(self._pending), self._failing
        notes = [self.store.notice] if self.store.notice else []
        if count and failing:
            where = (
                "on this server's disk"
                if self._spool is not None and self._spool.usable
                else "in this server's memory"
            )
            notes.append(
                f"{count} finished run(s) wait to be stored: the run store did not take "
                f"them ({failing}). They are kept {where} and written as soon as it "
                f"answers; runs still train."
            )
        return " ".join(notes) or None

    # ----- writing -----
    def keep(self, job: Job) -> None:
        """Keep a completed training run, if it was measured alone: a stored result must be an
        honest one."""
        if (
            self.store is None
            or not KINDS[job.kind].stored
            or job.status != "completed"
            or job.start is None
            or job.shared_device
        ):
            return
        # copies, taken under the scheduler's lock; the write itself happens on the writer thread
        run = PendingRun(
            vars(job.config).copy(),
            job.start["device"],
            job.start,
            {k: list(v) for k, v in job.steps.columns.items()},
            {k: list(v) for k, v in job.evals.columns.items()},
            job.end,
            job.finished_at or time.time(),
        )
        with self._lock:
            self._pending[run.key(self.store.version)] = run
            self._wake.notify_all()  # the spooler and the writer

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every finished run is in the store (tests, shutdown); whether they are."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._wake.notify_all()  # a writer waiting to retry tries now
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(min(left, 0.1))
        return True

    def _save(self, run: PendingRun) -> None:
        with run.saving:  # once, by whichever thread comes first
            if not run.spooled:
                if self._spool is not None:
                    self._spool.save(run)
                run.spooled = True

    def _spool_new(self) -> None:
        while True:
            with self._lock:
                while not (new := [r for r in self._pending.values() if not r.spooled]):
                    self._wake.wait()
            for run in new:
                self._save(run)

    def _write(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._wake.wait()
                batch = list(self._pending.items())
            failed = False
            for key, run in batch:
                if not run.spooled:  # the spooler has not reached it yet: on disk first
                    self._save(run)
                try:
                    self.store.put(
                        run.config, run.device, run.start, run.steps, run.evals, run.end, created=run.created
                    )
                except Exception as exc:  # noqa: BLE001 - a full disk must not stop the lab
                    failed = True
                    self.error = f"{type(exc).__name__}: {exc}"
                    log.warning("run store write failed (%s); the run waits and is tried again", self.error)
                    with self._lock:
                        self._failing = self.error[:200]
                    break  # in order: the next runs wait behind this one
                if self._spool is not None:
                    self._spool.remove(run)
                with self._lock:
                    if self._pending.get(key) is run:
                        del self._pending[key]
                    if not self._pending:
                        self._failing = None
                    self._wake.notify_all()
            if failed:
                with self._lock:
                    self._wake.wait(WRITE_RETRY_S)


def serve(job: Job, stored: StoredRun) -> None:
    """Finish job from a stored run (no worker, no device time)."""
    job.status = "completed"
    job.start, job.end = stored.start, stored.end
    job.started_at = job.finished_at = job.stored_at = stored.created
    job.steps.columns = {f: list(stored.steps.get(f, [])) for f in STEP_FIELDS}
    job.evals.columns = {f: list(stored.evals.get(f, [])) for f in EVAL_FIELDS}
    job.latest = {f: job.steps.columns[f][-1] for f in STEP_FIELDS} if len(job.steps) else None
