"""Physical bounds a timed figure must keep before a page may show or narrate it (pure Python).

A shared machine can make any timing come out wrong; some wrong ones are impossible: a group of
N processes on the cores one process also had cannot be more than N times as fast, so a scaling
efficiency above 100 % is noise, not a lesson. A measurement that breaks a bound is taken once
more (`in_turn`, the second round in the other order, so both sides see the load the other
saw); if it still breaks it, the record carries `too_noisy` — the bound, the figure and how busy
other processes kept the machine — and the pages say that instead of drawing a conclusion.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeVar

from bsdemo.units import fixed, percent

NOISE = 0.10  # a figure may pass its bound by this share before it counts as broken

A = TypeVar("A")
B = TypeVar("B")


def speedup_breach(speedup: float, processes: int, what: str) -> str | None:
    """Why `speedup` (one process's time ÷ the group's) is impossible for `processes` processes
    sharing the cores one process had, or None."""
    if speedup <= processes * (1 + NOISE):
        return None
    return (
        f"{what} came out {fixed(speedup, 1)}× as fast as one process on the same cores, more than "
        f"the {processes}× that {processes} processes can be"
    )


def in_turn(
    first: Callable[[], A],
    second: Callable[[], B],
    breach: Callable[[A, B], str | None],
    progress: Callable[[A], dict[str, Any]] | None = None,
) -> Generator[dict[str, Any], None, tuple[A, B, str | None, bool]]:
    """Measure two things to set against each other: first(), then second(); where the pair
    breaks a bound, once more the other way round (second() first), so that each side of the
    re-measurement sees the load the other saw before. Yields progress(first's result) as soon
    as first() is done (a check's one-process side takes a second, its group's interpreters
    several to start), and returns (first's, second's, what the pair still breaks or None,
    whether it was measured twice): `a, b, problem, twice = yield from in_turn(...)`."""
    a = first()
    if progress is not None:
        yield progress(a)
    b = second()
    problem = breach(a, b)
    if problem is None:
        return a, b, None, False
    b = second()
    a = first()
    return a, b, breach(a, b), True


def too_noisy(problem: str | None, others_busy: float | None) -> str | None:
    """The record's `too_noisy` text (None when the figure kept its bound)."""
    if problem is None:
        return None
    busy = (
        f"; other processes kept this machine's CPUs {percent(others_busy, 0)} busy meanwhile"
        if others_busy is not None
        else ""
    )
    return f"{problem}, in two measurements{busy}"


def noisy_line(record: dict[str, Any]) -> str | None:
    """A page's sentence for a record whose timing broke its bound twice, or None."""
    reason = record.get("too_noisy")
    if not reason:
        return None
    return (
        f"Its timing was too noisy to read: {reason}. This page draws no conclusion about "
        "speed from it; run it again when the machine is quieter."
    )
