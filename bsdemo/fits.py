"""Small models fitted to measurements: t(B) = t0 + t1·B and M(B) = M0 + m·B.

Pure Python (no numpy, no torch): the pages, the CLI and the engine all use the same fits, and a
fit is a few numbers, so the server can compute one from a sweep's points directly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bsdemo.timing import bootstrap, interval


@dataclass(frozen=True)
class LinearFit:
    """y = intercept + slope·x, least squares, with the coefficient of determination R²."""

    intercept: float
    slope: float
    r2: float
    n: int  # points used
    constrained: bool = False  # the unconstrained intercept was negative: refitted through 0

    def predict(self, x: float) -> float:
        return self.intercept + self.slope * x

    def solve(self, y: float) -> float | None:
        """The x where the fit reaches y (None if the fit is flat or falling)."""
        if self.slope <= 0:
            return None
        return (y - self.intercept) / self.slope


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> LinearFit | None:
    """Least-squares line through (xs, ys); None with fewer than two distinct x values."""
    n = len(xs)
    if n != len(ys):
        raise ValueError(f"xs and ys differ in length: {n} and {len(ys)}")
    if n < 2 or len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = my - slope * mx
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys)
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return LinearFit(intercept, slope, r2, n)


def step_time_fit(xs: Sequence[float], ys: Sequence[float], iterations: int = 20) -> LinearFit | None:
    """t(B) = t0 + t1·B through measured step times, with t0 >= 0 and t1 >= 0, robust and in
    relative terms; None with fewer than two distinct batch sizes.

    Step times span decades (0.2 ms at batch 1, 20 ms at batch 1024): ordinary least squares
    lets the largest batches decide everything and can put t0 above the batch-1 step itself.
    Here each point's error counts relative to its own time (weights 1/t²), and a point far
    off the line (a burst of load) is down-weighted (Huber weights, re-solved until they
    settle). A coefficient that comes out negative is held at 0 and the other refitted:
    `constrained` says so. R² is the plain one of the line against the points.
    """
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys differ in length: {len(xs)} and {len(ys)}")
    if len(set(xs)) < 2 or any(y <= 0 for y in ys):
        return None
    robust = [1.0] * len(xs)
    t0 = t1 = 0.0
    constrained = False
    for _ in range(iterations):
        w = [h / (y * y) for h, y in zip(robust, ys, strict=True)]
        t0, t1, constrained = _weighted_nonnegative(xs, ys, w)
        rel = [(y - t0 - t1 * x) / y for x, y in zip(xs, ys, strict=True)]
        scale = 1.4826 * statistics.median(abs(r) for r in rel)
        if scale <= 1e-12:
            break
        cut = 1.345 * scale
        new = [1.0 if abs(r) <= cut else cut / abs(r) for r in rel]
        if max(abs(a - b) for a, b in zip(new, robust, strict=True)) < 1e-6:
            break
        robust = new
    my = sum(ys) / len(ys)
    ss_res = sum((y - t0 - t1 * x) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return LinearFit(t0, t1, 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0, len(xs), constrained=constrained)


def _weighted_nonnegative(
    xs: Sequence[float], ys: Sequence[float], w: Sequence[float]
) -> tuple[float, float, bool]:
    """(intercept, slope, whether a bound held) of weighted least squares with both >= 0."""
    s = sum(w)
    sx = sum(wi * x for wi, x in zip(w, xs, strict=True))
    sy = sum(wi * y for wi, y in zip(w, ys, strict=True))
    sxx = sum(wi * x * x for wi, x in zip(w, xs, strict=True))
    sxy = sum(wi * x * y for wi, x, y in zip(w, xs, ys, strict=True))
    det = s * sxx - sx * sx
    if det > 0:
        slope = (s * sxy - sx * sy) / det
        intercept = (sy - slope * sx) / s
        if slope >= 0 and intercept >= 0:
            return intercept, slope, False

    def sse(a: float, b: float) -> float:
        return sum(wi * (y - a - b * x) ** 2 for wi, x, y in zip(w, xs, ys, strict=True))

    through_origin = (0.0, max(sxy / sxx, 0.0)) if sxx > 0 else (0.0, 0.0)
    flat = (max(sy / s, 0.0), 0.0)
    best = min((through_origin, flat), key=lambda ab: sse(*ab))
    return best[0], best[1], True


def crossover_batch(step_time: LinearFit) -> float | None:
    """The batch where per-sample work t1·B equals the fixed overhead t0: B* = t0 / t1.

    Below it a step costs mostly overhead (time per step is flat in B); above it the device is
    compute-bound (time grows with B).
    """
    if step_time.slope <= 0 or step_time.intercept <= 0:
        return None
    return step_time.intercept / step_time.slope


def knee_batch(
    batch_sizes: Sequence[int], samples_per_sec: Sequence[float], within: float = 0.10
) -> int | None:
    """The smallest batch whose throughput is within `within` of the best measured one."""
    points = [
        (b, r)
        for b, r in zip(batch_sizes, samples_per_sec, strict=True)
        if r is not None and math.isfinite(r)
    ]
    if not points:
        return None
    best = max(r for _, r in points)
    return min(b for b, r in points if r >= (1.0 - within) * best)


@dataclass(frozen=True)
class StepTimeReading:
    """What a sweep's step times say, each figure with its uncertainty: the middle 68 % of
    bootstrap estimates (bsdemo.timing). The crossover and the knee are named (not None) only
    where that range spans at most one doubling of the batch; otherwise only the range is."""

    fit: LinearFit | None
    t0_range: tuple[float, float] | None
    t1_range: tuple[float, float] | None
    crossover: float | None
    crossover_range: tuple[float, float] | None
    knee: int | None
    knee_range: tuple[float, float] | None


def step_time_reading(rounds: Mapping[int, Sequence[float]], within: float = 0.10) -> StepTimeReading:
    """The fit t(B), the crossover t0/t1 and the throughput knee from each batch size's
    per-round median step times, and how far resampling the rounds moves each."""
    sizes = sorted(rounds)

    def read(medians: Mapping[int, float]) -> tuple[LinearFit | None, float | None, int | None]:
        ys = [medians[b] for b in sizes]
        fit = step_time_fit(sizes, ys)
        knee = knee_batch(sizes, [b / t for b, t in zip(sizes, ys, strict=True)], within)
        return fit, crossover_batch(fit) if fit else None, knee

    fit, crossover, knee = read({b: statistics.median(v) for b, v in rounds.items()})
    draws = bootstrap(rounds, read) if sizes else []
    fits = [f for f, _, _ in draws if f is not None]
    t0_range = interval([f.intercept for f in fits])
    t1_range = interval([f.slope for f in fits])
    # a draw with no overhead has its crossover at batch 0
    crossover_range = interval([c if c is not None else 0.0 for f, c, _ in draws if f])
    knee_range = interval([k for _, _, k in draws if k is not None])

    def narrow(value, span):
        return value if value and span and span[0] > 0 and span[1] <= 2 * span[0] else None

    return StepTimeReading(
        fit,
        t0_range,
        t1_range,
        narrow(crossover, crossover_range),
        crossover_range,
        narrow(knee, knee_range),
        knee_range,
    )
