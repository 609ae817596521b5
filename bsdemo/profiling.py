"""Where a training step's time goes, read from a profiler trace (pure Python, no torch).

A trace is the Chrome trace event format that torch.profiler writes (`export_chrome_trace`):
`traceEvents`, each with a name, a category, a start (`ts`) and a duration (`dur`) in µs, and the
process and thread it ran on. The profiler marks each training step (`ProfilerStep#N`, a user
annotation) and the optimizer's calls (`Optimizer.step#…`, `Optimizer.zero_grad#…`); PyTorch's
operators are `cpu_op` events, nested (an operator calls others); on a GPU the kernels are
`kernel` events on the device's own timeline.

Per step this reads the *top-level* operators of the thread that ran the step (those no other
operator of that thread contains), from the step's first operator to its last, and the gaps
between them: time the thread spent in Python (the model's code, the lab's step, the
profiler's own bookkeeping) with no PyTorch operator running. Across two or more batch
sizes, each operator's time per step (and the gaps') is fitted as f + g·B: f is time that stays
when the batch grows (Python, dispatch, launches, optimizer bookkeeping), g·B the time that grows
with it. Summed, they are the trace's own t0 + t1·B, set beside a sweep's fit.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

STEP_PREFIX = "ProfilerStep#"
GAP = "(gaps: Python between operators)"  # the row of time with no operator running
KERNEL_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
REQUIRED_FIELDS = ("name", "ph", "ts", "pid", "tid")  # every Chrome trace event has these
TECHNIQUES = {"compile": "torch.compile", "cuda_graphs": "CUDA graphs"}  # ways to cut the overhead


def technique_name(technique: str) -> str:
    """The overhead cut's name as people know it."""
    return TECHNIQUES.get(technique, technique)


@dataclass(frozen=True)
class Span:
    """A stretch of one step's timeline, in µs from the step's start."""

    name: str
    part: str  # "forward", "backward", "optimizer", "other", "gap" or "kernel"
    start: float
    dur: float


@dataclass(frozen=True)
class StepProfile:
    """One profiled step: its length, its top-level operators and gaps, and (on a GPU) its
    kernels. Times in µs; `index` is the step's number in the trace (ProfilerStep#index: the
    index-th step, from 0, since the profiler began)."""

    dur: float
    spans: tuple[Span, ...]
    kernels: tuple[Span, ...] = ()
    index: int = -1

    @property
    def busy(self) -> float:
        return sum(s.dur for s in self.spans if s.part != "gap")

    @property
    def gaps(self) -> float:
        return sum(s.dur for s in self.spans if s.part == "gap")

    def by_name(self) -> dict[str, float]:
        """Time per top-level operator name (gaps as one row), summed over the step."""
        rows: dict[str, float] = {}
        for s in self.spans:
            key = GAP if s.part == "gap" else s.name
            rows[key] = rows.get(key, 0.0) + s.dur
        return rows

    def by_part(self) -> dict[str, float]:
        parts: dict[str, float] = {}
        for s in self.spans:
            parts[s.part] = parts.get(s.part, 0.0) + s.dur
        return parts

    @property
    def kernel_busy(self) -> float:
        """The union of the kernels' spans: time the GPU was running something."""
        return _union(self.kernels)


def check_trace(trace: Any) -> list[dict[str, Any]]:
    """The trace's events, after checking it is a Chrome trace (ValueError naming what is not)."""
    if not isinstance(trace, Mapping) or not isinstance(trace.get("traceEvents"), list):
        raise ValueError("not a Chrome trace: no traceEvents list")
    events = trace["traceEvents"]
    for i, event in enumerate(events):
        missing = [k for k in REQUIRED_FIELDS if k not in event]
        if missing and event.get("ph") != "M":  # metadata events may leave ts out
            raise ValueError(f"trace event {i} lacks {', '.join(missing)}")
    return events


def steps(trace: Mapping[str, Any]) -> list[StepProfile]:
    """Every profiled step of the trace, in order."""
    events = check_trace(trace)
    marks = sorted(
        (e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(STEP_PREFIX)),
        key=lambda e: e["ts"],
    )
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    optim = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") == "user_annotation"
        and str(e.get("name", "")).startswith("Optimizer.")
    ]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") in KERNEL_CATEGORIES]
    return [_step(mark, ops, optim, kernels) for mark in marks]


def _step(mark: Mapping, ops: list, optim: list, kernels: list) -> StepProfile:
    """The step from its first operator to its last (or its last kernel's end): the profiler's
    mark runs from one `prof.step()` to the next, so it also holds the loop's work between two
    steps, which a step's own time (the lab's step_time_s) leaves out."""
    t0, t1, tid = mark["ts"], mark["ts"] + mark["dur"], mark["tid"]
    mine = sorted(
        (e for e in ops if e["tid"] == tid and t0 <= e["ts"] < t1), key=lambda e: (e["ts"], -e["dur"])
    )
    launched = [e for e in kernels if t0 <= e["ts"] < t1]
    if mine:
        t1 = max([min(e["ts"] + e["dur"], t1) for e in mine] + [e["ts"] + e["dur"] for e in launched])
        t0 = mine[0]["ts"]
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in optim if e["tid"] == tid and t0 <= e["ts"] < t1]
    spans: list[Span] = []
    cursor = t0
    for e in mine:
        if e["ts"] < cursor:  # inside a top-level operator already counted
            continue
        if e["ts"] > cursor:
            spans.append(Span(GAP, "gap", cursor - t0, e["ts"] - cursor))
        end = min(e["ts"] + e["dur"], t1)
        spans.append(Span(e["name"], _part(e, windows), e["ts"] - t0, end - e["ts"]))
        cursor = end
    if cursor < t1:
        spans.append(Span(GAP, "gap", cursor - t0, t1 - cursor))
    # a step's kernels: those launched while it ran (they may finish a little after its mark)
    ran = tuple(Span(e["name"], "kernel", e["ts"] - t0, e["dur"]) for e in launched)
    number = str(mark["name"])[len(STEP_PREFIX) :]
    return StepProfile(t1 - t0, tuple(spans), ran, int(number) if number.isdigit() else -1)


def _part(event: Mapping, optimizer_windows: list[tuple[float, float]]) -> str:
    name = str(event["name"])
    if any(a <= event["ts"] < b for a, b in optimizer_windows):
        return "optimizer"
    if name.startswith("autograd::engine::evaluate_function") or "Backward" in name:
        return "backward"
    if name.startswith("aten::") or name.startswith("prim::"):
        return "forward"
    return "other"


def _union(spans: Sequence[Span]) -> float:
    total, end = 0.0, float("-inf")
    for s in sorted(spans, key=lambda s: s.start):
        a, b = max(s.start, end), s.start + s.dur
        if b > a:
            total += b - a
        end = max(end, b)
    return total


def typical(profiles: Sequence[StepProfile]) -> StepProfile:
    """The step of median length (the lower middle of an even count): the one to draw."""
    if not profiles:
        raise ValueError("no profiled steps")
    ordered = sorted(profiles, key=lambda p: p.dur)
    return ordered[(len(ordered) - 1) // 2]


def per_step_rows(profiles: Sequence[StepProfile]) -> dict[str, float]:
    """Median time per step of each top-level operator name and of the gaps, µs."""
    names = {k for p in profiles for k in p.by_name()}
    return {k: statistics.median(p.by_name().get(k, 0.0) for p in profiles) for k in names}


@dataclass(frozen=True)
class Split:
    """The trace's step time as t0 + t1·B: per row (an operator name, or the gaps) the time
    that stays fixed as the batch grows (f) and the time per sample (g), µs."""

    fixed: dict[str, float]
    per_sample: dict[str, float]

    @property
    def t0(self) -> float:
        return sum(self.fixed.values())

    @property
    def t1(self) -> float:
        return sum(self.per_sample.values())

    def at(self, b: int) -> tuple[float, float]:
        """(fixed, growing) µs of a step of batch b."""
        return self.t0, self.t1 * b

    def fixed_share(self, b: int) -> float:
        fixed, growing = self.at(b)
        return fixed / (fixed + growing) if fixed + growing > 0 else 0.0


def split(rows_by_batch: Mapping[int, Mapping[str, float]]) -> Split:
    """Fit every row's time per step over the batch sizes as f + g·B with f, g ≥ 0 (least
    squares; at two sizes, the line through both). Two sizes at least."""
    sizes = sorted(rows_by_batch)
    if len(sizes) < 2:
        raise ValueError("a split needs two batch sizes or more")
    names = {k for rows in rows_by_batch.values() for k in rows}
    fixed, per_sample = {}, {}
    for name in sorted(names):
        ys = [rows_by_batch[b].get(name, 0.0) for b in sizes]
        f, g = _nonnegative_line(sizes, ys)
        fixed[name], per_sample[name] = f, g
    return Split(fixed, per_sample)


def _nonnegative_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    g = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    f = my - g * mx
    if g < 0:  # time that shrinks as the batch grows: noise around a fixed cost
        return max(my, 0.0), 0.0
    if f < 0:  # no fixed part: the best line through the origin
        return 0.0, max(sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs), 0.0)
    return f, g


def two_point_fit(times: Mapping[int, float]) -> tuple[float, float]:
    """(t0, t1) of the line through the step times at the smallest and the largest batch."""
    lo, hi = min(times), max(times)
    t1 = (times[hi] - times[lo]) / (hi - lo)
    return times[lo] - t1 * lo, t1
