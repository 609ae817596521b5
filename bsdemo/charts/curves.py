"""A run's curves against steps, samples, epochs or seconds: loss, and the labelled loss of a
comparison, in the chart language of `style`; throughput, memory and utilisation (`measures`)
are imported from here too."""

from __future__ import annotations

import math
from collections.abc import Sequence

from bsdemo.charts.measures import has_utilization, memory_chart, throughput_chart, utilization_chart
from bsdemo.charts.runtraces import _fade, _xy, run_label
from bsdemo.charts.style import (
    X_AXES,
    Chart,
    Draft,
    Style,
    clip_marks,
    ema,
    empty,
    end_mark,
    layout,
    log_ticks,
    log_x,
    robust_top,
    styles,
)
from bsdemo.runs import JobSnapshot
from bsdemo.units import sig

# one line over a half-width chart (a longer key wraps, and pushes the plot down the screen)
LOSS_KEY = "thick: train loss · open markers: test loss · faint: steps"
EMPTY_LOSS = "Press Run: each step's loss appears here as it is measured."
LOSS_TITLE = "Cross-entropy loss (nats)"


def _last(xs: list, ys: list) -> tuple:
    for x, y in zip(reversed(xs), reversed(ys), strict=True):
        if y is not None:
            return x, y
    return None, None


SPIKE_FACTOR = 4.0  # a point this many times the robust top: a log axis rather than a clip


def _finish_y(
    fig: Draft,
    drawn: list[tuple[list, list]],
    y_title: str,
    floor: float = 0.0,
    spikes: Sequence[tuple[float, float]] | None = None,
) -> float | None:
    """A robust y-range from the main curves, their clipped points marked at the top edge.
    spikes (curves without per-step noise, where a spike is the event to see: its (x, y)
    points): one over SPIKE_FACTOR times that range puts the axis on a log scale holding
    every point."""
    top = robust_top([ys for _, ys in drawn], floor)
    drawn = [*drawn, *(([x], [y]) for x, y in spikes or ())]
    values = [y for _, ys in drawn for y in ys if y is not None and math.isfinite(y)]
    if spikes and top and max(values) > SPIKE_FACTOR * top and min(values) > 0:
        fig.update_yaxes(type="log", title=dict(text=f"{y_title}, log scale"), **log_ticks(values))
        return None
    if top is not None:
        fig.update_yaxes(range=[0, top])
        clip_marks(fig, [(x, y) for xs, ys in drawn for x, y in zip(xs, ys, strict=True)], top)
    return top


def _eval_traces(
    fig: Draft, snap: JobSnapshot, style: Style, label: str, x_field: str, log: bool
) -> tuple[list, list, list]:
    """The evaluated train loss (the run's one legend entry) and test loss of one run."""
    ex, train = _xy(snap.evals[x_field], snap.evals["train_loss"], log)
    _, test = _xy(snap.evals[x_field], snap.evals["test_loss"], log)
    group = str(snap.run_number)
    fig.add_trace(
        dict(
            type="scatter",
            x=ex,
            y=train,
            mode="lines+markers",
            name=label,
            line=dict(color=style.colour, width=2.5, dash=style.dash),
            marker=dict(symbol=style.symbol, size=8),
            legendgroup=group,
            **_fade(snap),
        )
    )
    fig.add_trace(
        dict(
            type="scatter",
            x=ex,
            y=test,
            mode="lines+markers",
            name=f"{label} · test",
            line=dict(color=style.colour, width=1.5, dash=style.dash),
            marker=dict(symbol=f"{style.symbol}-open", size=8),
            **_fade(snap, 0.85),
            legendgroup=group,
            showlegend=False,
        )
    )
    return ex, train, test


def loss_chart(
    runs: Sequence[JobSnapshot], x_axis: str = "steps", smoothing: float = 0.0, log: bool = False
) -> Chart:
    """Each run's per-step loss (faint, with an EMA of weight `smoothing` over it) and its
    evaluated train and test loss; one legend entry per run; the run's end marked."""
    x_field, x_title = X_AXES[x_axis]
    fig, table, drawn, ends = Draft(), [], [], []
    for snap, style in zip(runs, styles(runs), strict=True):
        label, group = run_label(snap), str(snap.run_number)
        xs, raw = _xy(snap.steps[x_field], snap.steps["loss"], log)
        fig.add_trace(
            dict(
                type="scatter",
                x=xs,
                y=raw,
                mode="lines",
                name=f"{label} · step loss",
                line=dict(color=style.colour, width=1),
                **_fade(snap, 0.25 if smoothing > 0 else 0.5),
                legendgroup=group,
                showlegend=False,
            )
        )
        main = raw
        if smoothing > 0:
            main = ema(raw, smoothing)
            fig.add_trace(
                dict(
                    type="scatter",
                    x=xs,
                    y=main,
                    mode="lines",
                    name=f"{label} · smoothed",
                    line=dict(color=style.colour, width=1.5, dash=style.dash),
                    legendgroup=group,
                    showlegend=False,
                    **_fade(snap),
                )
            )
        ex, train, test = _eval_traces(fig, snap, style, label, x_field, log)
        drawn += [(xs, main), (ex, train), (ex, test)]
        gx, gen = _xy(snap.steps[x_field], snap.steps.get("generator_loss", []), log)
        if any(g is not None for g in gen):  # a GAN: its generator's loss beside the discriminator's
            gen = ema(gen, smoothing) if smoothing > 0 else gen
            fig.add_trace(
                dict(
                    type="scatter",
                    x=gx,
                    y=gen,
                    mode="lines",
                    name=f"{label} · generator",
                    line=dict(color=style.colour, width=1.5, dash="dot"),
                    legendgroup=group,
                )
            )
            drawn.append((gx, gen))
        ends.append((snap, *_last(xs, raw), style))
        table += [
            {"run": label, x_title: x, "train loss": a, "test loss": b, "test accuracy": acc}
            for x, a, b, acc in zip(
                snap.evals[x_field],
                snap.evals["train_loss"],
                snap.evals["test_loss"],
                snap.evals["test_accuracy"],
                strict=True,
            )
        ]
    layout(fig, "Loss", x_title, LOSS_TITLE, subtitle=LOSS_KEY if runs else None)
    _finish_loss(fig, drawn, ends, log, EMPTY_LOSS)
    return Chart(fig.figure(), _loss_alt(runs, x_title), table)


def _finish_loss(
    fig: Draft,
    drawn: list[tuple[list, list]],
    ends: list[tuple],
    log: bool,
    empty_text: str,
    spikes: Sequence[tuple[float, float]] | None = None,
) -> None:
    """A loss chart's robust y-range, each run's end marked, the log axis, the empty state."""
    top = _finish_y(fig, drawn, LOSS_TITLE, spikes=spikes)
    for snap, x, y, style in ends:
        end_mark(fig, snap, x, y, style, top)
    if log:
        log_x(fig)
    else:  # a lone point at step 0 mid-run must not autorange the axis into negative epochs
        fig.update_xaxes(rangemode="nonnegative")
    if not any(xs for xs, _ in drawn):
        empty(fig, empty_text)


SPIKE_OVER_START = 2.0  # a step's loss this many times the run's first evaluated loss: a spike


def _spike(snap: JobSnapshot, x_field: str, evaluated: list) -> tuple[float, float] | None:
    """(x, loss) of the run's highest step loss where it is a spike — over SPIKE_OVER_START
    times its first evaluated loss (warm-up's jump, an lr too large) — that its evaluations,
    an epoch apart, would not show; else None."""
    start = next((v for v in evaluated if v is not None), None)
    pts = [
        (x, y)
        for x, y in zip(snap.steps[x_field], snap.steps["loss"], strict=False)
        if x is not None and y is not None and math.isfinite(y)
    ]
    if start is None or not pts:
        return None
    x, peak = max(pts, key=lambda p: p[1])
    return (x, peak) if peak > SPIKE_OVER_START * start else None


def _loss_alt(runs: Sequence[JobSnapshot], x_title: str) -> str:
    if not runs:
        return "Loss chart: no runs yet."
    parts = []
    for snap in runs:
        ev = snap.evals
        if ev["test_loss"]:
            parts.append(
                f"{run_label(snap)}: test loss {sig(ev['test_loss'][0])} at the start, "
                f"{sig(ev['test_loss'][-1])} latest"
            )
        else:
            parts.append(f"{run_label(snap)}: no evaluation yet")
        if snap.status in ("diverged", "oom", "cancelled", "failed"):
            parts[-1] += f" ({snap.status})"
    return f"Loss against {x_title.lower()}. " + "; ".join(parts) + "."


def labelled_loss_chart(runs: Sequence[tuple[str, JobSnapshot]], x_axis: str, log: bool = False) -> Chart:
    """A comparison's evaluated loss, one legend entry per run named by its label, coloured by
    its batch (runs of one batch told apart by marker and dash), each run's end marked."""
    x_field, x_title = X_AXES[x_axis]
    fig, table, drawn, ends = Draft(), [], [], []
    peaks: list[tuple[float, float]] = []  # each run's spike between two evaluations
    snaps = [snap for _, snap in runs]
    for (label, snap), style in zip(runs, styles(snaps), strict=True):
        ex, train, test = _eval_traces(fig, snap, style, label, x_field, log)
        drawn += [(ex, train), (ex, test)]
        x, y = _last(ex, train)
        if snap.latest and snap.status in ("diverged", "oom") and snap.latest.get(x_field):
            x, y = snap.latest[x_field], snap.latest.get("loss", y)  # where it actually stopped
        ends.append((snap, x, y, style))
        if (spike := _spike(snap, x_field, train)) is not None:  # between two evaluations
            fig.add_trace(
                dict(
                    type="scatter",
                    x=[spike[0]],
                    y=[spike[1]],
                    mode="markers+text",
                    text=[f"spike {sig(spike[1])}"],
                    textposition="middle right",
                    showlegend=False,
                    legendgroup=str(snap.run_number),
                    hoverinfo="text",
                    hovertext=[f"{label}: a step's loss reached {sig(spike[1], 4)}"],
                    marker=dict(symbol="triangle-up", size=12, color=style.colour),
                    textfont=dict(color=style.colour),
                )
            )
            peaks.append(spike)
        table += [
            {"run": label, x_title: x, "train loss": a, "test loss": b}
            for x, a, b in zip(
                snap.evals[x_field], snap.evals["train_loss"], snap.evals["test_loss"], strict=True
            )
        ]
    layout(
        fig,
        f"Loss against {x_title.lower()}",
        x_title,
        LOSS_TITLE,
        subtitle="thick: train loss · thin, open markers: test loss" if runs else None,
    )
    _finish_loss(fig, drawn, ends, log, "The runs' evaluated loss appears here as they train.", spikes=peaks)
    finals = [
        f"{label}: {sig(snap.evals['test_loss'][-1])}" for label, snap in runs if snap.evals["test_loss"]
    ]
    return Chart(
        fig.figure(),
        f"Evaluated loss against {x_title.lower()}. Latest test loss — " + "; ".join(finals) + "."
        if finals
        else "No evaluations yet.",
        table,
    )


__all__ = [
    "has_utilization",
    "labelled_loss_chart",
    "loss_chart",
    "memory_chart",
    "run_label",
    "throughput_chart",
    "utilization_chart",
]
