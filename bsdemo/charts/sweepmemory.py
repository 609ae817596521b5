"""Memory against batch size (a log2 axis): a sweep's memory by component with its M(B) fit,
and the batch-size finder's probes, its prediction and the batch it verified."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from bsdemo.charts.batchaxis import _log2_axis, _ok, _oom_marks, _vline
from bsdemo.charts.style import OKABE_ITO, OOM_COLOUR, Chart, layout
from bsdemo.fits import linear_fit
from bsdemo.units import MIB, fixed, percent, setting, sig

BREAKDOWN = (
    ("parameters", "Parameters"),
    ("gradients", "Gradients"),
    ("optimizer_state", "Optimizer state"),
    ("activations", "Saved activations"),
    ("workspace", "Workspace / temporaries"),
    ("allocator_cache", "Allocator cache (reserved − allocated)"),
)
# stacked neighbours told apart by hue and lightness (gradients orange beside activations
# vermillion read as one colour): blue, orange, green, pink, purple, grey
BREAKDOWN_COLOURS = ("#0072B2", "#C77C00", "#009E73", "#CC79A7", "#AA3377", "#555555")


def memory_breakdown_chart(
    points: Sequence[dict], fit: dict | None, budget: int | None, predicted_max: int | None
) -> Chart:
    """Stacked memory components per measured batch, the M(B) fit, the budget and OOM points."""
    ok = [p for p in _ok(points) if p["memory_breakdown"]]
    sizes = [p["batch_size"] for p in ok]
    fig = go.Figure()
    for (key, label), colour in zip(BREAKDOWN, BREAKDOWN_COLOURS, strict=True):
        ys = [(p["memory_breakdown"].get(key) or 0) / MIB for p in ok]
        if not any(ys):  # nothing of it here (SGD's optimizer state, a CPU's allocator cache):
            continue  # no band of zero height, no legend entry for it
        # stacked areas: bars do not suit a log axis
        fig.add_trace(
            go.Scatter(
                x=sizes,
                y=ys,
                name=label,
                mode="lines+markers",
                stackgroup="memory",
                line=dict(color=colour, width=1),
            )
        )
    top = max([p["peak_memory_bytes"] or 0 for p in ok] + [budget or 0]) / MIB
    alt = "Memory by component against batch size."
    if fit and fit.get("m0_bytes") is not None:
        xs = sorted(set(sizes + ([predicted_max] if predicted_max else [])))
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[(fit["m0_bytes"] + fit["m_bytes_per_sample"] * b) / MIB for b in xs],
                mode="lines",
                name=f"fit M(B) = {sig(fit['m0_bytes'] / MIB)} MiB + "
                f"{sig(fit['m_bytes_per_sample'] / 1024)} KiB·B (R² "
                f"{fixed(fit['r2_memory'], 3)}, predicted)",
                line=dict(color="#000000", dash="dash"),
            )
        )
        alt = (
            f"Memory is {sig(fit['m0_bytes'] / MIB)} MiB that does not depend on the batch plus "
            f"{sig(fit['m_bytes_per_sample'] / 1024)} KiB per sample (R² {fixed(fit['r2_memory'], 3)})."
        )
    if budget:
        fig.add_hline(
            y=budget / MIB,
            line=dict(color=OOM_COLOUR, dash="dot"),
            annotation_text=f"budget {setting(budget / MIB, 4)} MiB",
            annotation_position="top left",
        )
        alt += f" The budget is {setting(budget / MIB, 4)} MiB."
    if predicted_max:
        _vline(fig, predicted_max, f"predicted largest batch {predicted_max}", OKABE_ITO[4])
        alt += f" The fit predicts that batch {predicted_max} is the largest that fits."
    _oom_marks(fig, points, top * 1.05 if top else 1)
    ooms = [p["batch_size"] for p in points if p["status"] == "oom"]
    if ooms:
        alt += f" Batch {ooms[0]} ran out of memory."
    layout(fig, "Memory by component", "Batch size (log2 scale)", "Memory (MiB)")
    _log2_axis(fig, [p["batch_size"] for p in points] + ([predicted_max] if predicted_max else []))
    rows = [
        {
            "batch size": p["batch_size"],
            "status": p["status"],
            **{label: (p["memory_breakdown"] or {}).get(key) for key, label in BREAKDOWN},
            "peak (B)": p["peak_memory_bytes"],
            "message": p["message"],
        }
        for p in points
    ]
    return Chart(fig, alt, rows)


def finder_chart(points: Sequence[dict], result: dict | None) -> Chart:
    """The batch-size finder's story on one chart: each probe's peak memory against its batch
    (numbered in the order it ran, out-of-memory ones marked), the line M(B) = M0 + m·B fitted
    through the probes that ran (the prediction), the memory budget and what the safety margin
    leaves of it, and the batch the finder verified with a real step."""
    probes = [p for p in points if p.get("kind", "find_probe") == "find_probe"]
    ok = [p for p in _ok(probes) if p["peak_memory_bytes"]]
    fig = go.Figure()
    capacity = (result or {}).get("capacity_bytes")
    margin = (result or {}).get("margin") or 0.0
    # the prediction's own basis: the probes run before it (not the verifying or bisecting
    # ones, which the line would then pass through by construction)
    basis = [p for p in ok if str(p.get("reason", "")).startswith("probe")]
    if len({p["batch_size"] for p in basis}) < 2:
        basis = ok
    fit = linear_fit([p["batch_size"] for p in basis], [p["peak_memory_bytes"] for p in basis])
    numbers = ", ".join(str(p["probe"]) for p in basis)
    chosen = (result or {}).get("max_batch_size")
    sizes = [p["batch_size"] for p in probes] + ([chosen] if chosen else [])
    alt = f"{len(probes)} probe(s) of peak memory against batch size."
    if fit is not None and fit.slope > 0:
        lo, hi = min(sizes), max(sizes)  # a straight line drawn smooth on the log axis
        xs = sorted({lo * (hi / lo) ** (i / 40) for i in range(41)} | set(sizes))
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[fit.predict(b) / MIB for b in xs],
                mode="lines",
                name=f"fit through probe(s) {numbers}: M(B) = {sig(fit.intercept / MIB)} MiB + "
                f"{sig(fit.slope / 1024)} KiB·B (predicted)",
                line=dict(color="#000000", dash="dash"),
                hoverinfo="skip",
            )
        )
        alt += (
            f" The fit through probe(s) {numbers}: {sig(fit.intercept / MIB)} MiB plus "
            f"{sig(fit.slope / 1024)} KiB a sample."
        )
    if ok:
        fig.add_trace(
            go.Scatter(
                x=[p["batch_size"] for p in ok],
                y=[p["peak_memory_bytes"] / MIB for p in ok],
                mode="markers+text",
                name="a probe that ran (measured)",
                text=[str(p["probe"]) for p in ok],
                textposition="top left",
                marker=dict(color=OKABE_ITO[0], size=10),
                hovertext=[
                    f"probe {p['probe']}: batch {p['batch_size']:,}, "
                    f"{sig(p['peak_memory_bytes'] / MIB)} MiB ({p['reason']})"
                    for p in ok
                ],
                hoverinfo="text",
            )
        )
    top = max([p["peak_memory_bytes"] for p in ok] + [capacity or 0], default=0) / MIB
    if capacity:
        fig.add_hline(
            y=capacity / MIB,
            line=dict(color=OOM_COLOUR, dash="dot"),
            annotation_text=f"budget {setting(capacity / MIB, 4)} MiB",
            annotation_position="top left",
        )
        if margin:
            usable = capacity * (1 - margin) / MIB
            fig.add_hline(
                y=usable,
                line=dict(color=OKABE_ITO[4], dash="dot"),
                annotation_text=f"{percent(margin, 0)} kept free",
                annotation_position="bottom left",
            )
        alt += f" The budget is {setting(capacity / MIB, 4)} MiB, {percent(margin, 0)} of it kept free."
    if chosen:
        _vline(
            fig, chosen, f"largest that fits: {chosen:,} (verified)", OKABE_ITO[2], side="right", inside=True
        )
        alt += f" Batch {chosen:,} is the largest that fits, verified by a real step."
    _oom_marks(fig, probes, top * 1.05 if top else 1)
    ooms = [p["batch_size"] for p in probes if p["status"] == "oom"]
    if ooms:
        alt += f" Out of memory at batch {', '.join(f'{b:,}' for b in sorted(ooms))}."
    layout(
        fig,
        "Predict from a few probes, verify with a real step",
        "Batch size (log2 scale)",
        "Peak memory (MiB)",
        subtitle="numbers: the order the probes ran",
    )
    fig.update_layout(hovermode="closest")
    _log2_axis(fig, sizes)
    rows = [
        {
            "probe": p["probe"],
            "batch size": p["batch_size"],
            "status": p["status"],
            "peak (B)": p["peak_memory_bytes"],
            "why": p["reason"],
        }
        for p in probes
    ]
    return Chart(fig, alt, rows)
