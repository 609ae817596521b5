"""The batch size x learning rate grid as a heat map, the best lr per batch starred."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from bsdemo.charts.style import Chart, layout
from bsdemo.recipes import best_lr_per_batch

MISSING = {"diverged": "diverged", "oom": "out of memory", "cancelled": "stopped",
           "failed": "failed", "queued": "waiting", "running": "training"}


def _cell_text(cell: dict[str, Any] | None) -> str:
    """What a cell says: its accuracy, or why it has none (a cell never run says so too)."""
    if cell is None:
        return "not run"
    if cell.get("diverged"):
        return "diverged"
    if cell.get("accuracy") is not None:
        return f"{cell['accuracy']:.0%}"
    if cell.get("time_capped"):
        return "time cap"
    return MISSING.get(cell.get("status", ""), "no result")


def lr_grid_chart(cells: Sequence[dict[str, Any]]) -> Chart:
    """Heat map of final test accuracy over batch size x learning rate, both categorical (each
    a row or column of equal size); cells without an accuracy say why; best lr per batch ★."""
    batches = sorted({c["batch"] for c in cells})
    lrs = sorted({c["lr"] for c in cells})
    grid = {(c["batch"], c["lr"]): c for c in cells}
    z = [[(grid.get((b, lr)) or {}).get("accuracy") for lr in lrs] for b in batches]
    text = [[_cell_text(grid.get((b, lr))) for lr in lrs] for b in batches]
    fig = go.Figure(go.Heatmap(z=z, x=[f"{lr:g}" for lr in lrs], y=[str(b) for b in batches],
                               colorscale="Viridis", zmin=0, zmax=1, text=text,
                               texttemplate="%{text}", textfont=dict(size=13),
                               hoverongaps=False, colorbar=dict(title="test acc.")))
    best = best_lr_per_batch(cells)
    fig.add_trace(go.Scatter(x=[f"{best[b]:g}" for b in batches if b in best],
                             y=[str(b) for b in batches if b in best], mode="markers",
                             name="best lr for the batch", marker=dict(
                                 symbol="star", size=18, color="#FFFFFF",
                                 line=dict(color="#000000", width=1))))
    layout(fig, "Final test accuracy: batch size × learning rate", "Learning rate",
           "Batch size", subtitle="★ best learning rate of each batch · grey cells: no result")
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category")
    fig.update_layout(hovermode="closest", plot_bgcolor="#DDDDDD")
    alt = "Heat map of final test accuracy. Best learning rate per batch size: " + "; ".join(
        f"batch {b}: {best[b]:g}" for b in batches if b in best) + "."
    return Chart(fig, alt, [dict(c) for c in cells])
