"""SGD paths over a two-parameter loss surface (bsdemo.toy): contours and one path per batch."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from bsdemo.charts.style import Chart, batch_colour, layout
from bsdemo.units import setting


def paths_chart(result: dict) -> Chart:
    fig = go.Figure(
        go.Contour(
            x=result["w"],
            y=result["b"],
            z=np.log10(result["loss"]),
            showscale=False,
            colorscale="Greys",
            reversescale=True,
            ncontours=18,
            opacity=0.55,
            contours=dict(coloring="lines"),
            hoverinfo="skip",
            name="loss (log contours)",
        )
    )
    rows = []
    for batch, path in result["paths"].items():
        label = "full batch" if batch >= result["n"] else f"batch {batch}"
        length = float(np.abs(np.diff(path, axis=0)).sum())
        fig.add_trace(
            go.Scatter(
                x=path[:, 0],
                y=path[:, 1],
                mode="lines",
                name=label,
                line=dict(color=batch_colour(batch), width=2),
            )
        )
        rows.append(
            {
                "path": label,
                "final w": round(float(path[-1, 0]), 3),
                "final b": round(float(path[-1, 1]), 3),
                "final loss": round(result["final_loss"][batch], 4),
                "distance walked": round(length, 2),
            }
        )
    start = next(iter(result["paths"].values()))[0]
    fig.add_trace(
        go.Scatter(
            x=[start[0]],
            y=[start[1]],
            mode="markers+text",
            text=["start"],
            textposition="top left",
            name="start",
            marker=dict(size=11, color="#111111", symbol="circle-open"),
        )
    )
    w, b = result["optimum"]
    fig.add_trace(
        go.Scatter(
            x=[w],
            y=[b],
            mode="markers+text",
            text=["minimum"],
            textposition="bottom right",
            name="minimum",
            marker=dict(size=12, color="#111111", symbol="star"),
        )
    )
    layout(
        fig,
        "SGD paths on the whole loss surface",
        "w (slope)",
        "b (intercept)",
        subtitle=f"{result['steps']} steps at lr {setting(result['lr'])} from one start; contours: log loss",
    )
    fig.update_layout(hovermode="closest", height=460)
    ordered = sorted(rows, key=lambda r: r["distance walked"])
    alt = (
        f"Paths of {', '.join(r['path'] for r in rows)} over the loss surface of a "
        f"two-parameter problem. The {ordered[-1]['path']} path wanders furthest "
        f"({ordered[-1]['distance walked']}), the {ordered[0]['path']} path least "
        f"({ordered[0]['distance walked']})."
    )
    return Chart(fig, alt, rows)
