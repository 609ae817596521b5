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

# plotly looks numpy and pandas up in sys.modules without importing them: script threads of a
# cold server racing their first import would find them half-initialised (AttributeError, and
# plotly then marks them missing for good). Loaded here, once, before any thread draws.
import numpy  # noqa: F401
import pandas  # noqa: F401
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from bsdemo.recipes import best_lr_per_batch
from bsdemo.runs import JobSnapshot
from bsdemo.units import MIB

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
BATCH_SCALE = "Viridis"
BATCH_LOG2_MAX = 16  # 65536: the largest batch the config allows sits at the scale's end

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


# ----- sweeps: quantities against batch size (log2 axis) -----
OOM_COLOUR = "#D55E00"  # Okabe-Ito vermillion: the out-of-memory marker everywhere
BREAKDOWN = (("parameters", "Parameters"), ("gradients", "Gradients"),
             ("optimizer_state", "Optimizer state"), ("activations", "Saved activations"),
             ("workspace", "Workspace / temporaries"),
             ("allocator_cache", "Allocator cache (reserved − allocated)"))


def _log2_axis(fig: go.Figure, sizes: Sequence[int]) -> None:
    ticks = sorted(set(sizes)) or [1]
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[str(t) for t in ticks],
                     title="Batch size (log2 scale)")


def _vline(fig: go.Figure, x: float, text: str, colour: str) -> None:
    """A vertical marker on a log x-axis: the line takes data units, an annotation log10 units
    (plotly's add_vline(annotation_text=...) mixes the two up on log axes)."""
    fig.add_vline(x=x, line=dict(color=colour, dash="dot"))
    fig.add_annotation(x=math.log10(x), y=1, yref="paper", text=text, showarrow=False,
                       xanchor="left", yanchor="bottom", font=dict(size=11, color=colour))


def _ok(points: Sequence[dict]) -> list[dict]:
    return [p for p in points if p["status"] == "ok"]


def _oom_marks(fig: go.Figure, points: Sequence[dict], y: float) -> None:
    ooms = [p for p in points if p["status"] == "oom"]
    if ooms:
        fig.add_trace(go.Scatter(
            x=[p["batch_size"] for p in ooms], y=[y] * len(ooms), mode="markers+text",
            name="out of memory" + (" (simulated)" if any(p["simulated"] for p in ooms) else ""),
            marker=dict(color=OOM_COLOUR, size=14, symbol="x"), text=["OOM"] * len(ooms),
            textposition="top center", hovertext=[p["message"] for p in ooms],
            hoverinfo="text"))


def sweep_throughput_chart(points: Sequence[dict]) -> Chart:
    ok = _ok(points)
    fig = go.Figure(go.Scatter(
        x=[p["batch_size"] for p in ok], y=[p["samples_per_sec"] for p in ok], mode="lines+markers",
        name="measured", line=dict(color=OKABE_ITO[0]),
        marker=dict(size=10, color=[batch_colour(p["batch_size"]) for p in ok])))
    _oom_marks(fig, points, 0)
    _layout(fig, "Throughput against batch size", "Batch size (log2 scale)",
            "Samples per second (measured)", rangemode="tozero")
    _log2_axis(fig, [p["batch_size"] for p in points])
    best = max(ok, key=lambda p: p["samples_per_sec"]) if ok else None
    alt = (f"Samples per second rise from {ok[0]['samples_per_sec']:,.0f} at batch "
           f"{ok[0]['batch_size']} to a best of {best['samples_per_sec']:,.0f} at batch "
           f"{best['batch_size']}." if ok else "No measured points yet.")
    return Chart(fig, alt, [{"batch size": p["batch_size"], "status": p["status"],
                             "samples/s": p["samples_per_sec"]} for p in points])


def sweep_step_time_chart(points: Sequence[dict], fit: dict | None,
                          crossover: float | None) -> Chart:
    ok = _ok(points)
    sizes = [p["batch_size"] for p in ok]
    fig = go.Figure(go.Scatter(x=sizes, y=[p["step_time_s"] * 1e3 for p in ok],
                               mode="markers", name="measured (median step)",
                               marker=dict(size=10, color=OKABE_ITO[0])))
    alt = "Step time against batch size."
    if fit and fit.get("t0_s") is not None and sizes:
        xs = sorted(set([min(sizes), max(sizes)] + sizes))
        fig.add_trace(go.Scatter(
            x=xs, y=[(fit["t0_s"] + fit["t1_s_per_sample"] * b) * 1e3 for b in xs], mode="lines",
            name=f"fit t(B) = {fit['t0_s'] * 1e3:.3g} ms + {fit['t1_s_per_sample'] * 1e6:.3g} µs·B "
                 "(predicted)", line=dict(color=OKABE_ITO[1], dash="dash")))
        fig.add_hline(y=fit["t0_s"] * 1e3, line=dict(color=OKABE_ITO[2], dash="dot"),
                      annotation_text="fixed overhead t0")
        alt = (f"Step time is about {fit['t0_s'] * 1e3:.3g} ms of fixed overhead plus "
               f"{fit['t1_s_per_sample'] * 1e6:.3g} µs per sample (R² {fit['r2_time']:.2f}).")
        if crossover:
            _vline(fig, crossover, f"overhead = compute at B ≈ {crossover:.0f}", OKABE_ITO[4])
            alt += f" The two are equal at batch {crossover:.0f}."
    _layout(fig, "Step time: fixed overhead + per-sample work", "Batch size (log2 scale)",
            "Time per optimizer step (ms)", rangemode="tozero")
    _log2_axis(fig, [p["batch_size"] for p in points])
    return Chart(fig, alt, [{"batch size": p["batch_size"], "step time (ms)": p["step_time_s"] * 1e3}
                            for p in ok])


def sweep_epoch_time_chart(points: Sequence[dict], train_samples: int) -> Chart:
    ok = _ok(points)
    rows = [{"batch size": p["batch_size"],
             "epoch time (s)": math.ceil(train_samples / p["batch_size"]) * p["step_time_s"]}
            for p in ok]
    fig = go.Figure(go.Scatter(x=[r["batch size"] for r in rows], y=[r["epoch time (s)"] for r in rows],
                               mode="lines+markers", name="ceil(N/B) × step time",
                               line=dict(color=OKABE_ITO[0])))
    _layout(fig, "Time per epoch", "Batch size (log2 scale)",
            "Seconds per epoch (from measured step times)", rangemode="tozero")
    _log2_axis(fig, [p["batch_size"] for p in points])
    fig.update_yaxes(type="log", dtick=1, title="Seconds per epoch (log scale, from measured steps)")
    alt = (f"Time per epoch falls from {rows[0]['epoch time (s)']:.3g} s at batch "
           f"{rows[0]['batch size']} to {rows[-1]['epoch time (s)']:.3g} s at batch "
           f"{rows[-1]['batch size']}." if rows else "No measured points yet.")
    return Chart(fig, alt, rows)


def sweep_utilisation_chart(points: Sequence[dict]) -> Chart:
    ok = _ok(points)
    fig = go.Figure(go.Scatter(
        x=[p["batch_size"] for p in ok], y=[(p["share_of_peak"] or 0) * 100 for p in ok],
        mode="lines+markers", name="achieved FLOP/s, % of peak", line=dict(color=OKABE_ITO[2])))
    if any(p["utilization_pct"] is not None for p in ok):
        fig.add_trace(go.Scatter(
            x=[p["batch_size"] for p in ok], y=[p["utilization_pct"] for p in ok],
            mode="lines+markers", name="NVML utilisation (% of time a kernel ran)",
            line=dict(color=OKABE_ITO[3], dash="dash")))
    _layout(fig, "Utilisation: busy time vs useful work", "Batch size (log2 scale)", "Percent")
    _log2_axis(fig, [p["batch_size"] for p in points])
    alt = (f"Achieved FLOP/s rise from {(ok[0]['share_of_peak'] or 0):.1%} of peak at batch "
           f"{ok[0]['batch_size']} to {(ok[-1]['share_of_peak'] or 0):.1%} at batch "
           f"{ok[-1]['batch_size']}." if ok else "No measured points yet.")
    return Chart(fig, alt, [{"batch size": p["batch_size"], "% of peak FLOP/s":
                             (p["share_of_peak"] or 0) * 100, "NVML %": p["utilization_pct"]}
                            for p in ok])


def memory_breakdown_chart(points: Sequence[dict], fit: dict | None, budget: int | None,
                           predicted_max: int | None) -> Chart:
    """Stacked memory components per measured batch, the M(B) fit, the budget and OOM points."""
    ok = [p for p in _ok(points) if p["memory_breakdown"]]
    sizes = [p["batch_size"] for p in ok]
    fig = go.Figure()
    for i, (key, label) in enumerate(BREAKDOWN):  # stacked areas: bars do not suit a log axis
        fig.add_trace(go.Scatter(x=sizes, y=[(p["memory_breakdown"].get(key) or 0) / MIB for p in ok],
                                 name=label, mode="lines+markers", stackgroup="memory",
                                 line=dict(color=OKABE_ITO[i], width=1)))
    top = max([p["peak_memory_bytes"] or 0 for p in ok] + [budget or 0]) / MIB
    alt = "Memory by component against batch size."
    if fit and fit.get("m0_bytes") is not None:
        xs = sorted(set(sizes + ([predicted_max] if predicted_max else [])))
        fig.add_trace(go.Scatter(
            x=xs, y=[(fit["m0_bytes"] + fit["m_bytes_per_sample"] * b) / MIB for b in xs],
            mode="lines", name=f"fit M(B) = {fit['m0_bytes'] / MIB:.3g} MiB + "
                               f"{fit['m_bytes_per_sample'] / 1024:.3g} KiB·B (R² "
                               f"{fit['r2_memory']:.3f}, predicted)",
            line=dict(color="#000000", dash="dash")))
        alt = (f"Memory is {fit['m0_bytes'] / MIB:.3g} MiB that does not depend on the batch plus "
               f"{fit['m_bytes_per_sample'] / 1024:.3g} KiB per sample (R² {fit['r2_memory']:.3f}).")
    if budget:
        fig.add_hline(y=budget / MIB, line=dict(color=OOM_COLOUR, dash="dot"),
                      annotation_text=f"budget {budget / MIB:,.4g} MiB",
                      annotation_position="top left")
        alt += f" The budget is {budget / MIB:,.4g} MiB."
    if predicted_max:
        _vline(fig, predicted_max, f"predicted largest batch {predicted_max}", OKABE_ITO[4])
        alt += f" The fit predicts that batch {predicted_max} is the largest that fits."
    _oom_marks(fig, points, top * 1.05 if top else 1)
    ooms = [p["batch_size"] for p in points if p["status"] == "oom"]
    if ooms:
        alt += f" Batch {ooms[0]} ran out of memory."
    _layout(fig, "Memory by component", "Batch size (log2 scale)", "Memory (MiB)")
    _log2_axis(fig, [p["batch_size"] for p in points] + ([predicted_max] if predicted_max else []))
    rows = [{"batch size": p["batch_size"], "status": p["status"],
             **{label: (p["memory_breakdown"] or {}).get(key) for key, label in BREAKDOWN},
             "peak (B)": p["peak_memory_bytes"], "message": p["message"]} for p in points]
    return Chart(fig, alt, rows)


# ----- comparisons -----
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


def labelled_loss_chart(runs: Sequence[tuple[str, JobSnapshot]], x_axis: str) -> Chart:
    """Evaluated loss per run, named by its label; a diverged run ends in a red cross."""
    x_field, x_title = X_AXES[x_axis]
    fig = go.Figure()
    table = []
    for i, (label, snap) in enumerate(runs):
        ev = snap.evals
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        fig.add_trace(go.Scatter(x=ev[x_field], y=ev["train_loss"], mode="lines+markers",
                                 name=f"{label} · train", line=dict(color=colour, width=2.5)))
        fig.add_trace(go.Scatter(x=ev[x_field], y=ev["test_loss"], mode="lines",
                                 name=f"{label} · test", line=dict(color=colour, dash="dash")))
        if snap.status == "diverged" and snap.latest:
            fig.add_trace(go.Scatter(x=[snap.latest[x_field]], y=[ev["train_loss"][-1]
                                                                   if ev["train_loss"] else 0],
                                     mode="markers+text", text=["diverged"],
                                     textposition="top center", name=f"{label} · diverged",
                                     marker=dict(color=OOM_COLOUR, size=14, symbol="x")))
        table += [{"run": label, x_title: x, "train loss": a, "test loss": b}
                  for x, a, b in zip(ev[x_field], ev["train_loss"], ev["test_loss"], strict=True)]
    _layout(fig, f"Loss against {x_title.lower()}", x_title, "Cross-entropy loss (nats)",
            rangemode="tozero")
    finals = [f"{label}: {snap.evals['test_loss'][-1]:.3g}" for label, snap in runs
              if snap.evals["test_loss"]]
    return Chart(fig, f"Evaluated loss against {x_title.lower()}. Latest test loss — "
                 + "; ".join(finals) + "." if finals else "No evaluations yet.", table)


def lr_grid_chart(cells: Sequence[dict[str, Any]]) -> Chart:
    """Heat map of final test accuracy over batch size x learning rate; best lr per batch ★."""
    batches = sorted({c["batch"] for c in cells})
    lrs = sorted({c["lr"] for c in cells})
    grid = {(c["batch"], c["lr"]): c for c in cells}
    z = [[(grid.get((b, lr)) or {}).get("accuracy") for lr in lrs] for b in batches]
    text = [[("diverged" if (grid.get((b, lr)) or {}).get("diverged") else
              f"{v:.0%}" if v is not None else "") for lr, v in zip(lrs, row, strict=True)]
            for b, row in zip(batches, z, strict=True)]
    fig = go.Figure(go.Heatmap(z=z, x=[f"{lr:g}" for lr in lrs], y=[str(b) for b in batches],
                               colorscale="Viridis", zmin=0, zmax=1, text=text,
                               texttemplate="%{text}", colorbar=dict(title="test acc.")))
    best = best_lr_per_batch(cells)
    fig.add_trace(go.Scatter(x=[f"{best[b]:g}" for b in batches if b in best],
                             y=[str(b) for b in batches if b in best], mode="markers",
                             name="best lr for the batch", marker=dict(symbol="star", size=18,
                                                                      color="#FFFFFF",
                                                                      line=dict(color="#000000",
                                                                                width=1))))
    _layout(fig, "Final test accuracy: batch size × learning rate", "Learning rate",
            "Batch size")
    fig.update_layout(hovermode="closest")
    alt = "Heat map of final test accuracy. Best learning rate per batch size: " + "; ".join(
        f"batch {b}: {best[b]:g}" for b in batches if b in best) + "."
    return Chart(fig, alt, [dict(c) for c in cells])

