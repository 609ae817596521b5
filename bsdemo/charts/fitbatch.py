"""Lesson 10's chart: the largest batch each technique fits under one memory budget, with the
samples per second it reached there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from bsdemo.charts.style import OKABE_ITO, Chart, layout
from bsdemo.recipes.fitbatch import budget_basis
from bsdemo.timing import THREAD_CLOCK
from bsdemo.units import fixed

COLOURS = {
    "fp32": OKABE_ITO[0],
    "bf16": OKABE_ITO[1],
    "fp16": OKABE_ITO[3],
    "checkpointing": OKABE_ITO[2],
    "bf16+checkpointing": OKABE_ITO[6],
    "accumulation": OKABE_ITO[4],
}


def fit_chart(results: Sequence[dict[str, Any]], budget: int) -> Chart:
    """Horizontal bars: each technique's largest (effective) batch under the budget, labelled
    with its samples/s; accumulation's micro-batch drawn inside its effective batch."""
    names = [r["technique"] for r in results]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            y=names,
            x=[r["effective_batch_size"] for r in results],
            orientation="h",
            name="largest batch (effective)",
            marker_color=[COLOURS[n] for n in names],
            showlegend=False,
            text=[
                f"{r['effective_batch_size']:,} · {fixed(r['samples_per_sec'], 0)} samples/s"
                if r["samples_per_sec"]
                else "did not fit"
                for r in results
            ],
            textposition="auto",
            insidetextanchor="start",
        )
    )
    micro = [r for r in results if r.get("accumulation_steps", 1) > 1]
    if micro:
        fig.add_trace(
            go.Bar(
                y=[r["technique"] for r in micro],
                x=[r["max_batch_size"] for r in micro],
                orientation="h",
                name="its micro-batch (what memory holds)",
                marker=dict(color="rgba(0,0,0,0)", line=dict(color="#111111", width=2)),
            )
        )
    layout(
        fig,
        "The largest batch that fits, by technique",
        "Batch size (samples per step)",
        "",
        subtitle=budget_basis(results, budget)
        + (
            " · samples/s by the training thread's CPU time"
            if results and all(r.get("clock") == THREAD_CLOCK for r in results)
            else ""
        ),
    )
    fig.update_layout(
        barmode="overlay", hovermode="closest", showlegend=bool(micro), height=110 + 42 * len(results)
    )  # one 1280x720 screen with Run
    fig.update_yaxes(autorange="reversed")
    base = next((r for r in results if r["technique"] == "fp32"), None)
    alt = (
        "Largest batch under the budget: "
        + "; ".join(f"{r['technique']} {r['effective_batch_size']:,}" for r in results)
        + (f" (fp32: {base['max_batch_size']:,})." if base else ".")
    )
    return Chart(fig, alt, fit_table(results))


def fit_table(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A row per technique: its largest batch, the effective batch it makes (accumulation's is
    k × that), ...; on the CPU the peak is the accounting's, and the allocator's real peak at
    one common batch sits beside it (its column named with that batch)."""
    real = next((r["real_batch"] for r in results if r.get("real_peak_bytes")), None)
    rows = []
    for r in results:
        row = {
            "technique": r["technique"],
            "batch": r["max_batch_size"],
            "effective": r["effective_batch_size"],
            "samples/s": r["samples_per_sec"],
            "bytes/sample": r["bytes_per_sample"],
            ("accounted MiB" if real else "peak MiB"): (r["peak_memory_bytes"] or 0) / 2**20,
        }
        if real:  # the allocator's, at one batch for all: a saving is real only if this is lower
            row[f"real MiB ({real})"] = r["real_peak_bytes"] / 2**20 if r.get("real_peak_bytes") else None
        rows.append(row | {"loss after": r["loss_after"], "vs fp32": r["loss_vs_fp32"]})
    return rows
