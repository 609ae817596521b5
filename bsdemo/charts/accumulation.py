"""Gradient accumulation's check as a picture: per parameter tensor, how large its gradient is
and how far the accumulated gradient lies from one big batch's, on one log axis."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from bsdemo.charts.style import OKABE_ITO, OOM_COLOUR, Chart, layout
from bsdemo.recipes.measurements import layer_rows
from bsdemo.units import sig

NORM, DIFFERENCE = OKABE_ITO[0], OKABE_ITO[1]
TINY = 1e-12  # an exact zero's bar (identical gradients) on a log axis


def accumulation_chart(r: dict[str, Any]) -> Chart:
    """Two bars per parameter tensor of the first step: its gradient's norm, and the largest
    difference between the accumulated gradient and one big batch's. Float32 rounding leaves
    the difference about seven powers of ten shorter; a pitfall makes it as long as the norm.
    The difference's bars take the verdict's colour: vermillion when not equivalent."""
    rows = layer_rows(r["per_layer"])
    names = [row["parameter"] for row in rows]
    norms = [max(row["gradient norm"], TINY) for row in rows]
    diffs = [max(row["largest gradient difference"], TINY) for row in rows]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            y=names,
            x=norms,
            orientation="h",
            name="gradient norm (one batch)",
            marker_color=NORM,
            customdata=[sig(v) for v in norms],
            hovertemplate="%{y}: norm %{customdata}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            y=names,
            x=diffs,
            orientation="h",
            name="largest difference, accumulated − one batch",
            marker_color=DIFFERENCE if r["equivalent"] else OOM_COLOUR,
            customdata=[sig(v) for v in diffs],
            hovertemplate="%{y}: largest difference %{customdata}<extra></extra>",
        )
    )
    shape = f"{r['accumulation_steps']} × {r['micro_batch']} against one batch of {r['effective_batch_size']}"
    layout(
        fig,
        "Accumulated gradient against one big batch's, per parameter",
        "Size (log scale)",
        "",
        subtitle=f"{shape}, first step",
    )
    fig.update_xaxes(type="log", exponentformat="power", dtick=1)  # a label on every power of 10
    fig.update_yaxes(autorange="reversed")  # the model's order, top to bottom
    fig.update_layout(
        barmode="group", hovermode="closest", height=130 + 26 * len(names)
    )  # with Run and the takeaway: one 1280x720 screen
    alt = (
        f"{shape}: per parameter tensor, the largest gradient difference ranges "
        f"{sig(min(diffs), 2)}–{sig(max(diffs), 2)} against gradient norms {sig(min(norms), 2)}–"
        f"{sig(max(norms), 2)}."
    )
    return Chart(
        fig,
        alt,
        [
            {
                "parameter": row["parameter"],
                "gradient norm": row["gradient norm"],
                "largest difference": row["largest gradient difference"],
            }
            for row in rows
        ],
    )
