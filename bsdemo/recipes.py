"""Torch-free recipes for the comparison lessons: which runs a lesson trains, and what their
results say. Pages and the CLI build their runs here, so a page never re-creates one.

    regime_configs       SGD, full batch, mini-batch on one model, data, seed and epoch budget
    lr_variants          a reference batch and lr, the batch times k with the lr kept, x k, x sqrt(k),
                         and x k after a warm-up
    lr_grid              batch size x learning rate, a few epochs each
    best_lr_per_batch    the grid's best learning rate per batch (diverged cells never win)
    over_budget          the runs whose measured peak would not fit a memory budget
    regimes_verdict      what the three regimes' own results show, in words
    throughput_verdict   what a sweep's fit, knee and peak share show, and how far to trust them
    contention           how busy other processes kept the CPU while a sweep measured
    best_lr_verdict      what the grid's best learning rates show, in words
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from bsdemo.config import RunConfig
from bsdemo.runs import JobSnapshot

GRID_BATCHES = (8, 32, 128, 512)
GRID_LRS = (0.01, 0.03, 0.1, 0.3, 1.0)


# ----- the three regimes -----
def regime_configs(cfg: RunConfig, epochs: int, mini_batch: int = 32,
                   time_limit_s: float | None = None,
                   sgd_batch: int = 1) -> list[tuple[str, RunConfig]]:
    """(name, config) of SGD (batch sgd_batch), full batch and mini-batch: the same model, data,
    seed and epoch budget, no accumulation, the mini-batch at most the training set."""
    base = dataclasses.replace(cfg, accumulation_steps=1, epochs=epochs, max_steps=None,
                               time_limit_s=time_limit_s)
    base, _ = base.validated()
    n = base.train_samples
    return [(f"SGD (batch {sgd_batch})", dataclasses.replace(base, batch_size=min(sgd_batch, n))),
            ("full batch", dataclasses.replace(base, batch_size=n)),
            ("mini-batch", dataclasses.replace(base, batch_size=min(mini_batch, n)))]


def regime_label(name: str, cfg: RunConfig) -> str:
    """A regime's name with its batch, as a page labels its curves."""
    return name if name.startswith("SGD") else f"{name} ({cfg.batch_size})"


def regimes_verdict(rows: Sequence[dict[str, Any]]) -> str | None:
    """What the regimes' results (bsdemo.charts.comparison_table rows) show; None until all
    have a test accuracy."""
    if not rows or any(r["test accuracy"] is None for r in rows):
        return None
    most = max(rows, key=lambda r: r["weight updates"] or 0)
    fastest = min(rows, key=lambda r: r["wall time (s)"] or math.inf)
    best = max(rows, key=lambda r: r["test accuracy"])
    return (f"**What your runs show.** {most['run']} made {most['weight updates']:,} weight "
            f"updates; {fastest['run']} finished first ({fastest['wall time (s)']:.2f} s of "
            f"training); {best['run']} reached the best test accuracy "
            f"({best['test accuracy']:.1%}). The full batch makes one update per epoch, batch 1 "
            "one per sample and pays the fixed per-step cost each time; compare the three curves "
            "against weight updates and against seconds to see both effects.")


def over_budget(runs: Sequence[tuple[str, JobSnapshot]], budget: int) -> list[tuple[str, int]]:
    """(label, measured peak bytes) of every finished run whose peak exceeds budget."""
    over = []
    for label, snap in runs:
        peak = ((snap.end or {}).get("summary") or {}).get("peak_memory_bytes")
        if peak and peak > budget:
            over.append((label, peak))
    return over


# ----- learning-rate scaling -----
def lr_variants(base: RunConfig, ref_batch: int, ref_lr: float,
                k: int) -> list[tuple[str, RunConfig]]:
    """(label, config) of the reference run and four ways to train at batch ref_batch x k."""
    big = ref_batch * k
    warmup = max(1, math.ceil(base.validated()[0].train_samples / big))  # one epoch of warm-up
    variants = [("reference", ref_batch, ref_lr, 0), ("lr unchanged", big, ref_lr, 0),
                ("linear rule (lr × k)", big, ref_lr * k, 0),
                ("square-root rule (lr × √k)", big, ref_lr * math.sqrt(k), 0),
                ("linear + warm-up", big, ref_lr * k, warmup)]
    return [(f"{name}: batch {b}, lr {lr:.3g}",
             dataclasses.replace(base, batch_size=b, lr=lr, warmup_steps=w))
            for name, b, lr, w in variants]


def lr_grid(cfg: RunConfig, epochs: int, time_limit_s: float = 10.0,
            batches: Sequence[int] = GRID_BATCHES,
            lrs: Sequence[float] = GRID_LRS) -> list[tuple[str, RunConfig]]:
    """(label, config) of every cell of the batch x learning-rate grid."""
    return [(f"batch {b}, lr {lr:g}", dataclasses.replace(cfg, batch_size=b, lr=lr, epochs=epochs,
                                                          time_limit_s=time_limit_s))
            for b in batches for lr in lrs]


def grid_cells(runs: Sequence[tuple[str, JobSnapshot]]) -> list[dict[str, Any]]:
    """The grid's runs as cells: batch, lr, final test accuracy (completed runs only),
    diverged, status, and whether its time cap ended it."""
    cells = []
    for _, s in runs:
        summary = (s.end or {}).get("summary") or {}
        cells.append({"batch": s.config["batch_size"], "lr": s.config["lr"],
                      "accuracy": summary.get("test_accuracy") if s.status == "completed"
                      else None,
                      "diverged": s.status == "diverged", "status": s.status,
                      "time_capped": bool(summary.get("time_capped"))})
    return cells


def best_lr_per_batch(cells: Sequence[dict[str, Any]]) -> dict[int, float]:
    """batch -> the learning rate with the best test accuracy (diverged cells never win)."""
    best: dict[int, tuple[float, float]] = {}
    for c in cells:
        if c.get("accuracy") is None or c.get("diverged"):
            continue
        if c["batch"] not in best or c["accuracy"] > best[c["batch"]][0]:
            best[c["batch"]] = (c["accuracy"], c["lr"])
    return {b: lr for b, (_, lr) in best.items()}


def best_lr_verdict(best: dict[int, float]) -> str | None:
    """What the grid's best learning rates show; None with fewer than two batches."""
    if len(best) < 2:
        return None
    ordered = [lr for _, lr in sorted(best.items())]
    rising = all(a <= b for a, b in zip(ordered, ordered[1:], strict=False))
    return ("**Best lr per batch:** " + ", ".join(
        f"batch {b} → {lr:g}" for b, lr in sorted(best.items())) + (
        ". In your grid the best learning rate rises with the batch: a larger batch "
        "averages away gradient noise, so it tolerates — and needs — larger steps."
        if rising else ". In your grid the best learning rate does not rise steadily with "
        "the batch: with few epochs and one seed the cells are noisy — try more epochs."))


# ----- throughput -----
CONTENDED = 0.15  # other processes' share of all CPU time above which a sweep says so


def contention(points: Sequence[dict[str, Any]]) -> float | None:
    """The mean share of all CPU time other processes used while the sweep's points ran."""
    shares = [p["others_cpu_share"] for p in points if p.get("others_cpu_share") is not None]
    return sum(shares) / len(shares) if shares else None


def throughput_verdict(end: dict[str, Any], points: Sequence[dict[str, Any]],
                       peak_source: str | None) -> str:
    """What a sweep shows, in words from its own fit, knee and peak share: a fixed overhead
    only when the fit found one, the fit's quality, and the load it was measured under."""
    fit = end["fit"]
    r2 = fit.get("r2_time")
    quality = f" (R² {r2:.2f})" if r2 is not None else ""
    if fit.get("t0_s") is None:
        return "**What your sweep shows.** Too few batch sizes ran to fit a model of step time."
    if fit.get("t0_constrained") or not fit["t0_s"]:
        text = ("**What your sweep shows.** Step time grew in proportion to the batch, about "
                f"**{fit['t1_s_per_sample'] * 1e6:.3g} µs per sample**{quality}: the fit found no "
                "fixed per-step overhead it could measure (a least-squares line put it below "
                "zero, so it was held at zero). At these sizes the work per sample dominates; "
                "try a smaller model or smaller batches to see the overhead.")
    else:
        cross = end.get("crossover_batch_size")
        text = (f"**What your sweep shows.** A step cost about **{fit['t0_s'] * 1e3:.3g} ms** of "
                "fixed overhead (kernel launches, Python, the optimizer) plus "
                f"**{fit['t1_s_per_sample'] * 1e6:.3g} µs per sample** — the model "
                f"t(B) = t0 + t1·B fitted to your points{quality}.")
        if cross:
            text += (f" Below batch {cross:.0f} the overhead dominates, so doubling the batch "
                     "almost doubles samples/s; above it each step grows with the batch.")
    knee = end.get("knee_batch_size")
    if knee:
        text += f" Samples/s come within 10% of your best from batch {knee}."
    if peak_source:
        text += (f" The share of peak FLOP/s (peak: {peak_source}) says how much useful "
                 "arithmetic the device did; NVML's utilisation on a GPU only says a kernel was "
                 "running.")
    busy = contention(points)
    if busy is not None and busy > CONTENDED:
        text += (f" While it measured, other processes kept about {busy:.0%} of the CPU busy: "
                 "these rates are lower and noisier than on an idle machine.")
    return text
