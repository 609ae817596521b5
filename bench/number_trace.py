"""How bench/words_audit.py traces a page's words to its numbers: every number a text quotes,
parsed as the page writes it, matched against the record's fields (and the ratios and
differences of two of them) within the text's own rounding, and against the main chart's data."""

from __future__ import annotations

import bisect
import itertools
import math
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bsdemo.units import MINUS

# a number as a page writes it: 1,234 · 0.812 · −5.3, then its unit, if any
NUMBER = re.compile(
    r"(?<![\w#.])([−-]?\d(?:[\d,]*\d)?(?:\.\d+)?(?:e-?\d+)?)"
    r"(\s?%| ?×| ms| s\b| µs| MiB| KiB| GiB| B\b"
    r"| points| samples/s)?"
)
QUANTITY = {"%", "ms", "µs", "MiB", "KiB", "GiB", "samples/s"}
SCALES = (1.0, 100.0, 1e3, 1e6, 1 / 2**10, 1 / 2**20, 1 / 2**30)


SERIES = 16  # a list of more numbers than this is a series (a trace, a curve): charts draw it


def numbers_in(value: Any, key: str = "", series: bool = False) -> Iterable[tuple[str, float]]:
    """Every finite number inside a record (dicts, lists, nested), with the field it is in. A
    series (a list of more than SERIES numbers) is left out unless `series`: a text quotes a
    record's summary numbers, and what it reads off a series the lesson's audit states beside
    the record (else thousands of values would trace any number by chance; the control says)."""
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        if math.isfinite(value):
            yield key, float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from numbers_in(v, str(k), series)
    elif isinstance(value, list | tuple):
        if not series and sum(1 for _ in _flat(value)) > SERIES:
            return
        for v in value:
            yield from numbers_in(v, key, series)


def _flat(value: Any) -> Iterable[Any]:
    for v in value:
        if isinstance(v, list | tuple):
            yield from _flat(v)
        elif isinstance(v, int | float) and not isinstance(v, bool):
            yield v


def derived(fields: Iterable[tuple[str, float]]) -> dict[str, list[float]]:
    """What a quoted number may be, by its unit: the record's numbers in that unit, and what two
    values of one field make (two runs' accuracies, two techniques' peaks) — a difference in
    that unit, a ratio ("×", or none), a share less one ("%"). Each unit looks only at its own
    conversions (a "ms" is a record's seconds × 1,000, never its bytes), so that a number the
    record never held rarely passes by chance (the control measures how rarely)."""
    by: dict[str, set[float]] = {}
    for key, v in fields:
        by.setdefault(key, set()).add(v)
    raw = {v for values in by.values() for v in values}
    diffs, sums, ratios, shares = set(), set(), set(), set()
    for values in by.values():
        for a, b in itertools.permutations(sorted(values)[:60], 2):
            diffs.add(a - b)
            sums.add(a + b)  # two runs' times together (compiling at two batches)
            if b:
                ratios.add(a / b)
                shares |= {a / b - 1, 1 - a / b}

    def scaled(values: set[float], *scales: float) -> set[float]:
        return {abs(v) * s for v in values for s in scales}

    out = {
        "%": scaled(raw | diffs | ratios | shares, 100, 1),
        "points": scaled(diffs | raw, 100, 1),
        # times: a record keeps seconds, or milliseconds or microseconds (fields named so)
        "ms": scaled(raw | diffs, 1e3, 1, 1e-3),
        "µs": scaled(raw | diffs, 1e6, 1),
        "s": scaled(raw | diffs | sums, 1, 1e-6),
        "B": scaled(raw | diffs, 1),
        "KiB": scaled(raw | diffs, 2**-10),
        "MiB": scaled(raw | diffs, 2**-20),
        "GiB": scaled(raw | diffs, 2**-30),
        "×": scaled(ratios | raw, 1),
        "samples/s": scaled(raw | ratios, 1),
        "": scaled(raw | diffs | ratios, 1),
    }
    return {unit: sorted(values) for unit, values in out.items()}


def chart_numbers(chart) -> set[float]:
    """The numbers a chart (or the page's charts, a list) draws: its traces' values and bases,
    numbers in its texts, its table."""
    if isinstance(chart, list):
        return set().union(*map(chart_numbers, chart))
    values: set[float] = set()
    for trace in chart.figure.data:
        for name in ("x", "y", "z", "base"):
            values |= {v for _, v in numbers_in(list(getattr(trace, name, None) or []), series=True)}
        texts = getattr(trace, "text", None)
        for t in texts if isinstance(texts, list | tuple) else [texts] if texts else []:
            for row in t if isinstance(t, list | tuple) else [t]:
                values |= {parse(m.group(1)) for m in NUMBER.finditer(str(row))}
    values |= {v for _, v in numbers_in(chart.table or [], series=True)}
    return {v * s for v in values for s in SCALES}


def parse(text: str) -> float:
    return float(text.replace(",", "").replace(MINUS, "-"))


POWER = re.compile(r"(\d(?:\.\d+)?) × 10([⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)")


CITATION = re.compile(r"(et al\.|\w+ and \w+),? \(?(19|20)\d\d\)?")


def plain(text: str) -> str:
    """A text's powers of ten ("7.45 × 10⁻⁹", as bsdemo.units writes them) as Python reads
    them ("7.45e-9"), so that each is one number; a citation's year ("et al. 2018") left out."""
    text = CITATION.sub(lambda m: m.group(1), text)
    return POWER.sub(
        lambda m: m.group(1) + "e" + m.group(2).translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")), text
    )


def same(quoted: str, candidates: list[float]) -> bool:
    """Whether a candidate (`candidates`: their absolute values, sorted) rounds to the quoted
    number at its own decimals, or to one last place either way (a difference the page takes
    of two rounded numbers)."""
    q = abs(parse(quoted))
    mantissa, _, power = quoted.partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    unit = 10.0 ** (int(power or 0) - decimals)
    i = bisect.bisect_left(candidates, q - unit - 1e-9)
    return i < len(candidates) and candidates[i] <= q + unit + 1e-9


def audit(text: str, record: Any, chart=None) -> dict[str, Any]:
    """Each quoted number traced to the record (and, for quantities, to the chart)."""
    candidates = derived(numbers_in(record))
    drawn = sorted({abs(c) for c in chart_numbers(chart)}) if chart is not None else []
    quoted = untraced = quantities = on_chart = control = precise = 0
    missing = []
    for sentence in re.split(r"(?<=[.:;])\s+", plain(text)):
        for m in NUMBER.finditer(sentence):
            number, unit = m.group(1), (m.group(2) or "").strip()
            quoted += 1
            # the control, on precise numbers (three significant digits or more: a small count
            # matches something by chance): the same number made 37 % larger, written to the
            # same decimals — how often a number the record never held would pass for traced
            mantissa, _, power = number.partition("e")
            decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
            if len(mantissa.replace(",", "").replace(".", "").lstrip("−-0")) >= 3:
                precise += 1
                control += same(
                    f"{abs(parse(mantissa)) * 1.37:.{decimals}f}" + (f"e{power}" if power else ""),
                    candidates[unit],
                )
            if not same(number, candidates[unit]):
                untraced += 1
                missing.append(f"{number}{unit}: “{sentence.strip()[:110]}”")
            if unit in QUANTITY and chart is not None:
                quantities += 1
                on_chart += same(number, drawn)
    return {
        "quoted": quoted,
        "untraced": untraced,
        "quantities": quantities,
        "on_chart": on_chart,
        "control": control,
        "precise": precise,
        "missing": missing,
    }


# ----- the lessons: (text, record, chart) from one seed's default experiment -----
