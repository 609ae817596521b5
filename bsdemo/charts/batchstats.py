"""What the batch does to the gradient and to training's statistics, against batch size: the
normalisation grid (lesson 9), the gradient noise and its scale, and the critical batch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from bsdemo.charts.style import OKABE_ITO, OOM_COLOUR, Chart, batch_colour, layout
from bsdemo.charts.sweeps import _log2_axis, _vline
from bsdemo.units import fixed, setting, sig

NORM_LABELS = {"none": "no normalisation", "batch": "BatchNorm", "group": "GroupNorm", "layer": "LayerNorm"}
NORM_STYLES = {
    "none": (OKABE_ITO[7], "dot", "circle"),
    "batch": (OOM_COLOUR, "solid", "x"),
    "group": (OKABE_ITO[0], "dash", "square"),
    "layer": (OKABE_ITO[2], "dashdot", "diamond"),
}


def norms_chart(cells: Sequence[dict]) -> Chart:
    """Test accuracy (evaluation mode) against batch size, one line per normalisation; the
    BatchNorm line is also drawn with batch statistics (training mode) where measured."""
    fig = go.Figure()
    norms = list(dict.fromkeys(c["norm"] for c in cells))
    for norm in norms:
        mine = [c for c in cells if c["norm"] == norm and c["test_accuracy"] is not None]
        colour, dash, symbol = NORM_STYLES[norm]
        fig.add_trace(
            go.Scatter(
                x=[c["batch_size"] for c in mine],
                y=[100 * c["test_accuracy"] for c in mine],
                mode="lines+markers",
                name=NORM_LABELS[norm],
                line=dict(color=colour, dash=dash),
                marker=dict(symbol=symbol, size=9),
            )
        )
        if norm == "batch" and mine:
            fig.add_trace(
                go.Scatter(
                    x=[c["batch_size"] for c in mine],
                    y=[100 * c["train_mode_test_accuracy"] for c in mine],
                    mode="lines+markers",
                    name="BatchNorm, batch statistics at test",
                    line=dict(color=colour, dash="dot", width=1),
                    marker=dict(symbol="x-open", size=8),
                )
            )
    layout(
        fig,
        "Test accuracy against batch size, per normalisation",
        "Batch size (log2 scale)",
        "Test accuracy (%)",
        subtitle="the same model, data, seed and epochs in every run",
        range=[0, 102],
    )
    _log2_axis(fig, [c["batch_size"] for c in cells])
    rows = [
        {
            "normalisation": NORM_LABELS[c["norm"]],
            "batch": c["batch_size"],
            "test accuracy (%)": None if c["test_accuracy"] is None else round(100 * c["test_accuracy"], 1),
            "with batch statistics (%)": round(100 * c["train_mode_test_accuracy"], 1),
            "changed by batch-mates (%)": round(100 * c["partner_changed"], 1),
        }
        for c in cells
    ]
    smallest = min((c["batch_size"] for c in cells), default=None)
    at_small = ", ".join(
        f"{NORM_LABELS[c['norm']]} {100 * c['test_accuracy']:.0f}%"
        for c in cells
        if c["batch_size"] == smallest and c["test_accuracy"]
    )
    alt = f"Test accuracy against batch size for {', '.join(NORM_LABELS[n] for n in norms)}. " + (
        f"At batch {smallest}: {at_small}." if at_small else ""
    )
    return Chart(fig, alt, rows)


def norms_table(cells: Sequence[dict]) -> list[dict[str, Any]]:
    """Test accuracy (%) per normalisation (a row) and batch size (a column), then BatchNorm
    with batch statistics at test and the share of its predictions the batch-mates changed."""
    sizes = sorted({c["batch_size"] for c in cells})
    rows = []
    for norm in dict.fromkeys(c["norm"] for c in cells):
        mine = {c["batch_size"]: c for c in cells if c["norm"] == norm}
        rows.append(
            {"normalisation": NORM_LABELS[norm]}
            | {
                f"batch {b}": None
                if b not in mine or mine[b]["test_accuracy"] is None
                else round(100 * mine[b]["test_accuracy"], 1)
                for b in sizes
            }
        )
        if norm == "batch":
            rows.append(
                {"normalisation": "BatchNorm, batch statistics at test"}
                | {
                    f"batch {b}": round(100 * mine[b]["train_mode_test_accuracy"], 1)
                    for b in sizes
                    if b in mine
                }
            )
            rows.append(
                {"normalisation": "BatchNorm, predictions changed by batch-mates"}
                | {f"batch {b}": round(100 * mine[b]["partner_changed"], 1) for b in sizes if b in mine}
            )
    return rows


def noise_charts(result: dict) -> tuple[Chart, Chart]:
    """The variance of mini-batch gradients against the batch (log-log) with tr(S)/B and the
    finite-population curve; and the cosine between a mini-batch gradient and the full one."""
    sizes, variances = result["batch_sizes"], result["variances"]
    n, trace = result["train_samples"], result["trace_sigma"]
    quarters = 4 * math.ceil(math.log2(max(sizes)))  # the curves at every quarter power of two
    dense = sorted({*sizes, *(round(2 ** (k / 4)) for k in range(quarters + 1))})
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=sizes,
            y=variances,
            mode="markers",
            name="measured",
            marker=dict(size=11, color=[batch_colour(b) for b in sizes], line=dict(width=1, color="#333333")),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=dense,
            y=[trace / b for b in dense],
            mode="lines",
            name="tr(Σ)/B: 1/B from the batch-1 variance",
            line=dict(color=OKABE_ITO[0], dash="dash"),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=dense,
            y=[trace / b * (n - b) / (n - 1) for b in dense],
            mode="lines",
            name=f"× (N − B)/(N − 1), drawn from N = {n:,}",
            line=dict(color=OKABE_ITO[1], dash="dot"),
        )
    )
    layout(
        fig,
        "Gradient variance against batch size",
        "Batch size (log scale)",
        "E|g_B − G|² (log scale)",
        subtitle=f"{result['draws']} draws per batch size; fitted slope {fixed(result['variance_slope'], 2)}",
    )
    fig.update_yaxes(type="log", dtick=1)  # a label per power of ten, none between
    _log2_axis(fig, sizes)
    alt = (
        f"Gradient variance falls from {sig(variances[0])} at batch {sizes[0]} to "
        f"{sig(variances[-1])} at batch {sizes[-1]}, a log-log slope of "
        f"{fixed(result['variance_slope'], 2)} (1/B would be −1)."
    )
    rows = [
        {
            "batch": b,
            "variance": v,
            "tr(S)/B": trace / b,
            "with finite population": trace / b * (n - b) / (n - 1),
            "cosine to G": c,
        }
        for b, v, c in zip(sizes, variances, result["cosines"], strict=True)
    ]
    cos = go.Figure(
        go.Scatter(
            x=sizes,
            y=result["cosines"],
            mode="lines+markers",
            name="cos(g_B, G)",
            line=dict(color=OKABE_ITO[2]),
            marker=dict(size=10, color=[batch_colour(b) for b in sizes]),
        )
    )
    layout(
        cos,
        "How well a mini-batch points the way",
        "Batch size (log2 scale)",
        "Cosine to the full gradient",
        range=[0, 1.02],
    )
    _log2_axis(cos, sizes)
    return Chart(fig, alt, rows), Chart(
        cos,
        (
            f"The cosine between a mini-batch gradient and the full gradient rises from "
            f"{fixed(result['cosines'][0], 2)} at batch {sizes[0]} to {fixed(result['cosines'][-1], 2)} at "
            f"batch {sizes[-1]}."
        ),
        rows,
    )


def critical_chart(result: dict) -> Chart:
    """Steps to the target loss against the batch (log-log): the measured runs, perfect scaling
    through the smallest batch that arrived, McCandlish's S_min (1 + B_crit / B) through the
    measured critical batch, and the critical batch and B_simple marked."""
    sizes, steps = result["batch_sizes"], result["steps"]
    arrived = [(b, s) for b, s in zip(sizes, steps, strict=True) if s]
    fig = go.Figure()
    if arrived:
        xs, ys = zip(*arrived, strict=True)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                name="measured",
                line=dict(color=OKABE_ITO[0]),
                marker=dict(
                    size=11, color=[batch_colour(b) for b in xs], line=dict(width=1, color="#333333")
                ),
            )
        )
        b0, s0 = arrived[0]
        fig.add_trace(
            go.Scatter(
                x=sizes,
                y=[s0 * b0 / b for b in sizes],
                mode="lines",
                name="perfect scaling: 2× the batch, ½ the steps",
                line=dict(color="#666666", dash="dot"),
            )
        )
    failed = [(b, status) for b, s, status in zip(sizes, steps, result["statuses"], strict=True) if not s]
    if failed:
        top = max([s for s in steps if s] or [result["max_steps"]])
        fig.add_trace(
            go.Scatter(
                x=[b for b, _ in failed],
                y=[top] * len(failed),
                mode="markers+text",
                text=[status for _, status in failed],
                textposition="bottom center",
                name="never reached the target",
                marker=dict(symbol="x", size=13, color=OOM_COLOUR),
            )
        )
    s_min, b_crit, b_simple = result["s_min"], result["b_crit"], result["b_simple"]
    if b_crit:
        fig.add_trace(
            go.Scatter(
                x=sizes,
                y=[s_min * (1 + b_crit / b) for b in sizes],
                mode="lines",
                name="S_min (1 + B_crit / B), McCandlish et al.",
                line=dict(color=OKABE_ITO[6], dash="dash"),
            )
        )
        # the smaller of the two labelled to the left of its line, the larger to the right
        # inside the plot's top edge: above it, a narrow screen's subtitle runs into them
        _vline(
            fig,
            b_crit,
            f"critical batch ≈ {b_crit:.0f} ",
            OKABE_ITO[2],
            "right" if b_crit <= b_simple else "left",
            inside=True,
        )
    if b_simple and sizes[0] <= b_simple <= sizes[-1]:
        _vline(
            fig,
            b_simple,
            f" B_simple ≈ {b_simple:.0f}",
            OKABE_ITO[3],
            "left" if not b_crit or b_crit <= b_simple else "right",
            inside=True,
        )
    layout(
        fig,
        "Steps to the target loss against batch size",
        "Batch size (log2 scale)",
        "Optimizer steps (log scale)",
        subtitle=f"Training loss {setting(result['target_loss'])}; lr: {result['rule']} rule from "
        f"batch {result['reference_batch']} at {setting(result['reference_lr'])}"
        + (f", at most {setting(result['lr_cap'])}" if result.get("lr_cap") else ""),
    )
    fig.update_yaxes(type="log", dtick=1)
    _log2_axis(fig, sizes)
    rows = [
        {"batch": b, "lr": lr, "steps to target": s, "samples": s * b if s else None, "ended": status}
        for b, lr, s, status in zip(sizes, result["lrs"], steps, result["statuses"], strict=True)
    ]
    alt = (
        f"Optimizer steps to a training loss of {setting(result['target_loss'])} against batch size: "
        + ", ".join(f"batch {b}: {s if s else 'not reached'}" for b, s in zip(sizes, steps, strict=True))
        + (f". The critical batch is about {b_crit:.0f}" if b_crit else "")
        + f"; B_simple at initialisation is about {b_simple:.0f}."
    )
    return Chart(fig, alt, rows)
