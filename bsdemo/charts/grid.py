"""The batch size x learning rate grid as a heat map, the best lr per batch starred."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from bsdemo.charts.style import Chart, layout
from bsdemo.recipes import best_lr_per_batch, rule_predictions
from bsdemo.units import percent, setting

MISSING = {
    "diverged": "diverged",
    "oom": "out of memory",
    "cancelled": "stopped",
    "failed": "failed",
    "queued": "waiting",
    "running": "training",
}


def _cell_text(cell: dict[str, Any] | None) -> str:
    """What a cell says: its accuracy, or why it has none (a cell never run says so too)."""
    if cell is None:
        return "not run"
    if cell.get("text"):  # a cell that says more than one run's accuracy (a class's sweep)
        return cell["text"]
    if cell.get("diverged"):
        return "diverged"
    if cell.get("accuracy") is not None:  # an accuracy at chance is said so, in the cell
        return percent(cell["accuracy"], 0) + ("<br>chance" if cell.get("at_chance") else "")
    if cell.get("time_capped"):
        return "time cap"
    return MISSING.get(cell.get("status", ""), "no result")


RULE_STYLES = {"linear": ("#E69F00", "dash"), "square root": ("#56B4E9", "dot")}


def _rule_traces(fig: go.Figure, best: dict[int, float], lrs: list[float], batches: list[int]) -> bool:
    """The linear and square-root rules' best lr per batch, from the smallest batch's best, at
    the grid column nearest each (log scale); a prediction past the grid's end sits on its last
    column as ▶ (◀ below the first). Hover gives the exact predicted lr. Whether any was drawn."""
    if len(best) < 2 or len(lrs) < 2:
        return False
    for name, predicted in rule_predictions(best).items():
        colour, dash = RULE_STYLES[name]
        xs, ys, symbols, hover = [], [], [], []
        for b in batches:
            if b not in predicted:
                continue
            lr = predicted[b]
            column = min(lrs, key=lambda g, lr=lr: abs(math.log(g) - math.log(lr)))
            past = lr > max(lrs) * 1.5 or lr < min(lrs) / 1.5
            xs.append(f"{setting(column)}")
            ys.append(str(b))
            # open symbols: the cell's accuracy stays readable through them
            symbols.append(
                ("triangle-right-open" if lr > max(lrs) else "triangle-left-open") if past else "circle-open"
            )
            hover.append(
                f"{name} rule at batch {b}: lr {setting(lr, 3)}" + (" (past the grid)" if past else "")
            )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                name=f"{name.replace(' ', '-')} rule",
                line=dict(color=colour, dash=dash, width=2),
                marker=dict(symbol=symbols, size=22, color=colour, line=dict(color=colour, width=3)),
                hovertext=hover,
                hoverinfo="text",
            )
        )
    return True


def lr_grid_chart(
    cells: Sequence[dict[str, Any]], title: str = "Final test accuracy: batch size × learning rate"
) -> Chart:
    """Heat map of final test accuracy over batch size x learning rate, both categorical (each
    a row or column of equal size); cells without an accuracy say why; best lr per batch ★."""
    batches = sorted({c["batch"] for c in cells})
    lrs = sorted({c["lr"] for c in cells})
    grid = {(c["batch"], c["lr"]): c for c in cells}
    z = [[(grid.get((b, lr)) or {}).get("accuracy") for lr in lrs] for b in batches]
    best = best_lr_per_batch(cells)
    # the best lr's star in its cell's text, beside the number: a marker on it hid the number
    text = [
        [("★ " if best.get(b) == lr else "") + _cell_text(grid.get((b, lr))) for lr in lrs] for b in batches
    ]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[f"{setting(lr)}" for lr in lrs],
            y=[str(b) for b in batches],
            colorscale="Viridis",
            zmin=0,
            zmax=1,
            text=text,
            texttemplate="%{text}",
            textfont=dict(size=13),
            hoverongaps=False,
            colorbar=dict(title="test acc."),
        )
    )
    drawn = _rule_traces(fig, best, lrs, batches)
    layout(
        fig,
        title,
        "Learning rate",
        "Batch size",
        subtitle="★ best learning rate of each batch · grey cells: no result"
        + (
            " · the rules' predictions from the smallest batch's best (nearest column; ▶ past the grid)"
            if drawn
            else ""
        ),
    )
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category")
    fig.update_layout(hovermode="closest", plot_bgcolor="#DDDDDD")
    alt = (
        "Heat map of final test accuracy. Best learning rate per batch size: "
        + "; ".join(f"batch {b}: {setting(best[b])}" for b in batches if b in best)
        + "."
    )
    if drawn:
        alt += (
            " Predicted from the smallest batch's best: "
            + "; ".join(
                f"{name} rule " + ", ".join(f"batch {b}: {setting(lr, 3)}" for b, lr in sorted(p.items()))
                for name, p in rule_predictions(best).items()
            )
            + "."
        )
    return Chart(fig, alt, [dict(c) for c in cells])
