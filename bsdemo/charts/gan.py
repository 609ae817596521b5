"""A GAN run's own charts: the latest grid of generated images, and the Fréchet distance of
generated to real test images at each evaluation (bsdemo.engine.gan)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from bsdemo.charts.curves import run_label
from bsdemo.charts.style import X_AXES, Chart, empty, layout, styles
from bsdemo.runs import JobSnapshot
from bsdemo.units import sig


def is_gan(snap: JobSnapshot) -> bool:
    return snap.config.get("model") == "gan"


def samples_chart(snap: JobSnapshot) -> Chart:
    """The latest evaluation's grid of generated images, pixel for pixel, in grey."""
    grids = [g for g in snap.evals.get("samples", []) if g]
    fig = go.Figure()
    if grids:
        step = snap.evals["step"][len(snap.evals["samples"]) - 1]
        fig.add_trace(
            go.Heatmap(
                z=grids[-1],
                colorscale="gray",
                zmin=0,
                zmax=1,
                showscale=False,
                hovertemplate="pixel %{z:.2f}<extra></extra>",
            )
        )
        title = f"Generated images at step {step:,}"
    else:
        title = "Generated images"
    layout(fig, title, "", "", subtitle="the same 16 latent points at every evaluation")
    fig.update_xaxes(visible=False, constrain="domain")
    fig.update_yaxes(visible=False, autorange="reversed", scaleanchor="x")
    fig.update_layout(hovermode="closest")
    if not grids:
        empty(fig, "Appears at the first evaluation.")
    alt = (
        f"A 4 by 4 grid of images the generator of {run_label(snap)} drew at its latest evaluation."
        if grids
        else "No generated images yet."
    )
    return Chart(fig, alt, [])


def frechet_chart(runs: Sequence[JobSnapshot], x_axis: str = "steps") -> Chart:
    """Each GAN run's Fréchet distance at each evaluation, with real images' own as a floor."""
    x_field, x_title = X_AXES[x_axis]
    fig, table, parts = go.Figure(), [], []
    reference = None
    for snap, style in zip(runs, styles(runs), strict=True):
        pts = [
            (x, y)
            for x, y in zip(snap.evals[x_field], snap.evals.get("frechet_distance", []), strict=False)
            if y is not None
        ]
        reference = snap.summary.get("frechet_reference") or reference
        if not pts:
            continue
        label = run_label(snap)
        fig.add_trace(
            go.Scatter(
                x=[p[0] for p in pts],
                y=[p[1] for p in pts],
                mode="lines+markers",
                name=label,
                line=dict(color=style.colour, dash=style.dash, width=2.5),
                marker=dict(symbol=style.symbol, size=8),
            )
        )
        parts.append(f"{label}: {sig(pts[0][1])} at the first evaluation, {sig(pts[-1][1])} latest")
        table += [{"run": label, x_title: x, "Fréchet distance": y} for x, y in pts]
    if reference is not None:
        fig.add_hline(
            y=reference,
            line=dict(color="#555555", dash="dot", width=1.5),
            annotation_text=f"real images: {sig(reference, 2)}",
            annotation_position="top left",
        )
    layout(
        fig,
        "Fréchet distance to real test images",
        x_title,
        "Fréchet distance (lower: more like real)",
        subtitle="in a small digit classifier's feature space",
        rangemode="tozero",
    )
    fig.update_xaxes(rangemode="nonnegative")
    if not parts:
        empty(fig, "Appears at the first evaluation of a GAN run.")
    alt = (
        "Fréchet distance against " + x_title.lower() + ". " + "; ".join(parts) + "."
        if parts
        else "Fréchet distance: no GAN evaluation yet."
    )
    return Chart(fig, alt, table)
