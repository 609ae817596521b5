"""Quantities against batch size from a sweep's points (a log2 axis): throughput, step time
and its fit, time per epoch and utilisation; memory by component and the finder's chart
(`sweepmemory`) are imported from here too."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from bsdemo.charts.batchaxis import _log2_axis, _ok, _oom_marks, _vline
from bsdemo.charts.style import OKABE_ITO, Chart, batch_colour, layout
from bsdemo.charts.sweepmemory import BREAKDOWN, BREAKDOWN_COLOURS, finder_chart, memory_breakdown_chart
from bsdemo.units import fixed, percent, sig


def _timing(p: dict, key: str) -> dict | None:
    return (p.get("timing") or {}).get(key)


def _error_bars(ok: Sequence[dict], key: str, scale: float = 1.0) -> dict | None:
    """Plotly error bars from each point's quartiles (the middle half of its timed steps)."""
    spreads = [_timing(p, key) for p in ok]
    if not ok or any(s is None for s in spreads):
        return None
    return dict(
        type="data",
        symmetric=False,
        thickness=1.5,
        width=4,
        array=[(s["q3"] - s["median"]) * scale for s in spreads],
        arrayminus=[(s["median"] - s["q1"]) * scale for s in spreads],
    )


def clock_note(points: Sequence[dict]) -> str:
    """How the points were timed, short enough for a half-width chart's subtitle."""
    ok = _ok(points)
    clocks = sorted({_timing(p, "clock") for p in ok} - {None})
    rounds = sorted({_timing(p, "rounds") for p in ok} - {None})
    if not clocks:
        return "median of the timed steps"
    count = f"{rounds[0]}" if len(rounds) == 1 else f"{rounds[0]}–{rounds[-1]}"
    return f"median; bars: middle half · {count} rounds · {', '.join(clocks)}"


def _middle(p: dict, key: str, scale: float, write: Callable[[float], str]) -> str | None:
    s = _timing(p, key)
    return f"{write(s['q1'] * scale)}–{write(s['q3'] * scale)}" if s else None


def sweep_throughput_chart(points: Sequence[dict]) -> Chart:
    ok = _ok(points)
    fig = go.Figure(
        go.Scatter(
            x=[p["batch_size"] for p in ok],
            y=[p["samples_per_sec"] for p in ok],
            mode="lines+markers",
            name="measured",
            line=dict(color=OKABE_ITO[0]),
            error_y=_error_bars(ok, "samples_per_sec"),
            marker=dict(size=10, color=[batch_colour(p["batch_size"]) for p in ok]),
        )
    )
    _oom_marks(fig, points, 0)
    layout(
        fig,
        "Throughput against batch size",
        "Batch size (log2 scale)",
        "Samples per second (measured)",
        subtitle=clock_note(points),
        rangemode="tozero",
    )
    _log2_axis(fig, [p["batch_size"] for p in points])
    best = max(ok, key=lambda p: p["samples_per_sec"]) if ok else None
    alt = (
        f"Samples per second rise from {fixed(ok[0]['samples_per_sec'], 0)} at batch "
        f"{ok[0]['batch_size']} to a best of {fixed(best['samples_per_sec'], 0)} at batch "
        f"{best['batch_size']}."
        if ok
        else "No measured points yet."
    )
    return Chart(
        fig,
        alt,
        [
            {
                "batch size": p["batch_size"],
                "status": p["status"],
                "samples/s": p["samples_per_sec"],
                "middle half": _middle(p, "samples_per_sec", 1, lambda v: fixed(v, 0)),
                "rounds": _timing(p, "rounds"),
                # what you waited: under load, lower than what the device does
                "wall-clock samples/s": _timing(p, "wall_samples_per_sec"),
            }
            for p in points
        ],
    )


def sweep_step_time_chart(points: Sequence[dict], fit: dict | None, crossover: float | None) -> Chart:
    ok = _ok(points)
    sizes = [p["batch_size"] for p in ok]
    fig = go.Figure(
        go.Scatter(
            x=sizes,
            y=[p["step_time_s"] * 1e3 for p in ok],
            mode="markers",
            name="measured (median step)",
            error_y=_error_bars(ok, "step_time_s", 1e3),
            marker=dict(size=10, color=OKABE_ITO[0]),
        )
    )
    alt = "Step time against batch size."
    if fit and fit.get("t0_s") is not None and sizes:
        xs = sorted(set([min(sizes), max(sizes)] + sizes))
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[(fit["t0_s"] + fit["t1_s_per_sample"] * b) * 1e3 for b in xs],
                mode="lines",
                name=f"fit t(B) = {sig(fit['t0_s'] * 1e3)} ms + {sig(fit['t1_s_per_sample'] * 1e6)} µs·B "
                "(predicted)",
                line=dict(color=OKABE_ITO[1], dash="dash"),
            )
        )
        fig.add_hline(
            y=fit["t0_s"] * 1e3,
            line=dict(color=OKABE_ITO[2], dash="dot"),
            annotation_text="fixed overhead t0",
        )
        alt = (
            f"Step time is about {sig(fit['t0_s'] * 1e3)} ms of fixed overhead plus "
            f"{sig(fit['t1_s_per_sample'] * 1e6)} µs per sample (R² {fixed(fit['r2_time'], 2)})."
        )
        if crossover:
            _vline(fig, crossover, f" overhead = compute at B ≈ {crossover:.0f}", OKABE_ITO[4], inside=True)
            alt += f" The two are equal at batch {crossover:.0f}."
    layout(
        fig,
        "Step time: fixed overhead + per-sample work",
        "Batch size (log2 scale)",
        "Time per optimizer step (ms)",
        subtitle=clock_note(points),
        rangemode="tozero",
    )
    _log2_axis(fig, [p["batch_size"] for p in points])
    return Chart(
        fig,
        alt,
        [
            {
                "batch size": p["batch_size"],
                "step time (ms)": p["step_time_s"] * 1e3,
                "middle half (ms)": _middle(p, "step_time_s", 1e3, sig),
            }
            for p in ok
        ],
    )


def sweep_epoch_time_chart(points: Sequence[dict], train_samples: int) -> Chart:
    ok = _ok(points)
    rows = [
        {
            "batch size": p["batch_size"],
            "epoch time (s)": math.ceil(train_samples / p["batch_size"]) * p["step_time_s"],
        }
        for p in ok
    ]
    fig = go.Figure(
        go.Scatter(
            x=[r["batch size"] for r in rows],
            y=[r["epoch time (s)"] for r in rows],
            mode="lines+markers",
            name="ceil(N/B) × step time",
            line=dict(color=OKABE_ITO[0]),
        )
    )
    layout(
        fig,
        "Time per epoch",
        "Batch size (log2 scale)",
        "Seconds per epoch",
        subtitle="ceil(N / B) × the measured step time",
        rangemode="tozero",
    )
    _log2_axis(fig, [p["batch_size"] for p in points])
    fig.update_yaxes(type="log", dtick=1, title="Seconds per epoch (log)")
    alt = (
        f"Time per epoch falls from {sig(rows[0]['epoch time (s)'])} s at batch "
        f"{rows[0]['batch size']} to {sig(rows[-1]['epoch time (s)'])} s at batch "
        f"{rows[-1]['batch size']}."
        if rows
        else "No measured points yet."
    )
    return Chart(fig, alt, rows)


def sweep_utilisation_chart(points: Sequence[dict]) -> Chart:
    ok = _ok(points)
    fig = go.Figure(
        go.Scatter(
            x=[p["batch_size"] for p in ok],
            y=[(p["share_of_peak"] or 0) * 100 for p in ok],
            mode="lines+markers",
            name="achieved FLOP/s, % of peak",
            line=dict(color=OKABE_ITO[2]),
        )
    )
    if any(p["utilization_pct"] is not None for p in ok):
        fig.add_trace(
            go.Scatter(
                x=[p["batch_size"] for p in ok],
                y=[p["utilization_pct"] for p in ok],
                mode="lines+markers",
                name="NVML utilisation (% of time a kernel ran)",
                line=dict(color=OKABE_ITO[3], dash="dash"),
            )
        )
    layout(fig, "Utilisation: busy time vs useful work", "Batch size (log2 scale)", "Percent")
    _log2_axis(fig, [p["batch_size"] for p in points])
    alt = (
        f"Achieved FLOP/s rise from {percent(ok[0]['share_of_peak'] or 0)} of peak at batch "
        f"{ok[0]['batch_size']} to {percent(ok[-1]['share_of_peak'] or 0)} at batch "
        f"{ok[-1]['batch_size']}."
        if ok
        else "No measured points yet."
    )
    return Chart(
        fig,
        alt,
        [
            {
                "batch size": p["batch_size"],
                "% of peak FLOP/s": (p["share_of_peak"] or 0) * 100,
                "NVML %": p["utilization_pct"],
            }
            for p in ok
        ],
    )


__all__ = [
    "BREAKDOWN",
    "BREAKDOWN_COLOURS",
    "clock_note",
    "finder_chart",
    "memory_breakdown_chart",
    "sweep_epoch_time_chart",
    "sweep_step_time_chart",
    "sweep_throughput_chart",
    "sweep_utilisation_chart",
]
