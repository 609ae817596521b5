"""Torch-free recipes for the comparison lessons: which runs a lesson trains, and what their
results say. Pages and the CLI build their runs here, so a page never re-creates one.

    regime_configs       SGD, full batch, mini-batch on one model, data, seed and epoch budget
    lr_variants          a reference batch and lr, the batch times k with the lr kept, x k, x sqrt(k),
                         and x k after a warm-up
    lr_grid              batch size x learning rate, a few epochs each
    best_lr_per_batch    the grid's best learning rate per batch (diverged cells never win)
    over_budget          the runs whose measured peak would not fit a memory budget
    regimes_verdict      what the three regimes' own results show, in words
    lr_verdict           what the lr comparison's rules did against the reference
    lab_verdict          what the Training Lab's runs show: the newest, and the batch extremes
    accumulation_verdict whether accumulation matched one big batch: gradients, then parameters
    layer_rows           the accumulation check's per-parameter table, named for people
    simulated_device     the finder's default memory budget on a CPU, sized to the model
    memory_verdict       what a memory sweep measured: the fixed part, the per-sample part, the
                         largest batch that ran, the prediction, and how far to trust the line
    throughput_verdict   what a sweep's fit, knee and peak share show, and how far to trust them
    contention           how busy other processes kept the CPU while a sweep measured
    best_lr_verdict      what the grid's best learning rates show, in words
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from bsdemo import footprint
from bsdemo.config import RunConfig
from bsdemo.runs import JobSnapshot
from bsdemo.units import format_bytes

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
    have ended. Runs that did not finish their epochs (a time cap, a stop, divergence) are named,
    and accuracy is ranked only among the runs that did: a cap must not pick the winner."""
    if not rows or any(r["status"] in ("queued", "running") for r in rows):
        return None
    finished = [r for r in rows if r["status"] == "completed" and r["note"] != "time cap"
                and r["test accuracy"] is not None]
    short = [r for r in rows if r not in finished]
    most = max(rows, key=lambda r: r["weight updates"] or 0)
    text = f"**What your runs show.** {most['run']} made {most['weight updates']:,} weight updates"
    timed = [r for r in finished if r["wall time (s)"] is not None]
    if timed:
        fastest = min(timed, key=lambda r: r["wall time (s)"])
        text += (f"; of the runs that finished, {fastest['run']} took the least training time "
                 f"({fastest['wall time (s)']:.2f} s)")
    if len(finished) >= 2:
        best = max(finished, key=lambda r: r["test accuracy"])
        ties = [r for r in finished if abs(r["test accuracy"] - best["test accuracy"]) < 0.005]
        text += (f"; {best['run']} reached the best test accuracy ({best['test accuracy']:.1%})"
                 if len(ties) == 1 else "; " + " and ".join(r["run"] for r in ties)
                 + f" tied for the best test accuracy ({best['test accuracy']:.1%})")
    text += "."
    for r in short:
        why = {"time cap": "hit its time cap", "diverged": "diverged"}.get(
            r["note"], "was stopped" if r["status"] == "cancelled" else f"ended {r['status']}")
        text += (f" {r['run']} {why} before its epochs were done, so its accuracy is not "
                 "compared with the others (raise the cap, or fewer epochs).")
    return text + (" The full batch makes one update per epoch, batch 1 one per sample and "
                   "pays the fixed per-step cost each time: compare the curves against weight "
                   "updates and against seconds to see both effects.")


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
    """What the grid's best learning rates show; None with fewer than two batches. A rise needs
    one: the same best lr for every batch is said as such, not as a rise."""
    if len(best) < 2:
        return None
    ordered = [lr for _, lr in sorted(best.items())]
    pairs = list(zip(ordered, ordered[1:], strict=False))
    listing = "**Best lr per batch:** " + ", ".join(
        f"batch {b} → {lr:g}" for b, lr in sorted(best.items())) + ". "
    if all(a == b for a, b in pairs):
        return listing + ("In your grid every batch has the same best learning rate: the cells "
                          "are too coarse, or too few epochs, to show it move — try more epochs.")
    if all(a <= b for a, b in pairs):
        return listing + ("In your grid the best learning rate rises with the batch: a larger "
                          "batch averages away gradient noise, so it tolerates — and needs — "
                          "larger steps.")
    return listing + ("In your grid the best learning rate does not rise steadily with the "
                      "batch: with few epochs and one seed the cells are noisy — try more epochs.")


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
        return f"{r['test accuracy']:.1%}" + (" at its time cap" if r["note"] == "time cap"
                                              else "")

    k = same["batch"] / ref["batch"]
    text = (f"**What your runs show.** The reference reached {acc(ref)}. With the batch "
            f"{k:g}× larger and the same lr: {acc(same)}; the "
            f"linear rule: {acc(linear)}; the square-root rule: {acc(sqrt_rule)}; the linear "
            f"rule after a warm-up: {acc(warm)}.")
    if ref["test accuracy"] is not None:
        recovered = [name for name, r in (("the linear rule", linear),
                                          ("the square-root rule", sqrt_rule))
                     if r["test accuracy"] is not None and r["status"] == "completed"
                     and r["test accuracy"] >= ref["test accuracy"] - 0.01]
        text += (" " + " and ".join(recovered).capitalize() + " came within a point of the "
                 "reference." if recovered else " No rule came within a point of the reference "
                 "at these epochs.")
    if linear["status"] == "diverged" and warm["status"] != "diverged":
        text += " Without warm-up the large learning rate blew up; the warm-up prevented it."
    elif linear["status"] != "diverged" and linear["test accuracy"] is not None \
            and warm["test accuracy"] is not None:
        delta = (warm["test accuracy"] - linear["test accuracy"]) * 100
        text += (f" Without warm-up nothing blew up here, so warm-up had nothing to prevent "
                 f"(it changed accuracy by {delta:+.1f} points): a larger k, and with it a "
                 "larger learning rate, is where warm-up matters.")
    return text


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
    largest = max((p["batch_size"] for p in points if p.get("status") == "ok"), default=None)
    if knee and knee == largest:
        text += (f" Samples/s were still rising at the largest batch that ran ({largest}): the "
                 "device did not saturate within this sweep.")
    elif knee:
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


# ----- the Training Lab -----
def _summary(snap: JobSnapshot) -> dict[str, Any]:
    return (snap.end or {}).get("summary") or {}


def _effective(snap: JobSnapshot) -> int:
    return snap.config["batch_size"] * snap.config["accumulation_steps"]


def _how_it_ended(snap: JobSnapshot) -> str:
    s = _summary(snap)
    if snap.status == "completed":
        return ""
    if s.get("time_capped"):
        return " It hit its time cap before its budget was done."
    return {"cancelled": " It was stopped before its budget was done.",
            "diverged": " Its loss diverged: the learning rate was too large for it.",
            "oom": " It ran out of memory."}.get(snap.status, f" It {snap.status}.")


def lab_verdict(runs: Sequence[JobSnapshot]) -> str | None:
    """What the session's finished training runs show, from their own numbers: the newest, and
    the smallest against the largest effective batch when they trained alike (same epochs, same
    lr, both completed). None before any run has ended."""
    done = [s for s in runs if s.done and s.kind == "train" and _summary(s).get("steps")]
    if not done:
        return None
    new = done[-1]
    s, b = _summary(new), _effective(new)
    acc = s.get("test_accuracy")
    rate = s.get("samples_per_sec")
    text = (f"**What your runs show.** Run #{new.id} at batch {b} made {s['steps']:,} optimizer "
            f"steps ({s.get('epochs', 0):.3g} epochs) in {s.get('wall_time_s', 0):.2f} s"
            + (f", a median {rate:,.0f} samples/s" if rate else "")
            + (f", and reached {acc:.1%} test accuracy" if acc is not None else "") + "."
            + _how_it_ended(new))
    if new.shared_device:
        text += " Another run shared the device meanwhile, so its speed was shared too."
    alike = [r for r in done if r.status == "completed" and not _summary(r).get("time_capped")
             and r.config["epochs"] == new.config["epochs"] and r.config["lr"] == new.config["lr"]]
    small = min(alike, key=_effective, default=None)
    large = max(alike, key=_effective, default=None)
    if small is None or _effective(small) == _effective(large):
        return text + (" Run it again at another batch size (same epochs and lr) to compare.")
    ss, ls = _summary(small), _summary(large)
    ks, kl = _effective(small), _effective(large)
    text += (f" Batch {kl} made {ls['steps'] / ls['epochs']:.0f} updates per epoch against "
             f"batch {ks}'s {ss['steps'] / ss['epochs']:.0f}")
    if ss.get("samples_per_sec") and ls.get("samples_per_sec"):
        text += (f" and processed {ls['samples_per_sec'] / ss['samples_per_sec']:.1f}× the "
                 "samples per second")
    text += "."
    if ss.get("test_accuracy") is not None and ls.get("test_accuracy") is not None:
        gap = (ss["test_accuracy"] - ls["test_accuracy"]) * 100
        if gap > 2:
            text += (f" After the same epochs and learning rate it reached "
                     f"{ls['test_accuracy']:.1%} against {ss['test_accuracy']:.1%}: fewer "
                     "updates of the same size learn less per epoch — raise the learning rate "
                     "with the batch (Learning-rate scaling) or train longer.")
        elif gap < -2:
            text += (f" It also reached a better test accuracy ({ls['test_accuracy']:.1%} "
                     f"against {ss['test_accuracy']:.1%}): the small batch's noisy updates "
                     "cost it more than the lost updates cost the large one here.")
        else:
            text += (f" Both reached about the same test accuracy ({ls['test_accuracy']:.1%} "
                     f"and {ss['test_accuracy']:.1%}).")
    if ss.get("peak_memory_bytes") and ls.get("peak_memory_bytes"):
        text += (f" Its peak memory was {ls['peak_memory_bytes'] / ss['peak_memory_bytes']:.1f}× "
                 f"as much ({ls.get('memory_source', 'measured')}).")
    return text


# ----- gradient accumulation -----
def accumulation_verdict(r: dict[str, Any]) -> tuple[str, str]:
    """(level "success" | "warning" | "error", text) for an accum_check result: equivalent only
    when the first step's gradients agree and the parameters still agree after every step."""
    head = (f"Relative gradient difference **{r['rel_grad_diff']:.3g}** at the first step; "
            f"largest parameter difference after {r['steps']} steps "
            f"**{r['max_abs_param_diff']:.3g}** — ")
    if not r["equivalent"]:
        return "error", head + "the accumulated gradient is not one big batch's: NOT equivalent."
    if r.get("drift_grew"):
        return "warning", head + (
            "the gradients agree to float32 rounding, but over the steps that rounding grew: "
            "accumulation sums the same numbers in another order, and a model can amplify the "
            "tiny difference (normalisation layers divide by small variances). The same "
            "computation, not the same bits.")
    return "success", head + ("equivalent: what is left is float32 rounding (summing in a "
                              "different order), at the first step and after the last.")


def layer_rows(per_layer: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-parameter gradient differences with names a person reads ("net.1.weight" ->
    "layer 1 weights")."""
    def name(raw: str) -> str:
        parts = raw.split(".")
        kind = {"weight": "weights", "bias": "biases"}.get(parts[-1], parts[-1])
        index = next((p for p in reversed(parts[:-1]) if p.isdigit()), None)
        return f"layer {index} {kind}" if index is not None else f"{'.'.join(parts[:-1])} {kind}"

    return [{"parameter": name(row["layer"]),
             "largest gradient difference": row["max_abs_grad_diff"],
             "gradient norm": row["grad_norm"]} for row in per_layer]


# ----- the finder -----
FINDER_DEVICE_BATCH = 256  # the simulated device holds about this batch of the chosen model


def simulated_device(cfg: RunConfig, margin: float) -> tuple[int, int]:
    """(bytes, batch) of the finder's default device on a CPU, where nothing limits memory (the
    host's gigabytes fit the whole training set of any model here, and "use the full batch" is
    no lesson): what the model's predicted footprint needs at about FINDER_DEVICE_BATCH (at most
    half the training set), with the margin on top."""
    checked = cfg.validated()[0]
    batch = max(1, min(FINDER_DEVICE_BATCH, checked.train_samples // 2))
    need = footprint.predict(dataclasses.replace(checked, batch_size=batch,
                                                 accumulation_steps=1)).peak
    return int(need / (1.0 - margin)), batch


# ----- memory -----
def memory_verdict(end: dict[str, Any], points: Sequence[dict[str, Any]]) -> str | None:
    """What the memory sweep showed, from its fit and points; None without a fit."""
    fit = end.get("fit") or {}
    if fit.get("m0_bytes") is None:
        return None
    ok = [p for p in points if p["status"] == "ok" and p.get("memory_breakdown")]
    fixed = None
    if ok:
        parts = ok[0]["memory_breakdown"]
        fixed = sum(parts.get(k) or 0 for k in ("parameters", "gradients", "optimizer_state"))
    text = (f"**What your sweep shows.** Memory was {format_bytes(fit['m0_bytes'])} that did not "
            f"depend on the batch")
    if fixed:
        text += (f" (parameters, gradients and optimizer state: {format_bytes(fixed)} of it)")
    text += (f", plus {format_bytes(fit['m_bytes_per_sample'])} per sample — the activations "
             "kept for the backward pass. ")
    source = ok[0].get("memory_source") if ok else None
    if source == "accounted":
        text += ("On the CPU this line fits by construction (R² "
                 f"{fit['r2_memory']:.3f}): accounted memory is a sum of per-sample terms, so "
                 "the lesson is in its two numbers, not in how straight it is. ")
    elif fit.get("r2_memory") is not None:
        text += f"The allocator's readings lie on that line with R² {fit['r2_memory']:.3f}. "
    oom = next((p for p in points if p["status"] == "oom"), None)
    largest = end.get("max_batch_size_fits")
    predicted = end.get("predicted_max_batch_size")
    if oom and largest:
        text += (f"Batch {largest} was the largest that ran; batch {oom['batch_size']} ran out "
                 f"of memory" + (" (simulated)" if oom.get("simulated") else "") + ".")
        if predicted:
            text += (f" The line predicts batch {predicted} as the largest that fits: the "
                     "finder verifies such a prediction with a real step.")
    elif largest:
        text += f"Every batch up to {largest} fitted."
    return text
