"""A profiled step's timeline at each batch size, the step split into a fixed and a growing part,
and what cutting the overhead did (bsdemo.engine.profile's records)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from bsdemo.charts.style import OKABE_ITO, Chart, layout
from bsdemo.profiling import technique_name
from bsdemo.recipes.profile import cut_title, short
from bsdemo.units import fixed, percent

PARTS = {  # a span's part -> (legend name, colour)
    "forward": ("forward operators", OKABE_ITO[0]),
    "backward": ("backward operators", OKABE_ITO[1]),
    "optimizer": ("optimizer", OKABE_ITO[2]),
    "other": ("other operators", OKABE_ITO[4]),
    "gap": ("no operator running (Python between them)", "#BBBBBB"),
    "kernel": ("GPU kernels", OKABE_ITO[5]),
}


def _ok(points: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted((p for p in points if p.get("status") == "ok"), key=lambda p: p["batch_size"])


def profile_timeline_chart(points: Sequence[Mapping[str, Any]]) -> Chart:
    """One typical profiled step per batch size, a row each (a GPU's kernels a row under it),
    drawn as shares of that step's own length so the small step's pattern shows beside the
    large one's: what ran, when, and the gaps between (the hover gives each span in ms)."""
    ok = _ok(points)
    fig = go.Figure()
    shown: set[str] = set()
    rows = []
    for p in reversed(ok):  # the smallest batch on top
        whole = p["shown_step_us"] or 1.0
        head = f"batch {p['batch_size']}<br>{fixed(whole / 1e3, 2)} ms"
        lanes = [(head if not p.get("kernel_timeline") else f"{head} · CPU", p["timeline"])]
        if p.get("kernel_timeline"):
            lanes.append((f"batch {p['batch_size']} · GPU", p["kernel_timeline"]))
        for lane, spans in reversed(lanes):
            rows.append(lane)
            by_part: dict[str, list] = {}
            for name, part, start, dur in spans:
                by_part.setdefault(part, []).append((name, start, dur))
            for part, items in by_part.items():
                label, colour = PARTS.get(part, PARTS["other"])
                fig.add_trace(
                    go.Bar(
                        y=[lane] * len(items),
                        x=[100 * d / whole for _, _, d in items],
                        base=[100 * s / whole for _, s, _ in items],
                        orientation="h",
                        name=label,
                        marker=dict(color=colour, line=dict(width=0)),
                        legendgroup=part,
                        showlegend=part not in shown,
                        legendrank=list(PARTS).index(part) if part in PARTS else 99,
                        hovertext=[f"{short(n)}: {fixed(d / 1e3, 3)} ms" for n, _, d in items],
                        hoverinfo="text",
                    )
                )
                shown.add(part)
    layout(
        fig,
        "Where one training step's time goes",
        "Share of the step (%)",
        "",
        subtitle="torch.profiler · the median profiled step at each batch",
    )
    fig.update_layout(
        barmode="overlay", hovermode="closest", bargap=0.25, height=170 + 70 * max(len(rows), 1)
    )
    fig.update_xaxes(range=[0, 100])
    fig.update_yaxes(categoryorder="array", categoryarray=rows)
    if ok:
        small = ok[0]
        gap = small["parts_us"].get("gap", 0.0) / small["shown_step_us"]
        alt = (
            f"Timelines of one profiled step at batch sizes "
            f"{', '.join(str(p['batch_size']) for p in ok)}, each as shares of its own "
            f"length. At batch {small['batch_size']}, {percent(gap, 0)} of the step has no operator "
            "running."
        )
    else:
        alt = "No profiled step yet."
    table = [
        {
            "batch size": p["batch_size"],
            "part": PARTS.get(part, PARTS["other"])[0],
            "operator": short(name),
            "start (ms)": round(start / 1e3, 4),
            "duration (ms)": round(dur / 1e3, 4),
        }
        for p in ok
        for name, part, start, dur in p["timeline"]
    ]
    return Chart(fig, alt, table)


def profile_split_chart(
    points: Sequence[Mapping[str, Any]],
    end: Mapping[str, Any] | None,
    sweep_fit: Mapping[str, float] | None = None,
) -> Chart:
    """Per batch size: the unprofiled step split by its own t0 + t1·B into the part that stays
    fixed as the batch grows and the part that grows with it; the trace's own split (profiled,
    so its fixed part carries the profiler's cost) and the sweep's t0 + t1·B beside."""
    ok = _ok(points)
    plain, split = (end or {}).get("plain_fit"), (end or {}).get("split")
    fig = go.Figure()
    labels = [str(p["batch_size"]) for p in ok]
    table = []
    if plain and ok:
        t0_ms = plain["t0_us"] / 1e3
        growing = [plain["t1_us"] * p["batch_size"] / 1e3 for p in ok]
        fig.add_trace(go.Bar(x=labels, y=[t0_ms] * len(ok), name="fixed: t0", marker_color="#BBBBBB"))
        fig.add_trace(
            go.Bar(x=labels, y=growing, name="grows with the batch: t1·B", marker_color=OKABE_ITO[0])
        )
        table = [
            {
                "batch size": p["batch_size"],
                "fixed (ms)": round(t0_ms, 4),
                "growing (ms)": round(g, 4),
                "unprofiled step (ms)": round(p["plain_own_s"]["median"] * 1e3, 4),
                "trace: fixed (ms)": round(split["t0_us"] / 1e3, 4) if split else None,
                "trace: growing (ms)": (round(split["t1_us"] * p["batch_size"] / 1e3, 4) if split else None),
            }
            for p, g in zip(ok, growing, strict=True)
        ]
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=[p["plain_own_s"]["median"] * 1e3 for p in ok],
            mode="markers",
            name="unprofiled step (median)",
            marker=dict(symbol="diamond", size=14, color="black"),
        )
    )
    if split and ok:
        fig.add_trace(
            go.Scatter(
                x=labels,
                y=[split["t0_us"] / 1e3] * len(ok),
                mode="markers",
                name="the trace's fixed part (profiled)",
                marker=dict(symbol="line-ew-open", size=30, color=OKABE_ITO[1], line=dict(width=3)),
            )
        )
    if sweep_fit and sweep_fit.get("t0_s") is not None and ok:
        fig.add_trace(
            go.Scatter(
                x=labels,
                y=[(sweep_fit["t0_s"] + sweep_fit["t1_s_per_sample"] * p["batch_size"]) * 1e3 for p in ok],
                mode="markers",
                name="the sweep's fit t0 + t1·B",
                marker=dict(symbol="line-ew-open", size=30, color=OKABE_ITO[3], line=dict(width=3)),
            )
        )
    layout(
        fig,
        "The step split: fixed and growing",
        "Batch size",
        "Milliseconds per step",
        subtitle="unprofiled steps, own clock · t0 + t1·B through both",
    )
    fig.update_layout(barmode="stack", hovermode="x unified")
    fig.update_xaxes(type="category")
    alt = (
        "Step time per batch size split into a fixed part and a part that grows with the batch."
        if plain
        else "The split needs two batch sizes that ran."
    )
    return Chart(fig, alt, table)


def cut_chart(cuts: Sequence[Mapping[str, Any]]) -> Chart:
    """Samples/s of eager steps and of the same steps with the overhead cut, per batch size."""
    ok = sorted((c for c in cuts if c.get("status") == "ok"), key=lambda c: c["batch_size"])
    name = technique_name(ok[0]["technique"]) if ok else "cut"
    labels = [str(c["batch_size"]) for c in ok]
    fig = go.Figure(
        [
            go.Bar(
                x=labels, y=[c["eager_samples_per_sec"] for c in ok], name="eager", marker_color="#777777"
            ),
            go.Bar(
                x=labels,
                y=[c["cut_samples_per_sec"] for c in ok],
                name=name,
                marker_color=OKABE_ITO[2],
                text=[f"{fixed(c['speedup'], 2)}×" for c in ok],
                textposition="outside",
            ),
        ]
    )
    layout(
        fig,
        cut_title(cuts),
        "Batch size",
        "Samples per second (measured)",
        subtitle="alternating blocks · compile time not counted",
    )
    fig.update_layout(barmode="group")
    fig.update_xaxes(type="category")
    alt = (
        "; ".join(f"batch {c['batch_size']}: {fixed(c['speedup'], 2)}× the eager samples/s" for c in ok)
        or "No overhead cut measured."
    )
    table = [
        {
            "batch size": c["batch_size"],
            "eager samples/s": round(c["eager_samples_per_sec"]),
            f"{name} samples/s": round(c["cut_samples_per_sec"]),
            "speed-up": round(c["speedup"], 3),
            "compile/capture (s)": round(c["prepare_s"], 2),
        }
        for c in ok
    ]
    return Chart(fig, alt, table)
