"""The batch x learning-rate grid: its runs and cells, each batch's best learning rate, what the
linear and square-root rules predict from the smallest batch's, and what the grid shows."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from bsdemo.config import RunConfig
from bsdemo.recipes.chance import at_chance
from bsdemo.recipes.closing import join
from bsdemo.runs import JobSnapshot
from bsdemo.units import setting

GRID_BATCHES = (8, 32, 128, 512)
GRID_LRS = (0.01, 0.03, 0.1, 0.3, 1.0)


def lr_grid(
    cfg: RunConfig,
    epochs: int,
    time_limit_s: float = 10.0,
    batches: Sequence[int] = GRID_BATCHES,
    lrs: Sequence[float] = GRID_LRS,
) -> list[tuple[str, RunConfig]]:
    """(label, config) of every cell of the batch x learning-rate grid."""
    return [
        (
            f"batch {b}, lr {setting(lr)}",
            dataclasses.replace(cfg, batch_size=b, lr=lr, epochs=epochs, time_limit_s=time_limit_s),
        )
        for b in batches
        for lr in lrs
    ]


def grid_cells(runs: Sequence[tuple[str, JobSnapshot]]) -> list[dict[str, Any]]:
    """The grid's runs as cells: batch, lr, final test accuracy (completed runs only), whether
    that accuracy is at chance, diverged, status, and whether its time cap ended it."""
    cells = []
    for _, s in runs:
        summary = s.summary
        cells.append(
            {
                "batch": s.config["batch_size"],
                "lr": s.config["lr"],
                "accuracy": summary.get("test_accuracy") if s.status == "completed" else None,
                "at_chance": s.status == "completed" and at_chance(summary.get("test_accuracy"), summary),
                "diverged": s.status == "diverged",
                "status": s.status,
                "time_capped": bool(summary.get("time_capped")),
            }
        )
    return cells


UNFINISHED = ("queued", "running")


def best_lr_per_batch(cells: Sequence[dict[str, Any]]) -> dict[int, float]:
    """batch -> the learning rate with the best test accuracy (diverged cells never win), for
    the batches whose every cell has finished: a row still training names no best."""
    waiting = {c["batch"] for c in cells if c.get("status") in UNFINISHED}
    best: dict[int, tuple[float, float]] = {}
    for c in cells:
        if c.get("accuracy") is None or c.get("diverged") or c["batch"] in waiting:
            continue
        if c["batch"] not in best or c["accuracy"] > best[c["batch"]][0]:
            best[c["batch"]] = (c["accuracy"], c["lr"])
    return {b: lr for b, (_, lr) in best.items()}


def rule_predictions(best: dict[int, float]) -> dict[str, dict[int, float]]:
    """What the scaling rules predict each batch's best lr to be, from the smallest batch's
    best: "linear" lr0 × B/B0, "square root" lr0 × √(B/B0)."""
    if not best:
        return {}
    b0 = min(best)
    lr0 = best[b0]
    return {
        "linear": {b: lr0 * b / b0 for b in best},
        "square root": {b: lr0 * math.sqrt(b / b0) for b in best},
    }


def _lr_path(items: Sequence[tuple[int, float]]) -> str:
    """The best lr along the batches, in words: runs of equal lrs and each move between them."""
    runs: list[list[Any]] = []  # [first batch, last batch, lr]
    for b, lr in items:
        if runs and runs[-1][2] == lr:
            runs[-1][1] = b
        else:
            runs.append([b, b, lr])

    def stay(run: list[Any]) -> str:
        return f" and stays there up to batch {run[1]}" if run[1] != run[0] else ""

    first = runs[0]
    text = (
        f"is {setting(first[2])} from batch {first[0]} to {first[1]}"
        if first[1] != first[0]
        else f"is {setting(first[2])} at batch {first[0]}"
    )
    for before, run in zip(runs, runs[1:], strict=False):
        move = "rises" if run[2] > before[2] else "falls"
        text += f", {move} to {setting(run[2])} at batch {run[0]}{stay(run)}"
    return text


def best_lr_verdict(best: dict[int, float], lrs: Sequence[float] = ()) -> str | None:
    """What the grid's best learning rates show, as they are — their path along the batches,
    the rise from the smallest to the largest batch against what the linear and square-root
    rules predict, and where a best lr sits at the grid's edge; None with fewer than two
    batches."""
    if len(best) < 2:
        return None
    items = sorted(best.items())
    (b0, lr0), (bn, lrn) = items[0], items[-1]
    k, rise = bn / b0, lrn / lr0
    rules = {"no change": 1.0, "the square-root rule": math.sqrt(k), "the linear rule": k}
    closest = min(rules, key=lambda name: abs(math.log(rise) - math.log(rules[name])))
    lead = (
        f"From batch {b0} to {bn} the best learning rate changed {setting(rise, 3)}×: closest to {closest}."
    )
    listing = "**Best lr per batch:** " + ", ".join(f"batch {b} → {setting(lr)}" for b, lr in items)
    text = f"{listing}. In your grid the best learning rate {_lr_path(items)}."
    text += (
        f" For {setting(k)}× the batch the square-root rule predicts "
        f"{setting(math.sqrt(k), 3)}× and the linear rule {setting(k)}× (drawn on the grid)."
    )
    falls = [b for a, b in zip(items, items[1:], strict=False) if b[1] < a[1]]
    if falls:
        text += (
            " It does not move one way only: with few epochs and one seed the cells are "
            "noisy — try more epochs."
        )
    top, bottom = (max(lrs), min(lrs)) if lrs else (None, None)
    for end, word, where in ((top, "largest", "above"), (bottom, "smallest", "below")):
        edge = [str(b) for b, lr in items if lr == end and top != bottom]
        if edge:
            text += (
                f" At batch {', '.join(edge)} the best is the grid's {word} lr ({setting(end)}): "
                f"the true best may lie {where} it."
            )
    return join(lead, text)
