"""Runs as table rows: a session's runs with their settings and measured summary, and a
comparison's labelled runs with what they are judged by."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bsdemo.recipes.chance import at_chance
from bsdemo.runs import JobSnapshot, stable_rate
from bsdemo.units import MIB, fixed, format_bytes


def runs_table(runs: Sequence[JobSnapshot]) -> list[dict[str, Any]]:
    """One row per run: its settings and the measured summary (blank until measured)."""
    rows = []
    gans = any(snap.config.get("model") == "gan" for snap in runs)
    for snap in runs:
        cfg, summary = snap.config, snap.summary
        latest = snap.latest or {}
        peak = summary.get("peak_memory_bytes")
        gan = cfg.get("model") == "gan"  # its accuracy is its discriminator's: not shown here
        rows.append(
            {
                "run": snap.run_number,
                "status": snap.status,
                "workload": f"{cfg['dataset']} · {cfg['model']}",
                "effective batch": snap.effective_batch,
                "micro-batch × accumulation": f"{cfg['batch_size']} × {cfg['accumulation_steps']}"
                if cfg["accumulation_steps"] > 1
                else "",
                "lr": cfg["lr"],
                "optimizer": cfg["optimizer"],
                "steps": summary.get("steps", latest.get("step")),
                # the median of steady steps, by the thread's CPU time where known (runs measured
                # under different loads read alike)
                "samples/s": stable_rate(summary),
                "peak memory (MiB)": peak / MIB if peak else None,
                "test accuracy": None if gan else summary.get("test_accuracy"),
                **({"Fréchet distance": summary.get("frechet_distance")} if gans else {}),
                "shared device": snap.shared_device,
            }
        )
    return rows


def comparison_table(runs: Sequence[tuple[str, JobSnapshot]]) -> list[dict[str, Any]]:
    """One row per labelled run: what a regime or lr comparison is judged by."""
    rows = []
    for label, snap in runs:
        s = snap.summary
        peak = s.get("peak_memory_bytes")
        rows.append(
            {
                "run": label,
                "batch": snap.effective_batch,
                "lr": snap.config["lr"],
                "status": "time cap" if snap.ending == "time_cap" else snap.status,
                "weight updates": s.get("steps", (snap.latest or {}).get("step")),
                "wall time (s)": s.get("wall_time_s"),
                "samples/s": stable_rate(s),
                "peak memory (MiB)": peak / MIB if peak else None,
                "train accuracy": s.get("final_train_accuracy"),
                "test accuracy": s.get("test_accuracy"),
                # a spike that did not reach divergence: warm-up's effect shows here
                "first loss": s.get("first_step_loss"),
                "peak loss": s.get("peak_step_loss"),
                "shared device": snap.shared_device,
                "note": {"time_cap": "time cap", "diverged": "diverged"}.get(snap.ending, "")
                or ("at chance" if at_chance(s.get("test_accuracy"), s) else ""),
                # what chance scores on its test set (a verdict's words; no column of its own)
                "_chance": s.get("chance_accuracy"),
                "_test labels": s.get("test_labels"),
            }
        )
    return rows


SHORT = {  # a column's header as a table shows it, where the full name would not fit 1280 px
    "weight updates": "updates",
    "wall time (s)": "seconds",
    "peak memory (MiB)": "peak MiB",
    "train accuracy (%)": "train acc. %",
    "test accuracy (%)": "test acc. %",
    "effective batch": "eff. batch",
    "micro-batch × accumulation": "micro × accum",
    "Fréchet distance": "Fréchet",
    "throughput knee": "knee",
    "memory per sample": "per sample",
}


def probe_table(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The finder's memory probes, one row each, in the order it ran them."""
    return [
        {
            "probe": p["probe"],
            "batch size": p["batch_size"],
            "status": p["status"],
            "peak memory": format_bytes(p["peak_memory_bytes"]) if p["peak_memory_bytes"] else "–",
            "samples/s": round(p["samples_per_sec"]) if p["samples_per_sec"] else None,
            "why": p["reason"],
        }
        for p in points
    ]


def throughput_table(timed: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The finder's timed sizes: samples/s (median and middle half), rounds and clock."""
    return [
        {
            "batch size": t["batch_size"],
            "samples/s": round(t["samples_per_sec"]),
            "middle half": f"{fixed(t['samples_per_sec_q1'], 0)}–{fixed(t['samples_per_sec_q3'], 0)}",
            "rounds": t["rounds"],
            "timed by": t["clock"],
        }
        for t in timed
    ]


def for_people(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, dict]]:
    """Rows as a person reads them, and per column how to show it: `format` (printf style, or
    "localized" for thousands separators) and a short `label` for the header. Accuracies in
    percent, rates whole, seconds and MiB to two decimals, flags as "yes", and a column that
    says nothing in any row left out."""
    if not rows:
        return [], {}
    names = list(rows[0])
    keep = [
        n
        for n in names
        if any(r.get(n) not in (None, "", False) for r in rows)
        or n in ("run", "status")
        or (n == "test accuracy" and "Fréchet distance" not in names)
    ]
    shown: list[dict[str, Any]] = [{} for _ in rows]
    columns: dict[str, dict] = {}
    for name in keep:
        label, scale, digits, fmt = name, 1.0, None, None
        if "accuracy" in name:
            label, scale, digits, fmt = f"{name} (%)", 100.0, 1, "%.1f"
        elif name.startswith("samples/s") or name in ("steps", "weight updates"):
            digits, fmt = 0, "localized"
        elif "(MiB)" in name or "(s)" in name or name.endswith("loss") or name.startswith("Fréchet"):
            digits, fmt = 2, "%.2f"
        for out, row in zip(shown, rows, strict=True):
            value = row.get(name)
            if isinstance(value, bool):
                value = "yes" if value else ""
            elif isinstance(value, float) and digits is not None:
                value = round(value * scale, digits)
                value = int(value) if digits == 0 else value
            out[label] = value
        columns[label] = {"format": fmt, "label": SHORT.get(label, label)}
    return shown, columns
