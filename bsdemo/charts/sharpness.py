"""Lesson 7's charts, from a sharpness study's records: the training loss to the target, the
sharpness trace against 2/lr, the loss along the line between the two solutions, and a table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from bsdemo.charts import vision
from bsdemo.charts.style import DASHES, OKABE_ITO, Chart, batch_colour, layout
from bsdemo.tunables import LONGER_FACTOR
from bsdemo.units import fixed, setting, sig

REMEDY_LABELS = {
    None: "",
    "scale_lr": " + scaled lr",
    "warmup": " + warm-up, scaled lr",
    "longer": f" + {LONGER_FACTOR}× longer",
    "noise": " + small-batch noise",
}


def run_name(run: dict[str, Any], samples: int | None = None) -> str:
    if samples is None or run["batch_size"] < samples:
        return f"batch {run['batch_size']:,}" + REMEDY_LABELS[run["remedy"]]
    return (
        "full batch" + REMEDY_LABELS[run["remedy"]]
        if run["remedy"]
        else f"full batch ({run['batch_size']:,})"
    )


def _style(index: int, run: dict[str, Any], plain: Sequence[int] = ()) -> dict[str, Any]:
    """The two plain runs in their batch colours; each remedy run (index 2, 3, ...) in a colour
    of its own that every reader tells from the plain runs' (their batches: `plain`), and a
    dash."""
    if run["remedy"] is None:
        return {"color": batch_colour(run["batch_size"]), "dash": "solid"}
    taken = {batch_colour(b) for b in plain}
    free = [
        c for c in OKABE_ITO if all(vision.least_difference(c, t) >= vision.MIN_DIFFERENCE for t in taken)
    ]
    return {"color": free[(index - 2) % len(free)], "dash": DASHES[1 + index % (len(DASHES) - 1)]}


def _plain(runs: Sequence[dict[str, Any]]) -> list[int]:
    return [r["batch_size"] for r in runs if r["remedy"] is None]


def loss_curves(runs: Sequence[dict[str, Any]], target: float, samples: int | None) -> Chart:
    fig = go.Figure()
    for i, run in enumerate(runs):
        steps, losses = zip(*run["curve"], strict=True) if run["curve"] else ((), ())
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=losses,
                mode="lines",
                name=run_name(run, samples),
                line=_style(i, run, _plain(runs)),
            )
        )
    fig.add_hline(
        y=target,
        line=dict(color="#444444", dash="dot", width=1),
        annotation_text=f"target {setting(target)}",
        annotation_position="top right",
    )
    layout(fig, "Training loss until the target", "Optimizer steps", "Training loss, whole set (log scale)")
    fig.update_yaxes(type="log", dtick=1)  # a label per power of ten, none between
    reached = [
        f"{run_name(r, samples)} in {r['reached_at']:,} steps" for r in runs if r["reached_at"] is not None
    ]
    alt = f"Training loss against steps for {len(runs)} runs, down to the target {setting(target)}" + (
        f": reached by {'; '.join(reached)}." if reached else "; none reached it."
    )
    return Chart(
        fig,
        alt,
        [
            {
                "run": run_name(r, samples),
                "steps": r["steps"],
                "reached at": r["reached_at"],
                "train loss": r["train_loss"],
            }
            for r in runs
        ],
    )


def trace_chart(
    runs: Sequence[dict[str, Any]], samples: int | None, trace_samples: int, hessian_samples: int
) -> Chart:
    fig = go.Figure()
    drawn = []
    for i, run in enumerate(runs):
        if not run["trace"]:
            continue
        steps, values = zip(*run["trace"], strict=True)
        drawn += values
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=values,
                mode="lines+markers",
                name=run_name(run, samples),
                line=_style(i, run, _plain(runs)),
                marker=dict(size=6),
                legendgroup=str(i),
            )
        )
        if run["top_hessian_eigenvalue"] == run["top_hessian_eigenvalue"]:  # not NaN
            drawn.append(run["top_hessian_eigenvalue"])
            fig.add_trace(
                go.Scatter(
                    x=[run["steps"]],
                    y=[run["top_hessian_eigenvalue"]],
                    mode="markers",
                    showlegend=False,
                    legendgroup=str(i),
                    name=f"{run_name(run, samples)}: at the solution",
                    marker=dict(
                        symbol="star",
                        size=14,
                        color=_style(i, run, _plain(runs))["color"],
                        line=dict(width=1, color="#111111"),
                    ),
                )
            )
    top = max(drawn, default=1.0)
    for lr in sorted({r["lr"] for r in runs if r["trace"]}):
        if 2 / lr <= 3 * top:  # a 2/lr far above every trace would squash them flat
            fig.add_hline(
                y=2 / lr,
                line=dict(color="#444444", dash="dash", width=1.5),
                annotation_text=f"2/lr = {setting(2 / lr, 3)} (lr {setting(lr, 3)})",
                annotation_position="top right",
            )
    layout(
        fig,
        "Sharpness during training",
        "Optimizer steps",
        "Top Hessian eigenvalue",
        subtitle=f"Power iteration on {trace_samples:,} training samples; ★ at the solution, "
        f"on {hessian_samples:,}; dashed: 2/lr",
    )
    ends = [f"{run_name(r, samples)} {sig(r['trace'][-1][1])}" for r in runs if r["trace"]]
    alt = (
        "The top Hessian eigenvalue against optimizer steps for each run, with 2/lr dashed; "
        f"at the end: {', '.join(ends)}."
    )
    return Chart(
        fig,
        alt,
        [{"run": run_name(r, samples), "step": s, "top eigenvalue": v} for r in runs for s, v in r["trace"]],
    )


def slice_chart(cut: dict[str, list[float]], first: str, second: str) -> Chart:
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=cut["t"], y=cut["train_loss"], mode="lines", name="training loss", line=dict(color=OKABE_ITO[0])
        )
    )
    fig.add_trace(
        go.Scatter(
            x=cut["t"],
            y=cut["test_loss"],
            mode="lines",
            name="test loss",
            line=dict(color=OKABE_ITO[1], dash="dash"),
        )
    )
    for t, name in ((0.0, first), (1.0, second)):
        fig.add_vline(
            x=t,
            line=dict(color="#444444", dash="dot", width=1),
            annotation_text=name,
            annotation_position="top",
        )
    layout(fig, "The loss between the two solutions", f"t: 0 = {first}, 1 = {second}", "Loss (log scale)")
    fig.update_yaxes(type="log", dtick=1)
    low = min(range(len(cut["t"])), key=lambda i: cut["train_loss"][i])
    alt = (
        f"Training and test loss along the line from the {first} solution (t = 0) to the "
        f"{second} solution (t = 1) and half as far past each; the training loss is "
        f"lowest at t = {fixed(cut['t'][low], 2)}, {sig(cut['train_loss'][0])} at t = −0.5 and "
        f"{sig(cut['train_loss'][-1])} at t = 1.5."
    )
    return Chart(
        fig,
        alt,
        [
            {"t": t, "train loss": a, "test loss": b}
            for t, a, b in zip(cut["t"], cut["train_loss"], cut["test_loss"], strict=True)
        ],
    )


def sharpness_table(runs: Sequence[dict[str, Any]], samples: int | None) -> list[dict[str, Any]]:
    return [
        {
            "run": run_name(r, samples) + ("" if r["status"] == "completed" else f" ({r['status']})"),
            "lr": r["lr"],
            "steps": r["steps"],
            "train loss": r["train_loss"],
            "test loss": r["test_loss"],
            "test − train": r["loss_gap"],
            "test acc %": 100 * r["test_accuracy"],
            "top eigenvalue": r["top_hessian_eigenvalue"],
            "rise nearby": r["neighbourhood_rise"],
        }
        for r in runs
    ]


def live_curves(points: Sequence[dict[str, Any]], target: float) -> Chart | None:
    """While a study runs: each run's training loss so far — its latest sharpness_progress, or
    its finished sharpness_run — or None before the first."""
    latest: dict[str, dict[str, Any]] = {}
    for p in points:
        if p.get("kind") in ("sharpness_progress", "sharpness_run"):
            latest[p["label"]] = p
    if not latest:
        return None
    samples = next((p["train_samples"] for p in points if p.get("train_samples")), None)
    return loss_curves(list(latest.values()), target, samples)


def sharpness_charts(result: dict[str, Any]) -> tuple[Chart, Chart, Chart]:
    """(loss curves, sharpness trace, loss slice) of a finished study."""
    runs, samples = result["runs"], result["train_samples"]
    plain = [r for r in runs if r["remedy"] is None]
    return (
        loss_curves(runs, result["target_loss"], samples),
        trace_chart(runs, samples, result["trace_samples"], result["hessian_samples"]),
        slice_chart(result["slice"], run_name(plain[0], samples), run_name(plain[1], samples)),
    )
