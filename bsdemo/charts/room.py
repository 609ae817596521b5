"""The room's answers to a lesson's "Predict first" question: counts and shares per answer, one
bar a round (peer instruction's first and second vote side by side), the answer the runs
support marked. Counts only: no identities reach a chart."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from bsdemo.charts.grid import lr_grid_chart
from bsdemo.charts.style import OKABE_ITO, SYMBOLS, Chart, batch_colour, layout
from bsdemo.charts.style import empty as empty_message
from bsdemo.classroom.rules import Round, Tally
from bsdemo.classroom.sweep import Combined, condition
from bsdemo.timing import THREAD_CLOCK
from bsdemo.units import fixed, percent

ROUND_COLOURS = (OKABE_ITO[0], OKABE_ITO[1], OKABE_ITO[2], OKABE_ITO[4])
SUPPORTED_MARK = "✓ "


def room_votes_chart(rounds: Sequence[tuple[Round, Tally]]) -> Chart:
    """Horizontal bars, an answer a row (in the question's order), a round a colour; each bar
    labelled with its count and share; the answer the runs support prefixed with a tick."""
    if not rounds:
        raise ValueError("a question has at least one round")
    answers = rounds[-1][1].answers
    supported = rounds[-1][0].supported
    names = [(SUPPORTED_MARK if i == supported else "") + a for i, a in enumerate(answers)]
    fig = go.Figure()
    for (round_, counts), colour in zip(rounds, ROUND_COLOURS * len(rounds), strict=False):
        fig.add_trace(
            go.Bar(
                y=names,
                x=list(counts.counts),
                orientation="h",
                marker_color=colour,
                name=f"Vote {round_.number} ({counts.total} answer{'s' * (counts.total != 1)})",
                text=[f"{n} · {percent(s, 0)}" for n, s in zip(counts.counts, counts.shares, strict=True)],
                textposition="outside",
                cliponaxis=False,
            )
        )
    layout(
        fig,
        "The room's predictions",
        "Members who chose it",
        "",
        subtitle=(
            "✓ what the runs showed" if supported is not None else "No run has answered the question yet"
        ),
    )
    top = max((max(t.counts, default=0) for _, t in rounds), default=0)
    fig.update_layout(
        barmode="group",
        hovermode="closest",
        height=140 + (28 * len(rounds) + 24) * len(answers),
        showlegend=len(rounds) > 1,
    )
    fig.update_xaxes(range=[0, max(1, top) * 1.25], rangemode="tozero", dtick=max(1, top // 5 or 1))
    fig.update_yaxes(autorange="reversed", automargin=True)
    alt = (
        "The room's predictions: "
        + " ".join(
            f"vote {r.number}: " + "; ".join(f"{a} {n}" for a, n in zip(answers, t.counts, strict=True)) + "."
            for r, t in rounds
        )
        + (f" The runs showed “{answers[supported]}”." if supported is not None else "")
    )
    table = [
        {
            "vote": r.number,
            "answer": a,
            "members": n,
            "share": round(s, 3),
            "the runs' answer": i == supported,
        }
        for r, t in rounds
        for i, (a, n, s) in enumerate(zip(answers, t.counts, t.shares, strict=True))
    ]
    return Chart(fig, alt, table)


# ----- a class-sourced sweep: the room's runs, cell by cell -----
def _range(values: tuple[float, float] | None, write: Callable[[float], str]) -> str:
    if values is None or values[0] == values[1]:
        return ""
    return f", {write(values[0])}–{write(values[1])}"


def class_grid_chart(combined: Combined) -> Chart:
    """The room's batch × learning-rate map: each cell the median final test accuracy of its
    runs, with how many ran it and their range; a cell nobody ran says so (grey)."""
    cells = []
    for c in combined.cells:
        median = c.median("accuracy")
        if not c.runs:
            text = "not run"
        elif median is None:
            text = f"diverged ×{c.diverged}" if c.diverged == c.runs else f"no result ×{c.runs}"
        else:
            spread = _range(c.spread("accuracy"), lambda v: percent(v, 0))
            text = percent(median, 0) + (f"<br>{c.runs} runs{spread}" if c.runs > 1 else "")
        cells.append(
            {
                "batch": c.cell.batch,
                "lr": c.cell.lr,
                "accuracy": median,
                "diverged": bool(c.runs) and c.diverged == c.runs,
                "text": text,
                "status": "completed" if median is not None else "empty",
                "runs": c.runs,
            }
        )
    chart = lr_grid_chart(cells, "The room's runs: final test accuracy, batch × learning rate")
    chart.figure.update_traces(textfont=dict(size=16), selector=dict(type="heatmap"))
    chart.alt = (
        f"The room's map: {combined.filled} of {len(combined.cells)} cells have a run "
        f"({combined.runs} runs). " + chart.alt
    )
    return chart


def _batch_axis(fig: go.Figure, combined: Combined) -> None:
    batches = sorted({c.cell.batch for c in combined.cells})
    fig.update_xaxes(type="log", tickvals=batches, ticktext=[str(b) for b in batches])


def _speed(report: dict) -> float | None:
    """A run's samples/s as the class compares them: by the training thread's CPU time where
    it has it (load-proof), else by the wall clock (reports before the clock was kept too)."""
    return report.get("speed") or report.get("samples_per_sec")


def class_speed_chart(combined: Combined) -> Chart:
    """Samples/s against batch size from the room's runs: every run a point, the median of each
    batch a line with its range as a bar — one line for each measuring condition (device, shared
    or not): speeds taken under different conditions are never joined into one curve. Batches
    nobody ran are marked on the axis."""
    fig, table = go.Figure(), []
    for k, cond in enumerate(combined.conditions):
        colour = OKABE_ITO[k % len(OKABE_ITO)]
        xs, ys, hover = [], [], []
        med_x, med_y, low, high = [], [], [], []
        for c in combined.cells:
            runs = [r for r in c.reports if condition(r) == cond and _speed(r)]
            for r in runs:
                xs.append(c.cell.batch)
                ys.append(_speed(r))
                hover.append(
                    f"batch {c.cell.batch}, seed {r.get('seed')}: "
                    f"{fixed(_speed(r), 0)} samples/s ({r.get('status')})"
                )
                table.append(
                    {
                        "batch": c.cell.batch,
                        "lr": r.get("lr"),
                        "seed": r.get("seed"),
                        "samples/s": round(_speed(r), 1),
                        "condition": cond,
                    }
                )
            if runs:
                speeds = sorted(_speed(r) for r in runs)
                med_x.append(c.cell.batch)
                med_y.append(statistics.median(speeds))
                low.append(med_y[-1] - speeds[0])
                high.append(speeds[-1] - med_y[-1])
        name = cond if combined.mixed else "median of the room's runs"
        fig.add_trace(
            go.Scatter(
                x=med_x,
                y=med_y,
                mode="lines+markers",
                name=name,
                line=dict(color=colour, width=3),
                marker=dict(symbol=SYMBOLS[k % len(SYMBOLS)], size=11),
                error_y=dict(type="data", array=high, arrayminus=low, color=colour, thickness=1.5, width=6),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                showlegend=False,
                hovertext=hover,
                hoverinfo="text",
                marker=dict(symbol=SYMBOLS[k % len(SYMBOLS)] + "-open", size=8, color=colour, opacity=0.7),
            )
        )
    empty = [c.cell.batch for c in combined.cells if not c.runs]
    if empty:
        fig.add_trace(
            go.Scatter(
                x=empty,
                y=[0] * len(empty),
                mode="markers",
                name="not run yet",
                marker=dict(
                    symbol="line-ew-open", size=18, color="#767676", line=dict(width=3, color="#767676")
                ),
                hoverinfo="text",
                hovertext=[f"batch {b}: nobody has run it" for b in empty],
            )
        )
    thread = all(r.get("clock") == THREAD_CLOCK for c in combined.cells for r in c.reports)
    layout(
        fig,
        "The room's runs: samples/s against batch size",
        "Batch size (log scale)",
        "Samples per second" + (" of training-thread CPU time" if thread and combined.runs else ""),
        rangemode="tozero",
        subtitle=(
            "each condition its own line: speeds measured apart are not one curve"
            if combined.mixed
            else f"measured on {combined.conditions[0]}"
            if combined.conditions
            else "no run has finished yet"
        ),
    )
    _batch_axis(fig, combined)
    fig.update_layout(hovermode="closest")
    medians = [
        f"batch {c.cell.batch}: {fixed(c.median('speed'), 0)}"
        for c in combined.cells
        if c.median("speed") is not None
    ]
    alt = (
        "Samples per second against batch size, the room's runs. Median by batch — "
        + ("; ".join(medians) if medians else "none yet")
        + "."
        + (f" Not run: batch {', '.join(map(str, empty))}." if empty else "")
    )
    return Chart(fig, alt, table)


def class_curves_chart(combined: Combined) -> Chart:
    """The room's loss curves overlaid, coloured by batch (one legend entry a batch)."""
    fig, table = go.Figure(), []
    for c in combined.cells:
        colour = batch_colour(c.cell.batch)
        for n, r in enumerate(c.reports):
            curve = r.get("curve") or []
            if not curve:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[p[0] for p in curve],
                    y=[p[1] for p in curve],
                    mode="lines",
                    name=f"batch {c.cell.batch}",
                    legendgroup=f"b{c.cell.batch}",
                    showlegend=n == 0,
                    line=dict(color=colour, width=2),
                    opacity=0.85,
                    hovertext=f"batch {c.cell.batch}, seed {r.get('seed')} ({r.get('status')})",
                    hoverinfo="text+y",
                )
            )
            table += [{"batch": c.cell.batch, "seed": r.get("seed"), "epoch": x, "loss": y} for x, y in curve]
    layout(
        fig,
        "The room's runs: training loss, every run",
        "Epochs",
        "Cross-entropy loss (nats)",
        subtitle="a colour a batch size · each line one member's run (its own seed)",
    )
    fig.update_layout(hovermode="closest")
    if not table:
        empty_message(fig, "The room's loss curves appear here as its runs finish.")
    finals = [
        f"batch {c.cell.batch}: {percent(c.median('accuracy'), 0)}"
        for c in combined.cells
        if c.median("accuracy") is not None
    ]
    alt = (
        f"Training loss of the room's {combined.runs} runs, coloured by batch size. Median "
        "final test accuracy — " + ("; ".join(finals) if finals else "none yet") + "."
    )
    return Chart(fig, alt, table)


def class_report_html(results: dict, answers, titles: dict[str, str]) -> str:
    """A class's figures as one self-contained HTML page (plotly.js inlined once): each
    question's votes, round by round, and each sweep's combined charts — from ClassStore.export.
    answers(question) gives a question's answers; titles names the pages."""
    import html

    from bsdemo.classroom import sweep as sweeps

    parts: list[tuple[str, Chart]] = []
    for question in dict.fromkeys(r["question"] for r in results.get("rounds", [])):
        names = tuple(answers(question))
        if not names:
            continue
        rounds = [
            (
                Round(r["round"], r["revealed"] is not None, r["supported"]),
                Tally(names, tuple(r["counts"].get(i, 0) for i in range(len(names)))),
            )
            for r in results["rounds"]
            if r["question"] == question
        ]
        parts.append((f"{titles.get(question, question)}: the room's predictions", room_votes_chart(rounds)))
    for s in results.get("sweeps", []):
        combined = sweeps.combine(sweeps.cells_from(s["grid"]), [(r["cell"], r) for r in s["runs"]])
        name = f"{titles.get(s['page'], s['page'])}: sweep {s['sweep']}"
        charts = (
            [class_grid_chart(combined)]
            if s["page"] == "lr_scaling"
            else [class_speed_chart(combined), class_curves_chart(combined)]
        )
        parts += [(name, c) for c in charts]
    info = results.get("class", {})
    body = [
        f"<h1>Class {html.escape(str(info.get('code', '')))}"
        + (f" — {html.escape(info['title'])}" if info.get("title") else "")
        + "</h1>",
        f"<p>{int(info.get('members', 0))} members. Counts and runs only: no member is named.</p>",
    ]
    for n, (heading, chart) in enumerate(parts):
        body.append(f"<h2>{html.escape(heading)}</h2><p>{html.escape(chart.alt)}</p>")
        body.append(chart.figure.to_html(full_html=False, include_plotlyjs=n == 0))
    if not parts:
        body.append("<p>No votes or runs yet.</p>")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Class "
        f"{html.escape(str(info.get('code', '')))}</title></head><body>" + "\n".join(body) + "</body></html>"
    )
