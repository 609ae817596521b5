"""A class-sourced sweep: the grid of a lesson's cells, what one run of a cell reports to the
class, and the room's runs combined cell by cell.

The instructor gives each member one cell of the lesson's grid (a batch size; a batch size and a
learning rate on the learning-rate lesson); each member trains that cell on the instructor's
workload, with a seed of their own, so several runs of one cell are several seeds and their
spread is real. What a run reports (`cell_report`) comes from the scheduler's own record of the
member's job, never from the browser. `combine` gathers the reports by cell: median and range
of each measure, the cells nobody ran, and the measuring conditions (device, whether the device
was shared), so a chart never draws speeds taken under different conditions as one curve.
Pure Python: no torch, no Streamlit.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bsdemo.errors import ConfigError
from bsdemo.runs import LIKE_LOAD
from bsdemo.timing import THREAD_CLOCK, WALL_CLOCK
from bsdemo.units import percent, setting

# the pages that take a class-sourced sweep, and their grids: batch sizes (and learning rates)
BATCHES = (8, 16, 32, 64, 128, 256, 512)
LR_BATCHES = (8, 32, 128, 512)
LR_VALUES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
PAGES = {
    "training_lab": "Training Lab",
    "throughput": "Throughput",
    "lr_scaling": "Learning-rate scaling",
    "noise": "Gradient noise",
}
TIME_LIMIT_S = 10.0  # a cell's run stops at this much training time: a room's sweep is minutes
CURVE_POINTS = 60  # the loss curve a run reports, thinned to this many points
SEED_SPAN = 10_000  # a member's seed: the workload's seed plus a number below this


@dataclass(frozen=True)
class Cell:
    """One cell of a grid: a batch size, and a learning rate (None: the workload's own)."""

    batch: int
    lr: float | None = None

    def label(self) -> str:
        return f"batch {self.batch}" + (f" · lr {setting(self.lr)}" if self.lr is not None else "")

    def as_list(self) -> list:
        return [self.batch, self.lr]


def grid(page: str) -> tuple[Cell, ...]:
    """The page's grid of cells, in order (ValueError for a page without one)."""
    if page not in PAGES:
        raise ValueError(f"no class sweep on the page {page!r}")
    if page == "lr_scaling":
        return tuple(Cell(b, lr) for b in LR_BATCHES for lr in LR_VALUES)
    return tuple(Cell(b) for b in BATCHES)


def cells_from(raw: Sequence[Sequence[Any]]) -> tuple[Cell, ...]:
    """A stored grid back as cells."""
    return tuple(Cell(int(b), None if lr is None else float(lr)) for b, lr in raw)


def check_cell(index: object, cells: Sequence[Cell]) -> int:
    """The cell index as an int inside the grid, or ConfigError naming the value and the range."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(cells):
        raise ConfigError("cell", index, f"a cell of this sweep, 0 to {len(cells) - 1}")
    return index


def member_seed(base: int, member: str) -> int:
    """The seed a member trains their cell with: the workload's seed plus a number drawn from the
    member's id (different members of one cell run different seeds; the same member, the same)."""
    drawn = int(hashlib.sha256(member.encode()).hexdigest()[:8], 16) % (SEED_SPAN - 1) + 1
    return int(base) + drawn


def cell_config(base: Mapping[str, Any], cell: Cell, seed: int) -> dict[str, Any]:
    """The run a cell trains: the instructor's workload with the cell's batch (and lr), the
    member's seed and the sweep's time cap."""
    out = dict(base)
    out["batch_size"] = cell.batch
    if cell.lr is not None:
        out["lr"] = cell.lr
    out["seed"] = int(seed)
    out["time_limit_s"] = min(float(out.get("time_limit_s") or TIME_LIMIT_S), TIME_LIMIT_S)
    return out


def _thin(xs: Sequence[float], ys: Sequence[float], count: int) -> list[list[float]]:
    pairs = [[float(x), float(y)] for x, y in zip(xs, ys, strict=False) if y == y]  # no NaN
    if len(pairs) <= count:
        return pairs
    stride = (len(pairs) - 1) / (count - 1)
    return [pairs[round(i * stride)] for i in range(count)]


def cell_report(
    *,
    status: str,
    config: Mapping[str, Any],
    summary: Mapping[str, Any],
    steps: Mapping[str, Sequence],
    start: Mapping[str, Any] | None,
    shared_device: bool,
    turns_with: int,
    stored_at: float | None,
    run: int,
) -> dict[str, Any]:
    """What one finished run of a cell tells the class: its settings, how it ended, final test
    accuracy (a completed run only), samples/s, its loss curve (thinned), the device it ran on
    and how (shared with other jobs, in turns with other runs, or served from the run store)."""
    device = ((start or {}).get("device") or {}).get("name") or "unknown device"
    accuracy = summary.get("test_accuracy") if status == "completed" else None
    cpu = summary.get("cpu_samples_per_sec")  # by the training thread's CPU time: load-proof
    return {
        "batch": int(config["batch_size"]),
        "lr": float(config["lr"]),
        "seed": int(config.get("seed", 0)),
        "status": status,
        "time_capped": bool(summary.get("time_capped")),
        "accuracy": None if accuracy is None else float(accuracy),
        "samples_per_sec": summary.get("samples_per_sec"),
        "speed": cpu or summary.get("samples_per_sec"),
        "clock": THREAD_CLOCK if cpu else WALL_CLOCK,
        "others_busy_share": summary.get("others_busy_share"),
        "torch_threads": summary.get("torch_threads"),
        "curve": _thin(steps.get("epoch", ()), steps.get("loss", ()), CURVE_POINTS),
        "device": str(device),
        "shared": bool(shared_device),
        "turns": int(turns_with),
        "stored": stored_at is not None,
        "run": int(run),
    }


def condition(report: Mapping[str, Any]) -> str:
    """The conditions a run's speed was measured under, in words — the lab's like-with-like
    rule (bsdemo.runs.comparable_rates): by the training thread's CPU time, which other
    processes' load cannot change, runs on one device are alike; by the wall clock, they are
    alike only with the same torch threads, the device shared with other jobs or not, and other
    processes keeping the CPUs about as busy (bands of LIKE_LOAD). A result from the run store
    was measured earlier, under conditions of its own."""
    device = report.get("device", "unknown device")
    if report.get("stored"):
        return f"{device}, measured earlier (run store)"
    if report.get("clock") == THREAD_CLOCK:
        return f"{device}, by {THREAD_CLOCK}"
    parts = [device, WALL_CLOCK]
    if report.get("torch_threads"):
        parts.append(f"{report['torch_threads']} torch thread(s)")
    if report.get("shared"):
        parts.append("shared with other jobs")
    busy = report.get("others_busy_share")
    if busy is not None:
        band = min(int(busy / LIKE_LOAD), int(1 / LIKE_LOAD))
        low, high = band * LIKE_LOAD, min(1.0, (band + 1) * LIKE_LOAD)
        parts.append(f"other processes {percent(low, 0)}–{percent(high, 0)} busy")
    return ", ".join(parts)


@dataclass
class CellSummary:
    """The room's runs of one cell."""

    index: int
    cell: Cell
    reports: list[dict[str, Any]] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return len(self.reports)

    def _values(self, name: str) -> list[float]:
        return sorted(float(r[name]) for r in self.reports if r.get(name) is not None)

    def median(self, name: str) -> float | None:
        values = self._values(name)
        return statistics.median(values) if values else None

    def spread(self, name: str) -> tuple[float, float] | None:
        values = self._values(name)
        return (values[0], values[-1]) if values else None

    @property
    def diverged(self) -> int:
        return sum(r.get("status") == "diverged" for r in self.reports)


@dataclass
class Combined:
    """A sweep's cells with their runs, the cells still empty, and the measuring conditions."""

    cells: list[CellSummary]
    conditions: list[str]

    @property
    def empty(self) -> list[int]:
        return [c.index for c in self.cells if not c.runs]

    @property
    def runs(self) -> int:
        return sum(c.runs for c in self.cells)

    @property
    def filled(self) -> int:
        return sum(1 for c in self.cells if c.runs)

    @property
    def mixed(self) -> bool:
        """Whether the speeds were measured under more than one condition."""
        return len(self.conditions) > 1


def combine(cells: Sequence[Cell], results: Sequence[tuple[int, Mapping[str, Any]]]) -> Combined:
    """The reports by cell (a report for a cell outside the grid is left out)."""
    out = [CellSummary(i, c) for i, c in enumerate(cells)]
    seen: list[str] = []
    for index, report in results:
        if 0 <= index < len(cells):
            out[index].reports.append(dict(report))
            if condition(report) not in seen:
                seen.append(condition(report))
    return Combined(out, sorted(seen))
