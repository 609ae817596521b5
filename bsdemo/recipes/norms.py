"""What a normalisation grid shows (lesson 9), computed from its cells: BatchNorm at the
smallest batch against the per-sample normalisations, its train-vs-eval gap, and how many of
its predictions the batch-mates alone change. Pure functions, unit-tested."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bsdemo.recipes.closing import join
from bsdemo.units import fixed, percent

NAMES = {"none": "no normalisation", "batch": "BatchNorm", "group": "GroupNorm", "layer": "LayerNorm"}
BN_WORSE = 10.0  # points below the best per-sample normalisation that count as "fails"
SAME = 3.0  # points within which normalisations count as alike
FELL = 5.0  # points a per-sample normalisation lost from its best to the largest batch: said


def _done(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cells if c.get("status") == "completed" and c.get("test_accuracy") is not None]


def _at(cells: Sequence[dict[str, Any]], batch: int) -> dict[str, dict[str, Any]]:
    return {c["norm"]: c for c in cells if c["batch_size"] == batch}


def norms_prediction(cells: Sequence[dict[str, Any]]) -> tuple[int, str] | None:
    """Which normalisation reached the lowest test accuracy at the smallest batch (answers:
    BatchNorm, another one, all within SAME points), with the numbers."""
    done = _done(cells)
    if len({c["norm"] for c in done}) < 2:
        return None
    smallest = min(c["batch_size"] for c in done)
    at = _at(done, smallest)
    if len(at) < 2:
        return None
    acc = {n: 100 * c["test_accuracy"] for n, c in at.items()}
    worst = min(acc, key=acc.get)
    index = 2 if max(acc.values()) - acc[worst] < SAME else 0 if worst == "batch" else 1
    return index, f"at batch {smallest}: " + ", ".join(f"{NAMES[n]} {fixed(a, 1)}%" for n, a in acc.items())


def norms_verdict(cells: Sequence[dict[str, Any]], model: str = "mlp") -> str | None:
    """The closing text of a finished grid (Markdown), or None before BatchNorm and one
    per-sample normalisation have both run at the smallest batch."""
    done = _done(cells)
    if not done:
        return None
    smallest, largest = min(c["batch_size"] for c in done), max(c["batch_size"] for c in done)
    at = _at(done, smallest)
    others = {n: c for n, c in at.items() if n in ("group", "layer")}
    if "batch" not in at or not others:
        return None
    bn = at["batch"]
    best_name, best = max(others.items(), key=lambda kv: kv[1]["test_accuracy"])
    gap = 100 * (best["test_accuracy"] - bn["test_accuracy"])
    lead = f"At batch {smallest} BatchNorm reached {percent(bn['test_accuracy'])}, " + (
        f"{gap:.0f} points below {NAMES[best_name]}'s {percent(best['test_accuracy'])}."
        if gap >= BN_WORSE
        else f"within {max(gap, 0):.0f} points of {NAMES[best_name]}: no small-batch failure this time."
    )
    parts = []
    if gap >= BN_WORSE:
        parts.append(
            f"With {smallest} samples, a batch's mean and variance are mostly noise, "
            "and BatchNorm normalises with them."
        )
    elif model == "cnn":
        parts.append(
            "A CNN's BatchNorm averages each channel over the batch *and* every "
            "position of the image, so even two images give it hundreds of values "
            "to estimate from; the MLP preset (one value per feature per sample) shows "
            "the effect."
        )
    bn_cells = sorted((c for c in done if c["norm"] == "batch"), key=lambda c: c["batch_size"])
    top = max(bn_cells, key=lambda c: c["test_accuracy"])
    parts.append(f"BatchNorm did best at batch {top['batch_size']} ({percent(top['test_accuracy'])}).")
    parts.append(
        f"Evaluated with the test set's own batch statistics instead of its running "
        f"averages, BatchNorm at batch {smallest} scored "
        f"{percent(bn['train_mode_test_accuracy'])}, and the batch-mates alone changed "
        f"{percent(bn['partner_changed'], 0)} of its predictions (at batch "
        f"{bn_cells[-1]['batch_size']}: "
        f"{percent(bn_cells[-1]['partner_changed'], 0)}). GroupNorm, LayerNorm and no "
        "normalisation compute each sample alone: "
        + (
            "none of their predictions changed."
            if all(c["partner_changed"] == 0 for c in done if c["norm"] != "batch")
            else "yet some of theirs changed here — a sign of something else at work."
        )
    )
    falls = []  # the per-sample normalisations that still lost accuracy as the batch grew
    for norm in ("none", "group", "layer"):
        runs = [c for c in done if c["norm"] == norm]
        if not runs:
            continue
        peak = max(runs, key=lambda c: c["test_accuracy"])
        last = max(runs, key=lambda c: c["batch_size"])
        if last is not peak and 100 * (peak["test_accuracy"] - last["test_accuracy"]) > FELL:
            falls.append(
                f"{NAMES[norm]} {percent(peak['test_accuracy'])} at batch "
                f"{peak['batch_size']}, {percent(last['test_accuracy'])} at batch "
                f"{last['batch_size']}"
            )
    if falls:
        parts.append(
            f"Every run trains the same epochs, so batch {largest} makes the fewest "
            "updates, and the normalisations that never look at the batch fell too: "
            + "; ".join(falls)
            + ". That fall is too few steps, not normalisation."
        )
    return join(lead, " ".join(parts))
