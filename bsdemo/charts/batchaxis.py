"""What every chart against batch size draws on: the log2 batch axis, a labelled line across
it, and a sweep's points that ran and those that ran out of memory."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from bsdemo.charts.style import OOM_COLOUR


def _log2_axis(fig: go.Figure, sizes: Sequence[int]) -> None:
    ticks = sorted(set(sizes)) or [1]
    fig.update_xaxes(
        type="log", tickvals=ticks, ticktext=[str(t) for t in ticks], title="Batch size (log2 scale)"
    )


def _vline(
    fig: go.Figure, x: float, text: str, colour: str, side: str = "left", inside: bool = False
) -> None:
    """A vertical marker on a log x-axis: the line takes data units, an annotation log10 units
    (plotly's add_vline(annotation_text=...) mixes the two up on log axes). side: where the text
    starts from the line ("left": it runs to the right of it); inside: the text hangs inside the
    plot's top edge (clear of a subtitle above it)."""
    fig.add_vline(x=x, line=dict(color=colour, dash="dot"))
    fig.add_annotation(
        x=math.log10(x),
        y=1,
        yref="paper",
        text=text,
        showarrow=False,
        xanchor=side,
        yanchor="top" if inside else "bottom",
        font=dict(size=11, color=colour),
    )


def _ok(points: Sequence[dict]) -> list[dict]:
    return [p for p in points if p["status"] == "ok"]


def _oom_marks(fig: go.Figure, points: Sequence[dict], y: float) -> None:
    ooms = [p for p in points if p["status"] == "oom"]
    if ooms:
        fig.add_trace(
            go.Scatter(
                x=[p["batch_size"] for p in ooms],
                y=[y] * len(ooms),
                mode="markers+text",
                name="out of memory" + (" (simulated)" if any(p["simulated"] for p in ooms) else ""),
                marker=dict(color=OOM_COLOUR, size=14, symbol="x"),
                text=["OOM"] * len(ooms),
                textposition="top center",
                hovertext=[p["message"] for p in ooms],
                hoverinfo="text",
            )
        )
