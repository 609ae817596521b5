"""Small models fitted to measurements: t(B) = t0 + t1·B and M(B) = M0 + m·B.

Pure Python (no numpy, no torch): the pages, the CLI and the engine all use the same fits, and a
fit is a few numbers, so the server can compute one from a sweep's points directly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


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


def nonnegative_fit(xs: Sequence[float], ys: Sequence[float]) -> LinearFit | None:
    """linear_fit with intercept >= 0: a step cannot take negative time at batch 0. When least
    squares puts the intercept below 0 (noise at small batches, under load), the line is refitted
    through the origin and marked constrained; R² is that line's."""
    fit = linear_fit(xs, ys)
    if fit is None or fit.intercept >= 0:
        return fit
    slope = sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
    my = sum(ys) / len(ys)
    ss_res = sum((y - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return LinearFit(0.0, slope, 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0, fit.n,
                     constrained=True)


def crossover_batch(step_time: LinearFit) -> float | None:
    """The batch where per-sample work t1·B equals the fixed overhead t0: B* = t0 / t1.

    Below it a step costs mostly overhead (time per step is flat in B); above it the device is
    compute-bound (time grows with B).
    """
    if step_time.slope <= 0 or step_time.intercept <= 0:
        return None
    return step_time.intercept / step_time.slope


def knee_batch(batch_sizes: Sequence[int], samples_per_sec: Sequence[float],
               within: float = 0.10) -> int | None:
    """The smallest batch whose throughput is within `within` of the best measured one."""
    points = [(b, r) for b, r in zip(batch_sizes, samples_per_sec, strict=True)
              if r is not None and math.isfinite(r)]
    if not points:
        return None
    best = max(r for _, r in points)
    return min(b for b, r in points if r >= (1.0 - within) * best)
