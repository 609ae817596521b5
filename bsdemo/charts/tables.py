"""Runs as table rows: a session's runs with their settings and measured summary, and a
comparison's labelled runs with what they are judged by."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bsdemo.charts.style import effective_batch
from bsdemo.runs import JobSnapshot
from bsdemo.units import MIB


def runs_table(runs: Sequence[JobSnapshot]) -> list[dict[str, Any]]:
    """One row per run: its settings and the measured summary (blank until measured)."""
    rows = []
    for snap in runs:
        cfg, summary = snap.config, (snap.end or {}).get("summary", {})
        latest = snap.latest or {}
        peak = summary.get("peak_memory_bytes")
        rows.append({
            "run": snap.id, "status": snap.status, "dataset": cfg["dataset"], "model": cfg["model"],
            "batch": cfg["batch_size"], "accum": cfg["accumulation_steps"],
            "effective batch": effective_batch(snap), "lr": cfg["lr"], "optimizer": cfg["optimizer"],
            "steps": summary.get("steps", latest.get("step")),
            "samples/s (median)": summary.get("samples_per_sec"),
            "peak memory (MiB)": peak / MIB if peak else None,
            "test accuracy": summary.get("test_accuracy"),
            "device": summary.get("device"), "shared device": snap.shared_device})
    return rows


def comparison_table(runs: Sequence[tuple[str, JobSnapshot]]) -> list[dict[str, Any]]:
    """One row per labelled run: what a regime or lr comparison is judged by."""
    rows = []
    for label, snap in runs:
        s = (snap.end or {}).get("summary", {})
        peak = s.get("peak_memory_bytes")
        rows.append({"run": label, "batch": snap.config["batch_size"] * snap.config[
            "accumulation_steps"], "lr": snap.config["lr"], "status": snap.status,
            "weight updates": s.get("steps", (snap.latest or {}).get("step")),
            "wall time (s)": s.get("wall_time_s"), "samples/s": s.get("samples_per_sec"),
            "peak memory (MiB)": peak / MIB if peak else None,
            "train accuracy": s.get("final_train_accuracy"), "test accuracy": s.get("test_accuracy"),
            "shared device": snap.shared_device,
            "note": "time cap" if s.get("time_capped") else ("diverged" if snap.status == "diverged"
                                                             else "")})
    return rows
