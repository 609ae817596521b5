"""The scheduler's write-through to the run store: a run already measured on this device is
served from it; a run measured alone is kept in it. A store that fails never stops a run: the
failure is kept in `error` (the sidebar says so) and logged, and the run goes on fresh."""

from __future__ import annotations

import logging

from bsdemo.config import RunConfig
from bsdemo.runs import EVAL_FIELDS, STEP_FIELDS
from bsdemo.scheduler.job import Job
from bsdemo.store import RunStore

log = logging.getLogger(__name__)


class StoreLink:
    def __init__(self, store: RunStore | None):
        self.store = store
        self.error: str | None = None  # the last failure to read or write the run store

    def find(self, cfg: RunConfig, device: dict | None):
        """The store's result for cfg on device, or None (no store, no device known yet, not
        there, or the store failed to answer)."""
        if self.store is None or not device:
            return None
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
        try:
            self.store.put(vars(job.config), job.start["device"], job.start,
                           job.steps.columns, job.evals.columns, job.end)
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
