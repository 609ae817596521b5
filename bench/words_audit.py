"""Audit: every number a page's closing text quotes, traced to its record and to its chart.

Runs lessons' default experiments in this process over several seeds (the engine, with the
pages' defaults, as bench/lessons_bench.py does), composes each page's closing text (its
takeaway and "More") and its main chart with the recipes and charts the pages use, and for
every number the text quotes asks:

- **record**: is it one of the record's numbers, or one derived from two of them (a ratio, a
  difference in points, a share), in a unit the page uses (%, ms, MiB, KiB, GiB), the same
  within the text's own rounding? A number that is none of these is a number the text made up.
- **chart**: quantities the text quotes with a unit (%, ms, MiB, KiB, GiB, samples/s) that are
  among the chart's data (its traces' values, texts and table), the same within rounding.

Prints a table per lesson: seeds, numbers quoted, traced to the record, quantities also on the
chart, and every number not traced (with its sentence). Exit status 1 if any number was not
traced to its record.

    .venv/bin/python bench/words_audit.py [--seeds 10] [--only regimes,lr_scaling]
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import math
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lessons_bench import _lr_runs, run
from bsdemo import charts, recipes
from bsdemo.config import RunConfig
from bsdemo.units import MINUS

# a number as a page writes it: 1,234 · 0.812 · −5.3, then its unit, if any
NUMBER = re.compile(r"(?<![\w#.])([−-]?\d(?:[\d,]*\d)?(?:\.\d+)?)(\s?%| ?×| ms| s\b| MiB| KiB| GiB| B\b"
                    r"| points| samples/s)?")
QUANTITY = {"%", "ms", "MiB", "KiB", "GiB", "samples/s"}
SCALES = (1.0, 100.0, 1e3, 1 / 2**10, 1 / 2**20, 1 / 2**30)


def numbers_in(value: Any, key: str = "") -> Iterable[tuple[str, float]]:
    """Every finite number inside a record (dicts, lists, nested), with the field it is in."""
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        if math.isfinite(value):
            yield key, float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from numbers_in(v, str(k))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from numbers_in(v, key)


def derived(fields: Iterable[tuple[str, float]]) -> set[float]:
    """The record's numbers in the pages' units, and what two values of one field make (two
    runs' accuracies, two techniques' peaks): their ratio, share less one, difference (in
    points, or in a unit) — how a text compares one quantity across runs."""
    by: dict[str, set[float]] = {}
    for key, v in fields:
        by.setdefault(key, set()).add(v)
    out = {v * s for values in by.values() for v in values for s in SCALES}
    for values in by.values():
        for a, b in itertools.permutations(sorted(values)[:60], 2):
            out |= {(a - b) * s for s in SCALES}
            if b:
                out |= {a / b, (a / b - 1) * 100, (1 - a / b) * 100}
    return out


def chart_numbers(chart) -> set[float]:
    """The numbers a chart draws: its traces' values and bases, numbers in its texts, its table."""
    values: set[float] = set()
    for trace in chart.figure.data:
        for name in ("x", "y", "z", "base"):
            values |= {v for _, v in numbers_in(list(getattr(trace, name, None) or []))}
        texts = getattr(trace, "text", None)
        for t in (texts if isinstance(texts, list | tuple) else [texts] if texts else []):
            for row in (t if isinstance(t, list | tuple) else [t]):
                values |= {parse(m.group(1)) for m in NUMBER.finditer(str(row))}
    values |= {v for _, v in numbers_in(chart.table or [])}
    return {v * s for v in values for s in SCALES}


def parse(text: str) -> float:
    return float(text.replace(",", "").replace(MINUS, "-"))


def same(quoted: str, candidates: list[float]) -> bool:
    """Whether a candidate (`candidates`: their absolute values, sorted) rounds to the quoted
    number at its own decimals, or to one last place either way (the page and the audit may
    round a half differently)."""
    q = abs(parse(quoted))
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    unit = 10.0 ** -decimals
    i = bisect.bisect_left(candidates, q - 1.5 * unit - 1e-9)
    return i < len(candidates) and candidates[i] <= q + 1.5 * unit + 1e-9


def audit(text: str, record: Any, chart=None) -> dict[str, Any]:
    """Each quoted number traced to the record (and, for quantities, to the chart)."""
    candidates = sorted({abs(c) for c in derived(numbers_in(record))})
    drawn = sorted({abs(c) for c in chart_numbers(chart)}) if chart is not None else []
    quoted = untraced = quantities = on_chart = control = precise = 0
    missing = []
    for sentence in re.split(r"(?<=[.:;])\s+", text):
        for m in NUMBER.finditer(sentence):
            number, unit = m.group(1), (m.group(2) or "").strip()
            quoted += 1
            # the control, on precise numbers (three significant digits or more: a small count
            # matches something by chance): the same number made 37 % larger, written to the
            # same decimals — how often a number the record never held would pass for traced
            decimals = len(number.split(".")[1]) if "." in number else 0
            if len(number.replace(",", "").replace(".", "").lstrip("−-0")) >= 3:
                precise += 1
                control += same(f"{abs(parse(number)) * 1.37:.{decimals}f}", candidates)
            if not same(number, candidates):
                untraced += 1
                missing.append(f"{number}{unit}: “{sentence.strip()[:110]}”")
            if unit in QUANTITY and chart is not None:
                quantities += 1
                on_chart += same(number, drawn)
    return {"quoted": quoted, "untraced": untraced, "quantities": quantities,
            "on_chart": on_chart, "control": control, "precise": precise, "missing": missing}


# ----- the lessons: (text, record, chart) from one seed's default experiment -----
def regimes(seed: int):
    from bsdemo.runs import JobSnapshot

    runs = recipes.regime_configs(RunConfig(seed=seed), 5, 32, 20.0)
    snaps = [(name, JobSnapshot(id=i, owner="audit", status=r["status"], steps={}, evals={},
                                config=vars(cfg), end={"summary": r}))
             for i, (name, cfg) in enumerate(runs)
             for r in [run(cfg)]]
    rows = charts.comparison_table(snaps)
    return recipes.regimes_verdict(rows), [rows, [s.config for _, s in snaps]], None


def lr_scaling(seed: int):
    from bsdemo.runs import JobSnapshot

    results = _lr_runs(seed, "Linear rule (momentum SGD, k = 8)")
    p = recipes.LR_PRESETS["Linear rule (momentum SGD, k = 8)"]
    base = RunConfig(seed=seed, epochs=p["epochs"], optimizer=p["optimizer"])
    variants = recipes.lr_variants(base, p["ref_batch"], p["ref_lr"], p["k"], p["warmup"])
    snaps = [(name, JobSnapshot(id=i, owner="audit", status=r["status"], steps={}, evals={},
                                config=vars(cfg), end={"summary": r}))
             for i, ((name, cfg), r) in enumerate(zip(variants, results, strict=True))]
    rows = charts.comparison_table(snaps)
    # the presets too: the text names the warm-up one to try next
    return recipes.lr_verdict(rows), [rows, [s.config for _, s in snaps], recipes.LR_PRESETS], None


def fit_batch(seed: int):
    from bsdemo.engine.fitbatch import fit_batch as fit_batch_run

    cfg = RunConfig(seed=seed)
    budget, _ = recipes.simulated_device(cfg, 0.0)
    records = [r for r in fit_batch_run(cfg, budget, accumulation=4)
               if r["kind"] == "fit_batch_result"]
    return (recipes.fit_verdict(records, budget, "cpu"), [records, budget],
            charts.fit_chart(records, budget))


def norms(seed: int):
    from bsdemo.engine.norms import norms_grid

    cells = [c for c in norms_grid(RunConfig(seed=seed, epochs=2), [2, 4, 8, 32, 128])
             if c["kind"] == "norms_result"]
    return recipes.norms_verdict(cells), cells, charts.norms_chart(cells)


LESSONS: dict[str, Callable[[int], tuple]] = {"regimes": regimes, "lr_scaling": lr_scaling,
                                              "fit_batch": fit_batch, "norms": norms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--only", default=",".join(LESSONS))
    args = ap.parse_args()
    failed = False
    print("| lesson | seeds | numbers quoted | traced to the record | control: precise "
          "numbers ×1.37 traced | quantities on the chart |")
    print("|---|---|---|---|---|---|")
    notes = []
    for name in args.only.split(","):
        totals = {"quoted": 0, "untraced": 0, "quantities": 0, "on_chart": 0, "control": 0,
                  "precise": 0}
        for seed in range(args.seeds):
            text, record, chart = LESSONS[name](seed)
            result = audit(text or "", record, chart)
            for k in totals:
                totals[k] += result[k]
            notes += [f"{name} seed {seed}: {m}" for m in result["missing"]]
        failed |= bool(totals["untraced"])
        chart = (f"{totals['on_chart']} of {totals['quantities']}" if totals["quantities"]
                 else "–")
        print(f"| {name} | {args.seeds} | {totals['quoted']} | "
              f"{totals['quoted'] - totals['untraced']} of {totals['quoted']} | "
              f"{totals['control']} of {totals['precise']} | {chart} |",
              flush=True)
    for note in notes:
        print("not traced:", note)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
