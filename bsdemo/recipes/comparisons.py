"""The comparison lessons' runs and verdicts: the three regimes and the lr rules; the lr grid's
(`lrgrid`) are imported from here too."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from bsdemo.config import RunConfig
from bsdemo.recipes.chance import chance_words
from bsdemo.recipes.closing import join
from bsdemo.recipes.lrgrid import (
    GRID_BATCHES,
    GRID_LRS,
    best_lr_per_batch,
    best_lr_verdict,
    grid_cells,
    lr_grid,
    rule_predictions,
)
from bsdemo.runs import JobSnapshot
from bsdemo.units import fixed, percent, setting, sig, signed


# ----- the three regimes -----
def regime_configs(
    cfg: RunConfig, epochs: int, mini_batch: int = 32, time_limit_s: float | None = None, sgd_batch: int = 1
) -> list[tuple[str, RunConfig]]:
    """(name, config) of SGD (batch sgd_batch), full batch and mini-batch: the same model, data,
    seed and epoch budget, no accumulation, the mini-batch at most the training set."""
    base = dataclasses.replace(
        cfg, accumulation_steps=1, epochs=epochs, max_steps=None, time_limit_s=time_limit_s
    )
    base, _ = base.validated()
    n = base.train_samples
    return [
        (f"SGD (batch {sgd_batch})", dataclasses.replace(base, batch_size=min(sgd_batch, n))),
        ("full batch", dataclasses.replace(base, batch_size=n)),
        ("mini-batch", dataclasses.replace(base, batch_size=min(mini_batch, n))),
    ]


def regime_label(name: str, cfg: RunConfig) -> str:
    """A regime's name with its batch, as a page labels its curves."""
    return name if name.startswith("SGD") else f"{name} ({cfg.batch_size})"


def regimes_verdict(rows: Sequence[dict[str, Any]]) -> str | None:
    """What the regimes' results (bsdemo.charts.comparison_table rows) show; None until all
    have ended. Runs that did not finish their epochs (a time cap, a stop, divergence) are named,
    and accuracy is ranked only among the runs that did: a cap must not pick the winner."""
    if not rows or any(r["status"] in ("queued", "running") for r in rows):
        return None
    finished = [
        r
        for r in rows
        if r["status"] == "completed" and r["note"] != "time cap" and r["test accuracy"] is not None
    ]
    short = [r for r in rows if r not in finished]
    most = max(rows, key=lambda r: r["weight updates"] or 0)
    least = min(rows, key=lambda r: r["weight updates"] or 0)
    lead = (
        f"{most['run']} made {most['weight updates'] or 0:,} weight updates, "
        f"{least['run']} {least['weight updates'] or 0:,}"
        if (most["weight updates"] or 0) > (least["weight updates"] or 0)
        else f"Every run made {most['weight updates'] or 0:,} weight updates"
    )
    text = ""
    timed = [r for r in finished if r["wall time (s)"] is not None]
    if timed:
        fastest = min(timed, key=lambda r: r["wall time (s)"])
        text += (
            f"Of the runs that finished, {fastest['run']} took the least training time "
            f"({fixed(fastest['wall time (s)'], 2)} s)."
        )
    if len(finished) >= 2:
        best = max(finished, key=lambda r: r["test accuracy"])
        ties = [r for r in finished if abs(r["test accuracy"] - best["test accuracy"]) < 0.005]
        lead += (
            f"; {best['run']} reached the best test accuracy ({percent(best['test accuracy'])})"
            if len(ties) == 1
            else "; "
            + " and ".join(r["run"] for r in ties)
            + f" tied on test accuracy ({percent(best['test accuracy'])})"
        )
    lead += "."
    for r in finished:  # a run that learned nothing is said to have, not ranked silently
        if r["note"] == "at chance":
            text += (
                f" {r['run']} ended "
                + chance_words(r["test accuracy"], {"chance_accuracy": r.get("_chance")})
                + "."
            )
    for r in short:
        why = {"time cap": "hit its time cap", "diverged": "diverged"}.get(
            r["note"], "was stopped" if r["status"] == "cancelled" else f"ended {r['status']}"
        )
        text += (
            f" {r['run']} {why} before its epochs were done, so its accuracy is not "
            "compared with the others (raise the cap, or fewer epochs)."
        )
    return join(
        lead,
        text
        + (
            " The full batch makes one update per epoch, batch 1 one per "
            "sample and pays the fixed per-step cost each time: compare the "
            "curves against weight updates and against seconds to see both "
            "effects."
        ),
    )


def over_budget(runs: Sequence[tuple[str, JobSnapshot]], budget: int) -> list[tuple[str, int]]:
    """(label, measured peak bytes) of every finished run whose peak exceeds budget."""
    over = []
    for label, snap in runs:
        peak = snap.summary.get("peak_memory_bytes")
        if peak and peak > budget:
            over.append((label, peak))
    return over


# ----- learning-rate scaling -----
def lr_variants(
    base: RunConfig, ref_batch: int, ref_lr: float, k: int, warmup_epochs: int = 1
) -> list[tuple[str, RunConfig]]:
    """(label, config) of the reference run and four ways to train at batch ref_batch x k; the
    last ramps the linear rule's lr up over `warmup_epochs` epochs of the large batch."""
    big = ref_batch * k
    warmup = warmup_epochs * max(1, math.ceil(base.validated()[0].train_samples / big))
    variants = [
        ("reference", ref_batch, ref_lr, 0),
        ("lr unchanged", big, ref_lr, 0),
        ("linear rule (lr × k)", big, ref_lr * k, 0),
        ("square-root rule (lr × √k)", big, ref_lr * math.sqrt(k), 0),
        ("linear + warm-up", big, ref_lr * k, warmup),
    ]
    return [
        (
            f"{name}: batch {b}, lr {setting(lr, 3)}",
            dataclasses.replace(base, batch_size=b, lr=lr, warmup_steps=w),
        )
        for name, b, lr, w in variants
    ]


def points(a: float, b: float) -> float:
    """Accuracy a against b in percentage points, as the page writes it (one decimal): every
    word about the difference is chosen from this rounded value, so the words and the number
    shown never disagree."""
    return round((a - b) * 100, 1) + 0.0  # + 0.0: no signed zero


def against_reference(name: str, acc: float, ref: float) -> str:
    """How a run's test accuracy stands to the reference's: ahead by more than a point, within
    one (either way, its sign shown), or short by more than one."""
    d = points(acc, ref)
    if d > 1:
        return f"{name} beat the reference by {fixed(d)} points ({percent(acc)})"
    if d >= -1:
        return f"{name} came within a point of the reference ({signed(d)} points)"
    return f"{name} fell {fixed(-d)} points short of the reference ({percent(acc)})"


def lr_verdict(rows: Sequence[dict[str, Any]]) -> str | None:
    """What the lr comparison (lr_variants' runs, as comparison_table rows, in that order)
    shows against the reference; None until all have ended."""
    if len(rows) != 5 or any(r["status"] in ("queued", "running") for r in rows):
        return None
    ref, same, linear, sqrt_rule, warm = rows

    def acc(r: dict[str, Any]) -> str:
        if r["status"] == "diverged":
            return "diverged"
        if r["test accuracy"] is None:
            return f"no result ({r['status']})"
        return f"{percent(r['test accuracy'])}" + (
            " (at chance)"
            if r["note"] == "at chance"
            else " at its time cap"
            if r["note"] == "time cap"
            else ""
        )

    k = same["batch"] / ref["batch"]
    lead = (
        f"At {setting(k)}× the batch, the same lr reached {acc(same)} and the linear rule "
        f"{acc(linear)}, against the reference's {acc(ref)}."
    )
    text = (
        f"The reference reached {acc(ref)}. With the batch {setting(k)}× larger and the same lr: "
        f"{acc(same)}; the linear rule: {acc(linear)}; the square-root rule: "
        f"{acc(sqrt_rule)}; the linear rule after a warm-up: {acc(warm)}."
    )
    if ref["test accuracy"] is not None:
        ruled = [
            (name, r["test accuracy"])
            for name, r in (("the linear rule", linear), ("the square-root rule", sqrt_rule))
            if r["test accuracy"] is not None and r["status"] == "completed"
        ]
        words = [against_reference(name, acc, ref["test accuracy"]) for name, acc in ruled]
        text += (
            " " + "; ".join(words)[:1].upper() + "; ".join(words)[1:] + "."
            if words
            else " Neither rule completed with an accuracy at these epochs."
        )
    return join(lead, text + " " + _warmup_words(linear, warm) + _root_words(linear, sqrt_rule, warm))


def _root_words(linear: dict[str, Any], root: dict[str, Any], warm: dict[str, Any]) -> str:
    """Where the square-root rule, with no warm-up at all, ended ahead of both linear runs: say
    so — here the smaller lr was simply the better choice."""
    accs = [r["test accuracy"] if r["status"] == "completed" else None for r in (linear, root, warm)]
    if accs[1] is None:
        return ""
    others = [a if a is not None else 0.0 for a in (accs[0], accs[2])]
    if accs[1] >= max(others) + 0.01:
        return (
            f" The square-root rule, with no warm-up, ended ahead of both ({percent(accs[1])}): "
            "at this batch its smaller learning rate was simply the better choice."
        )
    return ""


SPIKE = 5.0  # a step loss this many times the first one is a spike (divergence is far above)


def _warmup_words(linear: dict[str, Any], warm: dict[str, Any]) -> str:
    """What the warm-up changed: a blow-up or an early spike it prevented, or nothing to prevent."""
    if linear["status"] == "diverged":
        return (
            "Without warm-up the large learning rate blew up; the warm-up prevented it."
            if warm["status"] != "diverged"
            else "The linear rule's learning rate blew up with and without warm-up: it is too "
            "large for this model even after a ramp."
        )
    first, peak, w_peak = linear.get("first loss"), linear.get("peak loss"), warm.get("peak loss")
    delta = (
        None
        if linear["test accuracy"] is None or warm["test accuracy"] is None
        else points(warm["test accuracy"], linear["test accuracy"])
    )
    ended = (
        ""
        if delta is None
        else ", and it ended level in test accuracy"
        if delta == 0
        else f", and it ended {fixed(abs(delta))} points of test accuracy "
        + ("ahead" if delta > 0 else "behind")
    )
    if first and peak and w_peak and peak >= SPIKE * first:
        if w_peak < peak:
            jump = (
                f"Without warm-up the training loss jumped to {sig(peak)}, {peak / first:.0f}× "
                f"its first step's; the warm-up "
            )
            if w_peak < SPIKE * first:
                return (
                    jump + f"held its peak to {sig(w_peak)} ({fixed(w_peak / first, 1)}×){ended}. "
                    "That jump is what warm-up prevents."
                )
            # lowered, but still a spike by the page's own mark: say so, not "prevented"
            return (
                jump + f"cut its peak to {sig(w_peak)} ({fixed(w_peak / first, 1)}×){ended}: still "
                f"a spike by this page's {setting(SPIKE)}× mark, but {peak / w_peak:.0f}× smaller."
            )
        return (
            f"Both the linear rule and its warm-up spiked (peak losses {sig(peak)} and "
            f"{sig(w_peak)}): the ramp was too short to help here."
        )
    return (
        "Without warm-up nothing blew up or spiked here, so warm-up had nothing to prevent"
        + (f" (it changed accuracy by {signed(delta)} points)" if delta is not None else "")
        + ": a larger k, and with it a larger learning rate, is where warm-up matters "
        f"(the *Warm-up* preset: Adam, k = {WARMUP_PRESET['k']}, "
        f"{WARMUP_PRESET['warmup']} epochs of warm-up)."
    )


# The lr page's starting points; bench/lessons_bench.py checks each one's claim over seeds.
LR_PRESETS = {
    # momentum SGD as Goyal et al. (2017) trained: the linear rule within 2 points of the
    # reference in 20 of 20 seeds (plain SGD at lr 0.05: 16 of 20; bench/lr_presets.py)
    "Linear rule (momentum SGD, k = 8)": {
        "optimizer": "momentum",
        "ref_batch": 16,
        "ref_lr": 0.01,
        "k": 8,
        "epochs": 10,
        "warmup": 1,
    },
    # 5 epochs of warm-up are 15 steps at batch 512 (one epoch, 3 steps, was too short to hold
    # Adam's first steps down); bench/lr_presets.py chose it over seeds 0-19
    "Warm-up (Adam, k = 32)": {
        "optimizer": "adam",
        "ref_batch": 16,
        "ref_lr": 0.002,
        "k": 32,
        "epochs": 20,
        "warmup": 5,
    },
}
WARMUP_PRESET = LR_PRESETS["Warm-up (Adam, k = 32)"]  # the one the texts send students to

__all__ = [
    "GRID_BATCHES",
    "GRID_LRS",
    "LR_PRESETS",
    "SPIKE",
    "WARMUP_PRESET",
    "against_reference",
    "best_lr_per_batch",
    "best_lr_verdict",
    "grid_cells",
    "lr_grid",
    "lr_variants",
    "lr_verdict",
    "over_budget",
    "points",
    "regime_configs",
    "regime_label",
    "regimes_verdict",
    "rule_predictions",
]
