"""Lesson 11's architecture study: samples/s, memory and quality against the batch for each
architecture, and the table that sets each one's measured range beside the rule of thumb."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from bsdemo.architectures import ARCHITECTURES
from bsdemo.charts.style import OKABE_ITO, SYMBOLS, Chart, empty, layout, log_ticks
from bsdemo.recipes.architectures import budget_words, by_cpu_time
from bsdemo.units import fixed, format_bytes, percent, sig

COLOURS = {name: OKABE_ITO[i] for i, name in enumerate(ARCHITECTURES)}
METRICS = {  # chart -> (point field, title, y-axis title, scale, architectures drawn)
    "speed": (
        "samples_per_sec",
        "Samples/s against the batch",
        "Samples per second",
        1.0,
        tuple(ARCHITECTURES),
    ),
    "memory": (
        "peak_memory_bytes",
        "Peak memory against the batch",
        "Peak memory (MiB)",
        2**20,
        tuple(ARCHITECTURES),
    ),
    "accuracy": (
        "quality",
        "Test accuracy at the end of the budget",
        "Test accuracy",
        1.0,
        ("cnn", "transformer", "lstm"),
    ),
    "frechet": (
        "quality",
        "GAN: Fréchet distance at the end of the budget",
        "Fréchet distance (lower: more like real)",
        1.0,
        ("gan",),
    ),
}


def architecture_charts(points: Sequence[dict[str, Any]], seconds: float) -> dict[str, Chart]:
    """The four charts of the study, one line per architecture against a log2 batch axis."""
    return {name: _chart(points, name, seconds) for name in METRICS}


def _chart(points: Sequence[dict[str, Any]], metric: str, seconds: float) -> Chart:
    field, title, y_title, scale, names = METRICS[metric]
    fig, table, parts = go.Figure(), [], []
    for i, name in enumerate(n for n in ARCHITECTURES if n in names):
        pts = sorted(
            (
                p
                for p in points
                if p["architecture"] == name and p["status"] == "completed" and p.get(field) is not None
            ),
            key=lambda p: p["batch_size"],
        )
        if not pts:
            continue
        label = ARCHITECTURES[name].label
        ys = [p[field] / scale for p in pts]
        fig.add_trace(
            go.Scatter(
                x=[p["batch_size"] for p in pts],
                y=ys,
                mode="lines+markers",
                name=label,
                line=dict(color=COLOURS[name], width=2.5),
                marker=dict(symbol=SYMBOLS[i % len(SYMBOLS)], size=9),
            )
        )
        parts.append(
            f"{label} from {_fmt(metric, ys[0])} at batch {pts[0]['batch_size']} to "
            f"{_fmt(metric, ys[-1])} at batch {pts[-1]['batch_size']}"
        )
        table += [
            {"architecture": label, "batch size": p["batch_size"], y_title: y}
            for p, y in zip(pts, ys, strict=True)
        ]
    batches = sorted({p["batch_size"] for p in points})
    layout(
        fig,
        title,
        "Batch size (log scale)",
        y_title,
        subtitle=f"each run trained {budget_words(points, seconds)}, the lr scaled by √(B/32)"
        if metric in ("accuracy", "frechet")
        else "by the training thread's CPU time"
        if metric == "speed" and by_cpu_time(points)
        else None,
    )
    fig.update_xaxes(type="log", tickvals=batches, ticktext=[str(b) for b in batches])
    if metric == "accuracy":
        fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    elif metric == "speed":
        fig.update_yaxes(type="log", **log_ticks([y for t in fig.data for y in t.y or ()]))
    else:
        fig.update_yaxes(rangemode="tozero")
    fig.update_layout(hovermode="closest")
    if not parts:
        empty(fig, "Appears as the runs finish.")
    alt = (f"{title}: " + "; ".join(parts) + ".") if parts else f"{title}: no runs yet."
    return Chart(fig, alt, table)


def _fmt(metric: str, value: float) -> str:
    return {
        "speed": f"{fixed(value, 0)}",
        "memory": f"{sig(value)} MiB",
        "accuracy": f"{percent(value)}",
        "frechet": f"{sig(value)}",
    }[metric]


def architecture_table(summaries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rule of thumb beside what this machine measured, one row per architecture (the
    reasons are the verdict's, under the table)."""
    return [
        {
            "architecture": s["label"],
            "rule of thumb": s["rule_text"],
            "measured here": (
                f"{s['range'][0]}–{s['range'][1]}" if s["range"][0] != s["range"][1] else str(s["range"][0])
            )
            if s.get("range")
            else "–",
            "agreement": s.get("agreement") or ("not judged: did not learn" if s.get("not_learned") else "–"),
            "throughput knee": s.get("knee"),
            "memory per sample": format_bytes(s["memory_per_sample_bytes"])
            if s.get("memory_per_sample_bytes")
            else "–",
        }
        for s in summaries
    ]
