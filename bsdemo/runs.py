"""A run's records as the pages, the CLI and the scheduler hold them (pure Python, no torch).

The field lists are the event classes' own (bsdemo.events), so a new step field reaches every
table and chart without a second list to update. `Series` is the bounded, column-wise buffer a
long run's steps go into; `JobSnapshot` is the copy of a job a page draws; `file_event` files a
training run's start, step and eval records the same way wherever they are collected (the
scheduler, as a worker sends them; `collect`, for the CLI's `warm`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bsdemo.events import EvalEvent, StepEvent
from bsdemo.timing import THREAD_CLOCK, WALL_CLOCK

LIKE_LOAD = 0.15  # two runs' others' busy shares within this count as the same conditions

ACTIVE = ("queued", "running")
STEP_FIELDS = tuple(f.name for f in dataclasses.fields(StepEvent))
EVAL_FIELDS = tuple(f.name for f in dataclasses.fields(EvalEvent))


class Series:
    """Column-wise event buffer of at most `max_points` rows.

    When full it keeps every other row and doubles its stride, so a long run keeps an even
    sample of its whole history in bounded memory.
    """

    def __init__(self, fields: tuple[str, ...], max_points: int):
        self.fields = fields
        self.max_points = max_points
        self.columns: dict[str, list] = {f: [] for f in fields}
        self.stride = 1
        self._seen = 0

    def append(self, event: dict[str, Any]) -> None:
        self._seen += 1
        if (self._seen - 1) % self.stride:
            return
        for f in self.fields:
            self.columns[f].append(event.get(f))
        if len(self.columns[self.fields[0]]) >= self.max_points:
            for f in self.fields:
                self.columns[f] = self.columns[f][::2]
            self.stride *= 2

    def __len__(self) -> int:
        return len(self.columns[self.fields[0]])

    def copy(self) -> dict[str, list]:
        return {f: list(v) for f, v in self.columns.items()}


@dataclass(kw_only=True)
class JobFacts:
    """What a job is and how it went so far: the fields the scheduler's live record
    (bsdemo.scheduler.job.Job) and a page's copy (JobSnapshot) share, declared once."""

    id: int
    owner: str
    status: str = "queued"  # "queued", "running", or an end status (events.END_STATUSES)
    kind: str = "train"  # a name in bsdemo.jobkinds.KINDS
    options: dict[str, Any] = field(default_factory=dict)  # the sweep's / finder's arguments
    start: dict[str, Any] | None = None  # the StartEvent as a dict, once the worker sent it
    latest: dict[str, Any] | None = None  # the newest step event (never downsampled away)
    end: dict[str, Any] | None = None
    # sweep_point, find_probe, norms_result, noise_point and sharpness_run records
    points: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None  # the job's one result (jobkinds.RESULT_KINDS)
    submitted_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    stored_at: float | None = None  # served from the run store: when it was measured
    shared_device: bool = False  # another job ran on the same device at some point during this one
    # the most other runs its worker held while it ran, stepped in turns with it (never beside)
    turns_with: int = 0
    predicted_bytes: int | None = None  # device memory the run is predicted to need (footprint)
    wait_reason: str | None = None  # why a queued run has not started
    notice: str | None = None  # what the scheduler decided about this run (e.g. runs alone)
    node: str | None = None  # the cluster node that ran it (a Ray node id); None: this machine
    # the run whose numbers these are: the job's own, or the one it rode (scheduler.joined);
    # charts and texts name a run by it (None: the job's own id)
    run_id: int | None = None
    # the newer run of its browser's that replaced it before it ended (Live mode, or a Run while
    # it waited): it stopped, or never started
    superseded_by: int | None = None
    version: int = 0  # events filed so far: a new number, a new picture


def turns_note(others: int, done: bool = False) -> str:
    """What a run that took turns with `others` runs on its worker is told (JobFacts.turns_with):
    its steps were never timed beside another's, and its time is its own turns'."""
    took = "took" if done else "takes"
    return (
        f"It {took} turns with {others} other run(s) on this server's worker, a few steps "
        "each in turn: every step is timed alone, and its time counts its own turns only."
    )


@dataclass(kw_only=True)
class JobSnapshot(JobFacts):
    """What a page needs to draw one job; a copy, safe to keep after the job moves on."""

    config: dict[str, Any]
    steps: dict[str, list]  # STEP_FIELDS -> values, downsampled with `stride`
    evals: dict[str, list]
    stride: int = 1
    queue_position: int | None = None  # 1 = next to start; None when not queued
    estimated_wait_s: float | None = None  # predicted seconds until a queued run starts
    wait_is_bound: bool = False  # the estimate counts time caps of runs with no measured speed

    @property
    def run_number(self) -> int:
        """The id a chart or a sentence names this run by (see run_id)."""
        return self.run_id or self.id

    @property
    def done(self) -> bool:
        return self.status not in ACTIVE

    @property
    def summary(self) -> dict[str, Any]:
        """The end record's summary ({} until the run ended)."""
        return (self.end or {}).get("summary") or {}

    @property
    def effective_batch(self) -> int:
        return self.config["batch_size"] * self.config["accumulation_steps"]

    @property
    def ending(self) -> str:
        """How the run ended, the time cap told apart from a stop: "time_cap", or its status."""
        return "time_cap" if self.summary.get("time_capped") else self.status

    @property
    def updates_per_epoch(self) -> int | None:
        """Optimizer steps per epoch over the whole run (None until it has a summary)."""
        steps, epochs = self.summary.get("steps"), self.summary.get("epochs")
        return math.ceil(steps / epochs) if steps and epochs else None


def batch_extremes(snaps: Sequence[JobSnapshot]) -> tuple[JobSnapshot, JobSnapshot] | None:
    """The completed runs at the smallest and the largest effective batch (the newest of each),
    or None unless there are two batch sizes to compare."""
    done = [s for s in snaps if s.status == "completed" and s.updates_per_epoch]
    if len({s.effective_batch for s in done}) < 2:
        return None
    return (
        min(done, key=lambda s: (s.effective_batch, -s.id)),
        max(done, key=lambda s: (s.effective_batch, s.id)),
    )


@dataclass
class RunRecord:
    """One training run's records, filed: its start, bounded step and eval series, the newest
    step (never downsampled away) and its end."""

    steps: Series
    evals: Series
    start: dict[str, Any] | None = None
    latest: dict[str, Any] | None = None
    end: dict[str, Any] | None = None


def file_event(holder, event: dict[str, Any]) -> bool:
    """File a start, step or eval record into holder (a RunRecord, or the scheduler's job: any
    object with start, steps, evals and latest); returns False for any other kind."""
    kind = event["kind"]
    if kind == "step":
        holder.steps.append(event)
        holder.latest = event
    elif kind == "eval":
        holder.evals.append(event)
    elif kind == "start":
        holder.start = event
    else:
        return False
    return True


def add_point(points: list[dict[str, Any]], event: dict[str, Any], most: int) -> None:
    """Keep a job's point record: a point measured again (`replaces`: a sweep's later rounds)
    takes the place of the one of its batch size, any other is appended (up to `most`)."""
    if event.get("replaces"):
        for i, old in enumerate(points):
            if old["kind"] == event["kind"] and old.get("batch_size") == event.get("batch_size"):
                points[i] = event
                return
    if len(points) < most:
        points.append(event)


def collect(events: Iterable[dict[str, Any]], max_points: int = 1000) -> RunRecord:
    """A whole run's event dicts, filed."""
    record = RunRecord(Series(STEP_FIELDS, max_points), Series(EVAL_FIELDS, max_points))
    for event in events:
        if not file_event(record, event) and event["kind"] == "end":
            record.end = event
    return record


def stable_rate(summary: dict[str, Any]) -> float | None:
    """A run's samples/s by the training thread's CPU time where it has it (what the device did,
    whatever else ran), else its wall-clock median step's."""
    return summary.get("cpu_samples_per_sec") or summary.get("samples_per_sec")


def cpu_rates(steps: dict[str, list]) -> list[float | None]:
    """Each step's samples/s by the training thread's CPU time (None where a step has none)."""
    return [
        r * t / c if r and t and c else None
        for r, t, c in zip(
            steps.get("samples_per_sec") or (),
            steps.get("step_time_s") or (),
            steps.get("cpu_time_s") or (),
            strict=False,
        )
    ]


def comparable_rates(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, float, str] | None:
    """Two runs' samples/s (from their summaries), set against each other only like with like:
    (a's, b's, the clock). By the training thread's CPU time where both have it — what the
    device did, which others' work cannot change —, else by the wall clock where both ran on the
    same device, with the same torch threads, while other processes kept the CPUs about as busy
    (within LIKE_LOAD). None otherwise: a quiet run's speed is never set against a loaded one's.
    """
    if a.get("cpu_samples_per_sec") and b.get("cpu_samples_per_sec"):
        return a["cpu_samples_per_sec"], b["cpu_samples_per_sec"], THREAD_CLOCK
    ra, rb = a.get("samples_per_sec"), b.get("samples_per_sec")
    busy = (a.get("others_busy_share"), b.get("others_busy_share"))
    if (
        not ra
        or not rb
        or a.get("device") != b.get("device")
        or None in busy
        or a.get("torch_threads") != b.get("torch_threads")
        or abs(busy[0] - busy[1]) > LIKE_LOAD
    ):
        return None
    return ra, rb, WALL_CLOCK
