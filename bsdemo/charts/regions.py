"""What the models learned on a 2-D dataset: each compared run's decision regions at its latest
evaluation, side by side, with the same test points on each (the Training Lab).

Pure: run data in, Plotly objects out.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bsdemo.charts.curves import run_label
from bsdemo.charts.style import CHART_PX, OKABE_ITO, Chart, empty, layout
from bsdemo.runs import JobSnapshot

PANEL_TITLE_PX = 24
MOST = 3  # runs side by side: more would shrink each below reading at 1280 px
CLASS_CHARS = "0123456789abcdefghijklmnopqrstuvwxyz"
CLASS_COLOURS = OKABE_ITO[:4] + OKABE_ITO[4:7]  # the points: the series colours, told apart
TINT = 0.72  # the regions: each class's colour this much towards white (the points stay dark)


def latest_regions(snap: JobSnapshot) -> tuple[dict, int] | None:
    """(the run's latest decision regions, the step they are from), or None."""
    found = [(r, s) for r, s in zip(snap.evals.get("regions", []), snap.evals["step"], strict=False) if r]
    return found[-1] if found else None


def _tint(colour: str) -> str:
    r, g, b = (int(colour.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4))
    return "#{:02X}{:02X}{:02X}".format(*(round(c + (255 - c) * TINT) for c in (r, g, b)))


def regions_chart(runs: Sequence[JobSnapshot], most: int = MOST) -> Chart:
    """The newest `most` runs with decision regions, one panel each: the class the model
    predicts over the plane (tinted) and the test points in their true class (dark). The
    Training Lab draws one (the newest run's), beside its loss curve."""
    shown = [(snap, found) for snap in runs if (found := latest_regions(snap))][-most:]
    # always `most` columns (the unused ones blank): each panel about as wide as it is tall,
    # with no aspect lock (a locked panel shrinks away from its legend)
    titles = [
        f"#{snap.run_number} · batch {snap.effective_batch:,} · step {step:,}" for snap, (_, step) in shown
    ]  # short: a panel is a third of the chart
    fig = make_subplots(
        rows=1, cols=most, subplot_titles=titles + [""] * (most - len(titles)), horizontal_spacing=0.04
    )
    classes = sorted(
        {CLASS_CHARS.index(c) for _, (r, _) in shown for c in set(r["classes"])}
        | {p[2] for _, (r, _) in shown for p in r["points"]}
    )
    k = max(classes, default=1) + 1
    colours = [CLASS_COLOURS[c % len(CLASS_COLOURS)] for c in range(k)]
    scale = []  # one flat band a class
    for c, colour in enumerate(colours):
        scale += [[c / k, _tint(colour)], [(c + 1) / k, _tint(colour)]]
    parts = []
    for col, (snap, (regions, step)) in enumerate(shown, start=1):
        size, (x0, x1, y0, y1) = regions["size"], regions["box"]
        cells = [CLASS_CHARS.index(c) for c in regions["classes"]]
        z = [cells[i * size : (i + 1) * size] for i in range(size)]
        xs = [x0 + (x1 - x0) * i / (size - 1) for i in range(size)]
        ys = [y0 + (y1 - y0) * i / (size - 1) for i in range(size)]
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=xs,
                y=ys,
                colorscale=scale,
                zmin=-0.5,
                zmax=k - 0.5,
                showscale=False,
                hovertemplate="predicted class %{z}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        for c in range(k):
            pts = [p for p in regions["points"] if p[2] == c]
            if not pts:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[p[0] for p in pts],
                    y=[p[1] for p in pts],
                    mode="markers",
                    name=f"class {c}",
                    legendgroup=f"class {c}",
                    showlegend=col == 1,
                    marker=dict(size=6, color=colours[c], line=dict(width=0.8, color="#FFFFFF")),
                    hovertemplate=f"class {c}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        wrong = sum(cells[_cell(p, regions)] != p[2] for p in regions["points"])
        parts.append(
            f"{run_label(snap)} at step {step:,}: {wrong} of {len(regions['points'])} "
            "drawn test points on the wrong side"
        )
    layout(
        fig,
        "What the model learned",
        "feature 1 (standardised)",
        "feature 2",
        subtitle="tint: predicted class · dots: test points, true class",
    )
    fig.update_xaxes(showgrid=False, zeroline=False, nticks=5)
    fig.update_yaxes(showgrid=False, zeroline=False, nticks=5)
    for col in range(len(shown) + 1, most + 1):  # blank columns: no axis lines either
        fig.update_xaxes(visible=False, row=1, col=col)
        fig.update_yaxes(visible=False, row=1, col=col)
    # room above the panels for their titles, under the chart's subtitle
    fig.update_layout(
        hovermode="closest",
        height=CHART_PX + PANEL_TITLE_PX,
        margin=dict(t=fig.layout.margin.t + PANEL_TITLE_PX),
        title=dict(yref="container", y=1, yanchor="top", pad=dict(t=14)),
    )
    if not shown:
        empty(fig, "A 2-D dataset's decision regions appear here at the first evaluation.")
    alt = ("Decision regions: " + "; ".join(parts) + ".") if parts else "Decision regions: none yet."
    return Chart(fig, alt, [])


def _cell(point: Sequence[float], regions: dict) -> int:
    """The index of the grid cell nearest a point."""
    size, (x0, x1, y0, y1) = regions["size"], regions["box"]
    i = min(max(round((point[1] - y0) / (y1 - y0) * (size - 1)), 0), size - 1)
    j = min(max(round((point[0] - x0) / (x1 - x0) * (size - 1)), 0), size - 1)
    return i * size + j
