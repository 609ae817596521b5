"""Lesson 10's charts past one device: a data-parallel step split into compute and all-reduce
against one process's, and a pipeline's schedule (the bubble) and per-stage memory."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from bsdemo.charts.style import OKABE_ITO, Chart, layout
from bsdemo.units import MIB, fixed, percent

COMPUTE, REDUCE = OKABE_ITO[0], OKABE_ITO[1]
FORWARD, BACKWARD = OKABE_ITO[0], OKABE_ITO[2]
MEASURED = "#BBBBBB"  # a whole step as the wall clock measured it


def ddp_chart(r: dict[str, Any]) -> Chart:
    """Horizontal bars: one process's step on the global batch, and the group's step split into
    compute (the slowest process's) and all-reduce."""
    group = f"{r['processes']} processes × batch {r['per_process_batch_size']}"
    one = f"1 process × batch {r['global_batch_size']}"
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            y=[one, group],
            x=[r["single_process_step_s"] * 1e3, r["compute_s"] * 1e3],
            orientation="h",
            name="forward + backward",
            marker_color=COMPUTE,
        )
    )
    fig.add_trace(
        go.Bar(
            y=[group],
            x=[r["allreduce_s"] * 1e3],
            orientation="h",
            name="all-reduce of the gradients",
            marker_color=REDUCE,
        )
    )
    layout(
        fig,
        "One step of the same global batch",
        "Milliseconds per step (median)",
        "",
        subtitle=f"global batch {r['global_batch_size']}; "
        + (
            "timing too noisy to read (see below)"
            if r.get("too_noisy")
            else f"scaling efficiency {percent(r['scaling_efficiency'], 0)}"
        ),
    )
    fig.update_layout(barmode="stack", hovermode="closest", height=260)
    alt = (
        f"A step of global batch {r['global_batch_size']}: one process "
        f"{fixed(r['single_process_step_s'] * 1e3, 1)} ms; {r['processes']} processes "
        f"{fixed(r['compute_s'] * 1e3, 1)} ms compute plus "
        f"{fixed(r['allreduce_s'] * 1e3, 1)} ms all-reduce."
    )
    table = [
        {"setup": one, "compute ms": r["single_process_step_s"] * 1e3, "all-reduce ms": 0.0},
        {"setup": group, "compute ms": r["compute_s"] * 1e3, "all-reduce ms": r["allreduce_s"] * 1e3},
    ]
    return Chart(fig, alt, table)


def pipeline_chart(r: dict[str, Any]) -> Chart:
    """The GPipe schedule drawn from the measured stage times: a row per stage, a block per
    micro-batch's forward and backward pass; the white gaps are the bubble."""
    fig = go.Figure()
    for kind, colour in (("forward", FORWARD), ("backward", BACKWARD)):
        blocks = [b for b in r["schedule"] if b["pass"] == kind]
        fig.add_trace(
            go.Bar(
                y=[f"stage {b['stage']}" for b in blocks],
                x=[(b["end"] - b["start"]) * 1e3 for b in blocks],
                base=[b["start"] * 1e3 for b in blocks],
                orientation="h",
                name=kind,
                marker=dict(color=colour, line=dict(color="white", width=1)),
                text=[str(b["micro_batch"] + 1) for b in blocks],
                textposition="inside",
                insidetextanchor="middle",
                hovertemplate="micro-batch %{text}: %{base:.2f}–%{x:.2f} ms<extra>" + kind + "</extra>",
            )
        )
    # the steps as the wall clock measured them, beside the schedule of their compute: the
    # text quotes both (unless the timing was too noisy to read, when neither is drawn)
    measured = (
        []
        if r.get("too_noisy")
        else [
            ("measured: pipelined step", r["step_s"]),
            ("measured: one process", r["single_process_step_s"]),
        ]
    )
    if measured:
        fig.add_trace(
            go.Bar(
                y=[name for name, _ in measured],
                x=[t * 1e3 for _, t in measured],
                orientation="h",
                name="a whole step, wall clock",
                marker=dict(color=MEASURED),
                text=[f"{fixed(t * 1e3, 1)} ms" for _, t in measured],
                textposition="auto",
                hovertemplate="%{y}: %{x:.1f} ms<extra></extra>",
            )
        )
    layout(
        fig,
        f"A pipelined step: the stages idle {percent(r['bubble'], 0)} of its compute schedule",
        "Milliseconds into the step",
        "",
        subtitle=f"{r['micro_batches']} micro-batches, scheduled from the measured stage "
        f"times (GPipe's ideal bubble {percent(r['ideal_bubble'], 0)})"
        + (" · grey: whole steps, wall clock" if measured else ""),
    )
    fig.update_layout(barmode="overlay", hovermode="closest", height=280 + 40 * len(measured))
    fig.update_yaxes(autorange="reversed")
    alt = (
        f"Two stages' compute scheduled over {fixed(r['schedule_step_s'] * 1e3, 1)} ms: forward "
        f"passes of {r['micro_batches']} micro-batches, then their backward passes in "
        f"reverse; the stages idle {percent(r['bubble'], 0)} of it."
        + "".join(f" {name[:1].upper() + name[1:]}: {fixed(t * 1e3, 1)} ms." for name, t in measured)
    )
    table = [
        {
            "stage": b["stage"],
            "pass": b["pass"],
            "micro-batch": b["micro_batch"] + 1,
            "start ms": b["start"] * 1e3,
            "end ms": b["end"] * 1e3,
        }
        for b in r["schedule"]
    ]
    return Chart(fig, alt, table)


def pipeline_memory_chart(r: dict[str, Any]) -> Chart:
    """Each stage's parameters and saved activations beside the whole model's in one process."""
    names = [f"stage {s}" for s in range(r["stages"])] + ["one process"]
    params = [*r["stage_parameter_bytes"], r["single_parameter_bytes"]]
    saved = [*r["stage_activation_bytes"], r["single_activation_bytes"]]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=names, y=[p / MIB for p in params], name="parameters", marker_color=OKABE_ITO[0]))
    fig.add_trace(
        go.Bar(x=names, y=[a / MIB for a in saved], name="activations saved", marker_color=OKABE_ITO[1])
    )
    layout(
        fig,
        "Memory per process",
        "Process",
        "MiB",
        subtitle="accounted; activations: all micro-batches in flight",
    )
    fig.update_layout(barmode="stack", hovermode="closest", height=300)
    alt = (
        "Memory: "
        + "; ".join(
            f"{n} {fixed((p + a) / MIB, 2)} MiB" for n, p, a in zip(names, params, saved, strict=True)
        )
        + "."
    )
    table = [
        {"process": n, "parameters MiB": p / MIB, "activations MiB": a / MIB}
        for n, p, a in zip(names, params, saved, strict=True)
    ]
    return Chart(fig, alt, table)
