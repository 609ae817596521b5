"""The scheduler's live record of one job (`Job`), and the copy of it a page draws.

A Job is a `JobFacts` (bsdemo.runs: the fields a page sees, declared once) plus what only the
scheduler needs: the typed config, the bounded step buffers, its worker, its owner's address,
and when a page last looked. Pure Python; the scheduler mutates it under its lock.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass, field

from bsdemo.config import RunConfig
from bsdemo.jobkinds import KINDS
from bsdemo.runs import JobFacts, JobSnapshot, Series

# measurements: nothing else may share the device meanwhile
EXCLUSIVE_KINDS = tuple(k.name for k in KINDS.values() if k.exclusive)
_FACTS = tuple(f.name for f in dataclasses.fields(JobFacts))


@dataclass(kw_only=True)
class Job(JobFacts):
    config: RunConfig
    steps: Series
    evals: Series
    predicted_bytes: int = 0  # the cost bound's memory at its largest batch: admission reserves it
    worker: int | None = None
    cancel_requested: bool = False
    group: int | None = None  # the comparison it belongs to (one unit for the session limit)
    last_seen: float = field(default_factory=time.monotonic)  # its owner's page looked
    unattended: bool = False  # cancelled because nobody looked for the grace period
    address: str | None = None  # the client's connection address (per-address limit)
    wall_s: float | None = None  # the whole job's time cap (non-training kinds: the worker's)
    # monotonic times past which the scheduler kills its worker: its cap (or its Stop) plus the
    # grace; set when it starts (and when it is stopped)
    kill_at_cap: float | None = None
    kill_at_stop: float | None = None
    check_store: bool = False  # look in the run store before training (once the device is known)
    # identical requests ride one run (bsdemo.scheduler.joined): the run a follower rides, the
    # followers a run carries, and the owner who started a run and then left it to them
    follows: int | None = None
    followers: list[int] = field(default_factory=list)
    left_by: str | None = None
    rode: bool = False  # it rode another's run (never counted, learned from or stored itself)
    repeat: bool = False  # queued by a browser that had queued a job before (queued behind firsts)

    @property
    def exclusive(self) -> bool:
        return self.kind in EXCLUSIVE_KINDS

    def claim(self) -> int:
        """Device memory this run holds or will hold: the prediction, or more if measured."""
        latest = self.latest or {}
        measured = max(
            (latest.get(k) or 0 for k in ("memory_reserved_bytes", "peak_memory_bytes")), default=0
        )
        return max(self.predicted_bytes, measured)

    def workload(self) -> tuple:
        """What fixes a run's step time on one device (for wait estimates)."""
        c = self.config
        return (
            self.kind,
            c.dataset,
            c.model,
            c.norm,
            c.width,
            c.depth,
            c.batch_size,
            c.accumulation_steps,
            c.optimizer,
            c.samples,
        )

    def snapshot(self, position: int | None, wait: float | None, bound: bool) -> JobSnapshot:
        """A copy for drawing: every shared fact, the series as plain columns, its place in the
        queue and the predicted wait. Caller holds the scheduler's lock."""
        facts = {name: copy.copy(getattr(self, name)) for name in _FACTS}
        facts["wait_reason"] = (
            self.wait_reason
            if position == 1
            else f"{position - 1} run(s) ahead of it in the queue"
            if position
            else None
        )
        steps = self.steps.copy()
        latest = self.latest
        if latest and steps["step"] and steps["step"][-1] != latest.get("step"):
            for name, column in steps.items():  # the curves end where the tiles are: at the
                column.append(latest.get(name))  # newest step, whatever the downsampling kept
        return JobSnapshot(
            **facts,
            config=vars(self.config).copy(),
            steps=steps,
            evals=self.evals.copy(),
            stride=self.steps.stride,
            queue_position=position,
            estimated_wait_s=wait,
            wait_is_bound=bound,
        )
