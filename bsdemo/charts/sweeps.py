"""Quantities against batch size from a sweep's points (a log2 axis): throughput, step time
and its fit, time per epoch, utilisation, and memory by component."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from bsdemo.charts.style import OKABE_ITO, OOM_COLOUR, Chart, batch_colour, layout
from bsdemo.fits import linear_fit
from bsdemo.units import MIB, fixed, percent, setting, sig

BREAKDOWN = (("parameters", "Parameters"), ("gradients", "Gradients"),
             ("optimizer_state", "Optimizer state"), ("activations", "Saved activations"),
             ("workspace", "Workspace / temporaries"),
             ("allocator_cache", "Allocator cache (reserved − allocated)"))
# stacked neighbours told apart by hue and lightness (gradients orange beside activations
# vermillion read as one colour): blue, orange, green, pink, purple, grey
BREAKDOWN_COLOURS = ("#0072B2", "#C77C00", "#009E73", "#CC79A7", "#AA3377", "#555555")


def _log2_axis(fig: go.Figure, sizes: Sequence[int]) -> None:
    ticks = sorted(set(sizes)) or [1]
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[str(t) for t in ticks],
                     title="Batch size (log2 scale)")


def _vline(fig: go.Figure, x: float, text: str, colour: str, side: str = "left",
           inside: bool = False) -> None:
    """A vertical marker on a log x-axis: the line takes data units, an annotation log10 units
    (plotly's add_vline(annotation_text=...) mixes the two up on log axes). side: where the text
    starts from the line ("left": it runs to the right of it); inside: the text hangs inside the
    plot's top edge (clear of a subtitle above it)."""
    fig.add_vline(x=x, line=dict(color=colour, dash="dot"))
    fig.add_annotation(x=math.log10(x), y=1, yref="paper", text=text, showarrow=False,
                       xanchor=side, yanchor="top" if inside else "bottom",
                       font=dict(size=11, color=colour))


def _ok(points: Sequence[dict]) -> list[dict]:
    return [p for p in points if p["status"] == "ok"]


def _oom_marks(fig: go.Figure, points: Sequence[dict], y: float) -> None:
    ooms = [p for p in points if p["status"] == "oom"]
    if ooms:
        fig.add_trace(go.Scatter(
            x=[p["batch_size"] for p in ooms], y=[y] * len(ooms), mode="markers+text",
            name="out of memory" + (" (simulated)" if any(p["simulated"] for p in ooms) else ""),
            marker=dict(color=OOM_COLOUR, size=14, symbol="x"), text=["OOM"] * len(ooms),
            textposition="top center", hovertext=[p["message"] for p in ooms],
            hoverinfo="text"))


def _timing(p: dict, key: str) -> dict | None:
    return (p.get("timing") or {}).get(key)


def _error_bars(ok: Sequence[dict], key: str, scale: float = 1.0) -> dict | None:
    """Plotly error bars from each point's quartiles (the middle half of its timed steps)."""
    spreads = [_timing(p, key) for p in ok]
    if not ok or any(s is None for s in spreads):
        return None
    return dict(type="data", symmetric=False, thickness=1.5, width=4,
                array=[(s["q3"] - s["median"]) * scale for s in spreads],
                arrayminus=[(s["median"] - s["q1"]) * scale for s in spreads])


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
    fig = go.Figure(go.Scatter(
        x=[p["batch_size"] for p in ok], y=[p["samples_per_sec"] for p in ok], mode="lines+markers",
        name="measured", line=dict(color=OKABE_ITO[0]),
        error_y=_error_bars(ok, "samples_per_sec"),
        marker=dict(size=10, color=[batch_colour(p["batch_size"]) for p in ok])))
    _oom_marks(fig, points, 0)
    layout(fig, "Throughput against batch size", "Batch size (log2 scale)",
           "Samples per second (measured)", subtitle=clock_note(points), rangemode="tozero")
    _log2_axis(fig, [p["batch_size"] for p in points])
    best = max(ok, key=lambda p: p["samples_per_sec"]) if ok else None
    alt = (f"Samples per second rise from {fixed(ok[0]['samples_per_sec'], 0)} at batch "
           f"{ok[0]['batch_size']} to a best of {fixed(best['samples_per_sec'], 0)} at batch "
           f"{best['batch_size']}." if ok else "No measured points yet.")
    return Chart(fig, alt, [{"batch size": p["batch_size"], "status": p["status"],
                             "samples/s": p["samples_per_sec"],
                             "middle half": _middle(p, "samples_per_sec", 1, lambda v: fixed(v, 0)),
                             "rounds": _timing(p, "rounds"),
                             # what you waited: under load, lower than what the device does
                             "wall-clock samples/s": _timing(p, "wall_samples_per_sec")}
                            for p in points])


def sweep_step_time_chart(points: Sequence[dict], fit: dict | None,
                          crossover: float | None) -> Chart:
    ok = _ok(points)
    sizes = [p["batch_size"] for p in ok]
    fig = go.Figure(go.Scatter(x=sizes, y=[p["step_time_s"] * 1e3 for p in ok],
                               mode="markers", name="measured (median step)",
                               error_y=_error_bars(ok, "step_time_s", 1e3),
                               marker=dict(size=10, color=OKABE_ITO[0])))
    alt = "Step time against batch size."
    if fit and fit.get("t0_s") is not None and sizes:
        xs = sorted(set([min(sizes), max(sizes)] + sizes))
        fig.add_trace(go.Scatter(
            x=xs, y=[(fit["t0_s"] + fit["t1_s_per_sample"] * b) * 1e3 for b in xs], mode="lines",
            name=f"fit t(B) = {sig(fit['t0_s'] * 1e3)} ms + {sig(fit['t1_s_per_sample'] * 1e6)} µs·B "
                 "(predicted)", line=dict(color=OKABE_ITO[1], dash="dash")))
        fig.add_hline(y=fit["t0_s"] * 1e3, line=dict(color=OKABE_ITO[2], dash="dot"),
                      annotation_text="fixed overhead t0")
        alt = (f"Step time is about {sig(fit['t0_s'] * 1e3)} ms of fixed overhead plus "
               f"{sig(fit['t1_s_per_sample'] * 1e6)} µs per sample (R² {fixed(fit['r2_time'], 2)}).")
        if crossover:
            _vline(fig, crossover, f" overhead = compute at B ≈ {crossover:.0f}", OKABE_ITO[4],
                   inside=True)
            alt += f" The two are equal at batch {crossover:.0f}."
    layout(fig, "Step time: fixed overhead + per-sample work", "Batch size (log2 scale)",
           "Time per optimizer step (ms)", subtitle=clock_note(points), rangemode="tozero")
    _log2_axis(fig, [p["batch_size"] for p in points])
    return Chart(fig, alt, [{"batch size": p["batch_size"], "step time (ms)": p["step_time_s"] * 1e3,
                             "middle half (ms)": _middle(p, "step_time_s", 1e3, sig)}
                            for p in ok])


def sweep_epoch_time_chart(points: Sequence[dict], train_samples: int) -> Chart:
    ok = _ok(points)
    rows = [{"batch size": p["batch_size"],
             "epoch time (s)": math.ceil(train_samples / p["batch_size"]) * p["step_time_s"]}
            for p in ok]
    fig = go.Figure(go.Scatter(x=[r["batch size"] for r in rows], y=[r["epoch time (s)"] for r in rows],
                               mode="lines+markers", name="ceil(N/B) × step time",
                               line=dict(color=OKABE_ITO[0])))
    layout(fig, "Time per epoch", "Batch size (log2 scale)", "Seconds per epoch",
           subtitle="ceil(N / B) × the measured step time", rangemode="tozero")
    _log2_axis(fig, [p["batch_size"] for p in points])
    fig.update_yaxes(type="log", dtick=1, title="Seconds per epoch (log)")
    alt = (f"Time per epoch falls from {sig(rows[0]['epoch time (s)'])} s at batch "
           f"{rows[0]['batch size']} to {sig(rows[-1]['epoch time (s)'])} s at batch "
           f"{rows[-1]['batch size']}." if rows else "No measured points yet.")
    return Chart(fig, alt, rows)


def sweep_utilisation_chart(points: Sequence[dict]) -> Chart:
    ok = _ok(points)
    fig = go.Figure(go.Scatter(
        x=[p["batch_size"] for p in ok], y=[(p["share_of_peak"] or 0) * 100 for p in ok],
        mode="lines+markers", name="achieved FLOP/s, % of peak", line=dict(color=OKABE_ITO[2])))
    if any(p["utilization_pct"] is not None for p in ok):
        fig.add_trace(go.Scatter(
            x=[p["batch_size"] for p in ok], y=[p["utilization_pct"] for p in ok],
            mode="lines+markers", name="NVML utilisation (% of time a kernel ran)",
            line=dict(color=OKABE_ITO[3], dash="dash")))
    layout(fig, "Utilisation: busy time vs useful work", "Batch size (log2 scale)", "Percent")
    _log2_axis(fig, [p["batch_size"] for p in points])
    alt = (f"Achieved FLOP/s rise from {percent(ok[0]['share_of_peak'] or 0)} of peak at batch "
           f"{ok[0]['batch_size']} to {percent(ok[-1]['share_of_peak'] or 0)} at batch "
           f"{ok[-1]['batch_size']}." if ok else "No measured points yet.")
    return Chart(fig, alt, [{"batch size": p["batch_size"], "% of peak FLOP/s":
                             (p["share_of_peak"] or 0) * 100, "NVML %": p["utilization_pct"]}
                            for p in ok])


def memory_breakdown_chart(points: Sequence[dict], fit: dict | None, budget: int | None,
                           predicted_max: int | None) -> Chart:
    """Stacked memory components per measured batch, the M(B) fit, the budget and OOM points."""
    ok = [p for p in _ok(points) if p["memory_breakdown"]]
    sizes = [p["batch_size"] for p in ok]
    fig = go.Figure()
    for (key, label), colour in zip(BREAKDOWN, BREAKDOWN_COLOURS, strict=True):
        ys = [(p["memory_breakdown"].get(key) or 0) / MIB for p in ok]
        if not any(ys):  # nothing of it here (SGD's optimizer state, a CPU's allocator cache):
            continue     # no band of zero height, no legend entry for it
        # stacked areas: bars do not suit a log axis
        fig.add_trace(go.Scatter(x=sizes, y=ys, name=label, mode="lines+markers",
                                 stackgroup="memory", line=dict(color=colour, width=1)))
    top = max([p["peak_memory_bytes"] or 0 for p in ok] + [budget or 0]) / MIB
    alt = "Memory by component against batch size."
    if fit and fit.get("m0_bytes") is not None:
        xs = sorted(set(sizes + ([predicted_max] if predicted_max else [])))
        fig.add_trace(go.Scatter(
            x=xs, y=[(fit["m0_bytes"] + fit["m_bytes_per_sample"] * b) / MIB for b in xs],
            mode="lines", name=f"fit M(B) = {sig(fit['m0_bytes'] / MIB)} MiB + "
                               f"{sig(fit['m_bytes_per_sample'] / 1024)} KiB·B (R² "
                               f"{fixed(fit['r2_memory'], 3)}, predicted)",
            line=dict(color="#000000", dash="dash")))
        alt = (f"Memory is {sig(fit['m0_bytes'] / MIB)} MiB that does not depend on the batch plus "
               f"{sig(fit['m_bytes_per_sample'] / 1024)} KiB per sample (R² {fixed(fit['r2_memory'], 3)}).")
    if budget:
        fig.add_hline(y=budget / MIB, line=dict(color=OOM_COLOUR, dash="dot"),
                      annotation_text=f"budget {setting(budget / MIB, 4)} MiB",
                      annotation_position="top left")
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
    rows = [{"batch size": p["batch_size"], "status": p["status"],
             **{label: (p["memory_breakdown"] or {}).get(key) for key, label in BREAKDOWN},
             "peak (B)": p["peak_memory_bytes"], "message": p["message"]} for p in points]
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
        fig.add_trace(go.Scatter(
            x=xs, y=[fit.predict(b) / MIB for b in xs], mode="lines",
            name=f"fit through probe(s) {numbers}: M(B) = {sig(fit.intercept / MIB)} MiB + "
                 f"{sig(fit.slope / 1024)} KiB·B (predicted)",
            line=dict(color="#000000", dash="dash"), hoverinfo="skip"))
        alt += (f" The fit through probe(s) {numbers}: {sig(fit.intercept / MIB)} MiB plus "
                f"{sig(fit.slope / 1024)} KiB a sample.")
    if ok:
        fig.add_trace(go.Scatter(
            x=[p["batch_size"] for p in ok], y=[p["peak_memory_bytes"] / MIB for p in ok],
            mode="markers+text", name="a probe that ran (measured)",
            text=[str(p["probe"]) for p in ok], textposition="top left",
            marker=dict(color=OKABE_ITO[0], size=10),
            hovertext=[f"probe {p['probe']}: batch {p['batch_size']:,}, "
                       f"{sig(p['peak_memory_bytes'] / MIB)} MiB ({p['reason']})" for p in ok],
            hoverinfo="text"))
    top = max([p["peak_memory_bytes"] for p in ok] + [capacity or 0], default=0) / MIB
    if capacity:
        fig.add_hline(y=capacity / MIB, line=dict(color=OOM_COLOUR, dash="dot"),
                      annotation_text=f"budget {setting(capacity / MIB, 4)} MiB",
                      annotation_position="top left")
        if margin:
            usable = capacity * (1 - margin) / MIB
            fig.add_hline(y=usable, line=dict(color=OKABE_ITO[4], dash="dot"),
                          annotation_text=f"{percent(margin, 0)} kept free",
                          annotation_position="bottom left")
        alt += f" The budget is {setting(capacity / MIB, 4)} MiB, {percent(margin, 0)} of it kept free."
    if chosen:
        _vline(fig, chosen, f"largest that fits: {chosen:,} (verified)", OKABE_ITO[2],
               side="right", inside=True)
        alt += f" Batch {chosen:,} is the largest that fits, verified by a real step."
    _oom_marks(fig, probes, top * 1.05 if top else 1)
    ooms = [p["batch_size"] for p in probes if p["status"] == "oom"]
    if ooms:
        alt += f" Out of memory at batch {', '.join(f'{b:,}' for b in sorted(ooms))}."
    layout(fig, "Predict from a few probes, verify with a real step", "Batch size (log2 scale)",
           "Peak memory (MiB)", subtitle="numbers: the order the probes ran")
    fig.update_layout(hovermode="closest")
    _log2_axis(fig, sizes)
    rows = [{"probe": p["probe"], "batch size": p["batch_size"], "status": p["status"],
             "peak (B)": p["peak_memory_bytes"], "why": p["reason"]} for p in probes]
    return Chart(fig, alt, rows)
