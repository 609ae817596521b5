"""The timing protocol's arithmetic (pure Python): how a timed figure is summarised, in which
order things are measured, and how sure a figure derived from timings is.

A shared machine makes single timings lie: another process takes the core for a few
milliseconds and whatever was being timed then looks slow. So every timed figure is measured in
*rounds* — each point of a sweep once per round, in a shuffled order, so that a burst of load
falls on different points in different rounds instead of on one — and summarised by its median
with the middle half of its timings (`Spread`: the quartiles and the count). A figure computed
from several points (a fit, a knee) gets its uncertainty from `bootstrap`: the rounds of each
point resampled and the figure recomputed, so a page can name a knee only when the noise allows.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

THREAD_CLOCK = "thread CPU time"  # the training thread's own CPU time (bsdemo.engine.measure)
WALL_CLOCK = "wall clock"
DEVICE_CLOCK = "CUDA event time"  # the GPU's own time between two events on its stream
NOISY = 0.10  # a point whose rounds disagree by more than this share gets another round
BOOTSTRAP_DRAWS = 200
COVERAGE = 0.68  # the middle 68 % of bootstrap estimates: about ±1 standard error


@dataclass(frozen=True)
class Spread:
    """A timed quantity: its median, the quartiles around it (the middle half of the
    measurements) and how many measurements there were."""

    median: float
    q1: float
    q3: float
    n: int

    @property
    def relative_iqr(self) -> float:
        """The middle half's width as a share of the median (0 for a perfectly steady figure)."""
        return (self.q3 - self.q1) / self.median if self.median > 0 else math.inf

    def per(self, amount: float) -> Spread:
        """amount ÷ this (a time) as a rate: samples/s from seconds per step; the quartiles swap
        (the slowest quarter of steps is the lowest quarter of rates)."""
        return Spread(amount / self.median, amount / self.q3, amount / self.q1, self.n)

    def as_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "q1": self.q1, "q3": self.q3, "n": self.n}


def spread(values: Sequence[float]) -> Spread:
    """Median and quartiles of values (at least one); one value is its own quartiles."""
    if not values:
        raise ValueError("spread of no values")
    if len(values) == 1:
        return Spread(values[0], values[0], values[0], 1)
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return Spread(median, q1, q3, len(values))


def disagreement(values: Sequence[float]) -> float:
    """How far the rounds of one point disagree: (largest − smallest) ÷ their median."""
    if len(values) < 2:
        return math.inf
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle > 0 else math.inf


def round_order(items: Sequence[T], round_: int, seed: int) -> list[T]:
    """The order of round `round_`: the items shuffled, differently in each round, the same for
    the same seed (a rerun measures in the same order)."""
    order = list(items)
    random.Random(f"{seed}:{round_}").shuffle(order)
    return order


def bootstrap(
    samples: Mapping[K, Sequence[float]],
    statistic: Callable[[dict[K, float]], T],
    draws: int = BOOTSTRAP_DRAWS,
    seed: int = 0,
) -> list[T]:
    """`statistic` recomputed `draws` times, each time from every key's samples resampled with
    replacement and summarised by their median."""
    rng = random.Random(seed)
    out = []
    for _ in range(draws):
        resampled = {k: statistics.median(rng.choices(v, k=len(v))) for k, v in samples.items()}
        out.append(statistic(resampled))
    return out


def interval(values: Sequence[float], coverage: float = COVERAGE) -> tuple[float, float] | None:
    """The central `coverage` of values (None for no values): the bootstrap's uncertainty."""
    finite = sorted(v for v in values if v is not None and math.isfinite(v))
    if not finite:
        return None
    tail = (1.0 - coverage) / 2
    last = len(finite) - 1
    lo = finite[int(tail * last + 1e-9)]  # 1e-9: 0.16 × 100 is 15.999… in floating point
    hi = finite[math.ceil((1.0 - tail) * last - 1e-9)]
    return lo, hi
