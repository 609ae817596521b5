"""Pure functions from run data to Plotly figures, with alt text and a data-table alternative.

No Streamlit, no torch. Colours follow one rule everywhere: a run is coloured by its effective
batch size on a fixed sequential scale keyed by log2(batch), so "batch 256" looks the same on
every page; categorical series use the Okabe-Ito colour-blind-safe palette.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from bsdemo.jobs import JobSnapshot

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
BATCH_SCALE = "Viridis"
BATCH_LOG2_MAX = 16  # 65536: the largest batch the config allows sits at the scale's end
MIB = 2**20

X_AXES = {  # x-axis choice -> (step-event field, axis title with unit)
    "steps": ("step", "Optimizer steps"),
    "samples": ("samples_seen", "Samples seen"),
    "epochs": ("epoch", "Epochs"),
    "seconds": ("wall_time_s", "Wall-clock time (s)"),
}


@dataclass
class Chart:
    figure: go.Figure
    alt: str  # one or two sentences for screen readers: what is plotted and what it shows
    table: list[dict[str, Any]] = field(default_factory=list)  # the same data as rows


def batch_colour(batch_size: int) -> str:
    """The colour of a batch size: log2 position on a fixed scale (0.9 cap keeps it legible)."""
    t = min(math.log2(max(batch_size, 1)) / BATCH_LOG2_MAX, 1.0) * 0.9
    return sample_colorscale(BATCH_SCALE, [t])[0]


def run_label(snap: JobSnapshot) -> str:
    cfg = snap.config
    b, k = cfg["batch_size"], cfg["accumulation_steps"]
    batch = f"batch {b * k}" + (f" ({b}×{k})" if k > 1 else "")
    return f"#{snap.id} {batch}, lr {cfg['lr']:g}, {cfg['optimizer']}"


def _effective(snap: JobSnapshot) -> int:
    return snap.config["batch_size"] * snap.config["accumulation_steps"]


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str, **axis) -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, height=340,
                      margin=dict(l=60, r=20, t=50, b=50), legend=dict(orientation="h", y=-0.25),
                      hovermode="x unified")
    if axis:
        fig.update_yaxes(**axis)
    return fig


def loss_chart(runs: Sequence[JobSnapshot], x_axis: str = "steps") -> Chart:
    """Training loss per step (thin) and evaluated train/test loss (markers) per run."""
    x_field, x_title = X_AXES[x_axis]
    fig = go.Figure()
    table = []
    for snap in runs:
        colour, label = batch_colour(_effective(snap)), run_label(snap)
        steps, evals = snap.steps, snap.evals
        fig.add_trace(go.Scatter(x=steps[x_field], y=steps["loss"], mode="lines", name=f"{label} · step loss",
                                 line=dict(color=colour, width=1), opacity=0.55, legendgroup=str(snap.id)))
        fig.add_trace(go.Scatter(x=evals[x_field], y=evals["train_loss"], mode="lines+markers",
                                 name=f"{label} · train", line=dict(color=colour, width=2.5),
                                 legendgroup=str(snap.id)))
        fig.add_trace(go.Scatter(x=evals[x_field], y=evals["test_loss"], mode="lines+markers",
                                 name=f"{label} · test", line=dict(color=colour, width=2.5, dash="dash"),
                                 marker=dict(symbol="diamond"), legendgroup=str(snap.id)))
        for i in range(len(evals["step"])):
            table.append({"run": label, x_title: evals[x_field][i],
                          "train loss": evals["train_loss"][i], "test loss": evals["test_loss"][i],
                          "test accuracy": evals["test_accuracy"][i]})
    _layout(fig, "Loss", x_title, "Cross-entropy loss (nats)", rangemode="tozero")
    return Chart(fig, _loss_alt(runs, x_title), table)


def _loss_alt(runs: Sequence[JobSnapshot], x_title: str) -> str:
    if not runs:
        return "Loss chart: no runs yet."
    parts = []
    for snap in runs:
        ev = snap.evals
        if ev["test_loss"]:
            parts.append(f"{run_label(snap)}: test loss {ev['test_loss'][0]:.3g} at the start, "
                         f"{ev['test_loss'][-1]:.3g} latest")
        else:
            parts.append(f"{run_label(snap)}: no evaluation yet")
    return f"Loss against {x_title.lower()}. " + "; ".join(parts) + "."


def _per_step_chart(runs: Sequence[JobSnapshot], x_axis: str, y_field: str, title: str,
                    y_title: str, scale: float = 1.0, unit: str = "") -> Chart:
    x_field, x_title = X_AXES[x_axis]
    fig = go.Figure()
    table, parts = [], []
    for snap in runs:
        xs, ys = snap.steps[x_field], snap.steps[y_field]
        pts = [(x, y / scale) for x, y in zip(xs, ys, strict=True) if y is not None]
        if not pts:
            continue
        label = run_label(snap)
        fig.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines",
                                 name=label, line=dict(color=batch_colour(_effective(snap)))))
        values = sorted(p[1] for p in pts)
        parts.append(f"{label}: median {values[len(values) // 2]:,.3g}{unit}")
        table += [{"run": label, x_title: x, title: y} for x, y in pts]
    _layout(fig, title, x_title, y_title, rangemode="tozero")
    alt = (f"{title} against {x_title.lower()}. " + "; ".join(parts) + ".") if parts else \
        f"{title}: no data for these runs."
    return Chart(fig, alt, table)


def throughput_chart(runs: Sequence[JobSnapshot], x_axis: str = "steps") -> Chart:
    return _per_step_chart(runs, x_axis, "samples_per_sec", "Throughput",
                           "Samples per second (measured)", unit=" samples/s")


def memory_chart(runs: Sequence[JobSnapshot], x_axis: str = "steps") -> Chart:
    sources = {(s.start or {}).get("memory_source", "") for s in runs} - {""}
    source = ", ".join(sorted(sources)) or "measured"
    y_title = f"Peak memory in step (MiB, {source})"
    chart = _per_step_chart(runs, x_axis, "peak_memory_bytes", "Memory", y_title, scale=MIB,
                            unit=" MiB")
    if "accounted" in sources:
        chart.alt += (" On the CPU this is accounted memory: parameters, gradients, optimizer "
                      "state and saved activations, counted exactly.")
    return chart


def utilization_chart(runs: Sequence[JobSnapshot], x_axis: str = "steps") -> Chart:
    chart = _per_step_chart(runs, x_axis, "utilization_pct", "GPU utilisation (NVML)",
                            "Time a kernel ran (%)", unit="%")
    chart.figure.update_yaxes(range=[0, 100])
    return chart


def has_utilization(runs: Sequence[JobSnapshot]) -> bool:
    return any(v is not None for s in runs for v in s.steps["utilization_pct"])


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
            "effective batch": _effective(snap), "lr": cfg["lr"], "optimizer": cfg["optimizer"],
            "steps": summary.get("steps", latest.get("step")),
            "samples/s (median)": summary.get("samples_per_sec"),
            "peak memory (MiB)": peak / MIB if peak else None,
            "test accuracy": summary.get("test_accuracy"),
            "device": summary.get("device"), "shared device": snap.shared_device})
    return rows
