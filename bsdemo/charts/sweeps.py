"""Quantities against batch size from a sweep's points (a log2 axis): throughput, step time
and its fit, time per epoch, utilisation, and memory by component."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

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


NORM_LABELS = {"none": "no normalisation", "batch": "BatchNorm", "group": "GroupNorm",
               "layer": "LayerNorm"}
NORM_STYLES = {"none": (OKABE_ITO[7], "dot", "circle"), "batch": (OOM_COLOUR, "solid", "x"),
               "group": (OKABE_ITO[0], "dash", "square"), "layer": (OKABE_ITO[2], "dashdot",
                                                                    "diamond")}


def norms_chart(cells: Sequence[dict]) -> Chart:
    """Test accuracy (evaluation mode) against batch size, one line per normalisation; the
    BatchNorm line is also drawn with batch statistics (training mode) where measured."""
    fig = go.Figure()
    norms = list(dict.fromkeys(c["norm"] for c in cells))
    for norm in norms:
        mine = [c for c in cells if c["norm"] == norm and c["test_accuracy"] is not None]
        colour, dash, symbol = NORM_STYLES[norm]
        fig.add_trace(go.Scatter(
            x=[c["batch_size"] for c in mine], y=[100 * c["test_accuracy"] for c in mine],
            mode="lines+markers", name=NORM_LABELS[norm],
            line=dict(color=colour, dash=dash), marker=dict(symbol=symbol, size=9)))
        if norm == "batch" and mine:
            fig.add_trace(go.Scatter(
                x=[c["batch_size"] for c in mine],
                y=[100 * c["train_mode_test_accuracy"] for c in mine], mode="lines+markers",
                name="BatchNorm, batch statistics at test", line=dict(color=colour, dash="dot",
                                                                      width=1),
                marker=dict(symbol="x-open", size=8)))
    layout(fig, "Test accuracy against batch size, per normalisation", "Batch size (log2 scale)",
           "Test accuracy (%)", subtitle="the same model, data, seed and epochs in every run",
           range=[0, 102])
    _log2_axis(fig, [c["batch_size"] for c in cells])
    rows = [{"normalisation": NORM_LABELS[c["norm"]], "batch": c["batch_size"],
             "test accuracy (%)": None if c["test_accuracy"] is None
             else round(100 * c["test_accuracy"], 1),
             "with batch statistics (%)": round(100 * c["train_mode_test_accuracy"], 1),
             "changed by batch-mates (%)": round(100 * c["partner_changed"], 1)} for c in cells]
    smallest = min((c["batch_size"] for c in cells), default=None)
    at_small = ", ".join(f"{NORM_LABELS[c['norm']]} {100 * c['test_accuracy']:.0f}%"
                         for c in cells if c["batch_size"] == smallest and c["test_accuracy"])
    alt = (f"Test accuracy against batch size for {', '.join(NORM_LABELS[n] for n in norms)}. "
           + (f"At batch {smallest}: {at_small}." if at_small else ""))
    return Chart(fig, alt, rows)


def norms_table(cells: Sequence[dict]) -> list[dict[str, Any]]:
    """Test accuracy (%) per normalisation (a row) and batch size (a column), then BatchNorm
    with batch statistics at test and the share of its predictions the batch-mates changed."""
    sizes = sorted({c["batch_size"] for c in cells})
    rows = []
    for norm in dict.fromkeys(c["norm"] for c in cells):
        mine = {c["batch_size"]: c for c in cells if c["norm"] == norm}
        rows.append({"normalisation": NORM_LABELS[norm]} | {
            f"batch {b}": None if b not in mine or mine[b]["test_accuracy"] is None
            else round(100 * mine[b]["test_accuracy"], 1) for b in sizes})
        if norm == "batch":
            rows.append({"normalisation": "BatchNorm, batch statistics at test"} | {
                f"batch {b}": round(100 * mine[b]["train_mode_test_accuracy"], 1)
                for b in sizes if b in mine})
            rows.append({"normalisation": "BatchNorm, predictions changed by batch-mates"} | {
                f"batch {b}": round(100 * mine[b]["partner_changed"], 1) for b in sizes
                if b in mine})
    return rows


def noise_charts(result: dict) -> tuple[Chart, Chart]:
    """The variance of mini-batch gradients against the batch (log-log) with tr(S)/B and the
    finite-population curve; and the cosine between a mini-batch gradient and the full one."""
    sizes, variances = result["batch_sizes"], result["variances"]
    n, trace = result["train_samples"], result["trace_sigma"]
    quarters = 4 * math.ceil(math.log2(max(sizes)))  # the curves at every quarter power of two
    dense = sorted({*sizes, *(round(2 ** (k / 4)) for k in range(quarters + 1))})
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=sizes, y=variances, mode="markers", name="measured",
                             marker=dict(size=11, color=[batch_colour(b) for b in sizes],
                                         line=dict(width=1, color="#333333"))))
    fig.add_trace(go.Scatter(x=dense, y=[trace / b for b in dense], mode="lines",
                             name="tr(Σ)/B: 1/B from the batch-1 variance",
                             line=dict(color=OKABE_ITO[0], dash="dash")))
    fig.add_trace(go.Scatter(x=dense, y=[trace / b * (n - b) / (n - 1) for b in dense],
                             mode="lines", name=f"× (N − B)/(N − 1), drawn from N = {n:,}",
                             line=dict(color=OKABE_ITO[1], dash="dot")))
    layout(fig, "Gradient variance against batch size", "Batch size (log scale)",
           "E|g_B − G|² (log scale)",
           subtitle=f"{result['draws']} draws per batch size; fitted slope "
                    f"{fixed(result['variance_slope'], 2)}")
    fig.update_yaxes(type="log", dtick=1)  # a label per power of ten, none between
    _log2_axis(fig, sizes)
    alt = (f"Gradient variance falls from {sig(variances[0])} at batch {sizes[0]} to "
           f"{sig(variances[-1])} at batch {sizes[-1]}, a log-log slope of "
           f"{fixed(result['variance_slope'], 2)} (1/B would be −1).")
    rows = [{"batch": b, "variance": v, "tr(S)/B": trace / b,
             "with finite population": trace / b * (n - b) / (n - 1), "cosine to G": c}
            for b, v, c in zip(sizes, variances, result["cosines"], strict=True)]
    cos = go.Figure(go.Scatter(x=sizes, y=result["cosines"], mode="lines+markers",
                               name="cos(g_B, G)", line=dict(color=OKABE_ITO[2]),
                               marker=dict(size=10, color=[batch_colour(b) for b in sizes])))
    layout(cos, "How well a mini-batch points the way", "Batch size (log2 scale)",
           "Cosine to the full gradient", range=[0, 1.02])
    _log2_axis(cos, sizes)
    return Chart(fig, alt, rows), Chart(cos, (
        f"The cosine between a mini-batch gradient and the full gradient rises from "
        f"{fixed(result['cosines'][0], 2)} at batch {sizes[0]} to {fixed(result['cosines'][-1], 2)} at "
        f"batch {sizes[-1]}."), rows)


def critical_chart(result: dict) -> Chart:
    """Steps to the target loss against the batch (log-log): the measured runs, perfect scaling
    through the smallest batch that arrived, McCandlish's S_min (1 + B_crit / B) through the
    measured critical batch, and the critical batch and B_simple marked."""
    sizes, steps = result["batch_sizes"], result["steps"]
    arrived = [(b, s) for b, s in zip(sizes, steps, strict=True) if s]
    fig = go.Figure()
    if arrived:
        xs, ys = zip(*arrived, strict=True)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name="measured",
                                 line=dict(color=OKABE_ITO[0]),
                                 marker=dict(size=11, color=[batch_colour(b) for b in xs],
                                             line=dict(width=1, color="#333333"))))
        b0, s0 = arrived[0]
        fig.add_trace(go.Scatter(x=sizes, y=[s0 * b0 / b for b in sizes], mode="lines",
                                 name="perfect scaling: 2× the batch, ½ the steps",
                                 line=dict(color="#666666", dash="dot")))
    failed = [(b, status) for b, s, status in zip(sizes, steps, result["statuses"], strict=True)
              if not s]
    if failed:
        top = max([s for s in steps if s] or [result["max_steps"]])
        fig.add_trace(go.Scatter(x=[b for b, _ in failed], y=[top] * len(failed),
                                 mode="markers+text", text=[status for _, status in failed],
                                 textposition="bottom center", name="never reached the target",
                                 marker=dict(symbol="x", size=13, color=OOM_COLOUR)))
    s_min, b_crit, b_simple = result["s_min"], result["b_crit"], result["b_simple"]
    if b_crit:
        fig.add_trace(go.Scatter(x=sizes, y=[s_min * (1 + b_crit / b) for b in sizes],
                                 mode="lines", name="S_min (1 + B_crit / B), McCandlish et al.",
                                 line=dict(color=OKABE_ITO[6], dash="dash")))
        # the smaller of the two labelled to the left of its line, the larger to the right
        # inside the plot's top edge: above it, a narrow screen's subtitle runs into them
        _vline(fig, b_crit, f"critical batch ≈ {b_crit:.0f} ", OKABE_ITO[2],
               "right" if b_crit <= b_simple else "left", inside=True)
    if b_simple and sizes[0] <= b_simple <= sizes[-1]:
        _vline(fig, b_simple, f" B_simple ≈ {b_simple:.0f}", OKABE_ITO[3],
               "left" if not b_crit or b_crit <= b_simple else "right", inside=True)
    layout(fig, "Steps to the target loss against batch size", "Batch size (log2 scale)",
           "Optimizer steps (log scale)",
           subtitle=f"Training loss {setting(result['target_loss'])}; lr: {result['rule']} rule from "
                    f"batch {result['reference_batch']} at {setting(result['reference_lr'])}"
                    + (f", at most {setting(result['lr_cap'])}" if result.get("lr_cap") else ""))
    fig.update_yaxes(type="log", dtick=1)
    _log2_axis(fig, sizes)
    rows = [{"batch": b, "lr": lr, "steps to target": s, "samples": s * b if s else None,
             "ended": status} for b, lr, s, status in
            zip(sizes, result["lrs"], steps, result["statuses"], strict=True)]
    alt = (f"Optimizer steps to a training loss of {setting(result['target_loss'])} against batch size: "
           + ", ".join(f"batch {b}: {s if s else 'not reached'}" for b, s in
                       zip(sizes, steps, strict=True))
           + (f". The critical batch is about {b_crit:.0f}" if b_crit else "")
           + f"; B_simple at initialisation is about {b_simple:.0f}.")
    return Chart(fig, alt, rows)
