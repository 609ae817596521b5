"""A run's measurements at each step against steps, samples, epochs or seconds: throughput,
peak memory and GPU utilisation, in the chart language of `style`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bsdemo.charts.runtraces import _fade, _xy, run_label
from bsdemo.charts.style import X_AXES, Chart, Draft, ema, empty, layout, log_x, styles
from bsdemo.runs import JobSnapshot, cpu_rates
from bsdemo.units import MIB, sig


def _per_step_chart(
    runs: Sequence[JobSnapshot],
    x_axis: str,
    y_field: str,
    title: str,
    y_title: str,
    scale: float = 1.0,
    unit: str = "",
    smoothing: float = 0.0,
    log: bool = False,
    subtitle: str | None = None,
    y_range: list[float] | None = None,
) -> Chart:
    x_field, x_title = X_AXES[x_axis]
    fig = Draft()
    table, parts, drawn = [], [], []
    for snap, style in zip(runs, styles(runs), strict=True):
        pts = [
            (x, y / scale)
            for x, y in zip(*_xy(snap.steps[x_field], snap.steps[y_field], log), strict=True)
            if y is not None
        ]
        if not pts:
            continue
        label = run_label(snap)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        fig.add_trace(
            dict(
                type="scatter",
                x=xs,
                y=ys,
                mode="lines",
                name=label,
                legendgroup=str(snap.run_number),
                **_fade(snap, 0.3 if smoothing > 0 else 1.0),
                showlegend=smoothing <= 0,
                line=dict(color=style.colour, dash=style.dash, width=1 if smoothing > 0 else 2),
            )
        )
        main = ys
        if smoothing > 0:
            main = ema(ys, smoothing)
            fig.add_trace(
                dict(
                    type="scatter",
                    x=xs,
                    y=main,
                    mode="lines",
                    name=label,
                    legendgroup=str(snap.run_number),
                    **_fade(snap),
                    line=dict(color=style.colour, dash=style.dash, width=2),
                )
            )
        drawn.append((xs, main))
        values = sorted(ys)
        parts.append(f"{label}: median {sig(values[len(values) // 2])}{unit}")
        table += [{"run": label, x_title: x, title: y} for x, y in pts]
    layout(fig, title, x_title, y_title, rangemode="tozero")
    if subtitle:  # short, one line: the title's room is left as it is
        fig.update_layout(title=dict(subtitle=dict(text=subtitle)))
    if y_range:
        fig.update_yaxes(range=y_range)
    if log:
        log_x(fig)
    else:
        fig.update_xaxes(rangemode="nonnegative")
    if not drawn:
        empty(fig, "Appears here once a run measures it.")
    alt = (
        (f"{title} against {x_title.lower()}. " + "; ".join(parts) + ".")
        if parts
        else f"{title}: no data for these runs."
    )
    return Chart(fig.figure(), alt, table)


def throughput_chart(
    runs: Sequence[JobSnapshot], x_axis: str = "steps", smoothing: float = 0.0, log: bool = False
) -> Chart:
    """Each run's samples/s per step. Where every run drawn has its steps' thread CPU time (a
    one-thread CPU), by that clock, so runs measured under different loads (a stored run from a
    quiet hour, a live one in class) are drawn alike; otherwise by the wall clock, and with more
    than one run the subtitle says their speeds are each their own conditions'."""
    # no robust clipping here: a fast step is as real as a slow one (loss spikes are the noise
    # a robust range is for)
    timed = [s for s in runs if any(s.steps.get("samples_per_sec") or ())]
    if timed and all(any(c for c in s.steps.get("cpu_time_s") or ()) for s in timed):
        # short: a subtitle does not wrap, and a half-width chart at projector size cuts it
        return _per_step_chart(
            [_by_cpu_time(s) for s in runs],
            x_axis,
            "cpu_samples_per_sec",
            "Throughput",
            "Samples per second (measured)",
            unit=" samples/s",
            smoothing=smoothing,
            log=log,
            subtitle="by the training thread's CPU time",
        )
    return _per_step_chart(
        runs,
        x_axis,
        "samples_per_sec",
        "Throughput",
        "Samples per second (measured)",
        unit=" samples/s",
        smoothing=smoothing,
        log=log,
        subtitle="wall clock: each run under its own load and device — compare runs measured alike"
        if len(timed) > 1
        else None,
    )


def _by_cpu_time(snap: JobSnapshot) -> JobSnapshot:
    """The snapshot with its steps' samples/s by thread CPU time beside the wall clock's."""
    return dataclasses.replace(snap, steps={**snap.steps, "cpu_samples_per_sec": cpu_rates(snap.steps)})


def memory_chart(runs: Sequence[JobSnapshot], x_axis: str = "steps", log: bool = False) -> Chart:
    sources = {(s.start or {}).get("memory_source", "") for s in runs} - {""}
    source = ", ".join(sorted(sources)) or "measured"
    y_title = f"Peak memory in step (MiB, {source})"
    chart = _per_step_chart(
        runs, x_axis, "peak_memory_bytes", "Memory", y_title, scale=MIB, unit=" MiB", log=log
    )
    if "accounted" in sources:
        chart.alt += (
            " On the CPU this is accounted memory: parameters, gradients, optimizer "
            "state and saved activations — exact for what it counts, a lower bound on "
            "what the process holds."
        )
    return chart


def utilization_chart(
    runs: Sequence[JobSnapshot], x_axis: str = "steps", smoothing: float = 0.0, log: bool = False
) -> Chart:
    return _per_step_chart(
        runs,
        x_axis,
        "utilization_pct",
        "GPU utilisation (NVML)",
        "Time a kernel ran (%)",
        unit="%",
        smoothing=smoothing,
        log=log,
        y_range=[0, 100],
    )


def has_utilization(runs: Sequence[JobSnapshot]) -> bool:
    return any(v is not None for s in runs for v in s.steps["utilization_pct"])
