"""The room's answers to a lesson's "Predict first" question: counts and shares per answer, one
bar a round (peer instruction's first and second vote side by side), the answer the runs
support marked. Counts only: no identities reach a chart."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from bsdemo.charts.style import OKABE_ITO, Chart, layout
from bsdemo.classroom.rules import Round, Tally

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
        fig.add_trace(go.Bar(
            y=names, x=list(counts.counts), orientation="h", marker_color=colour,
            name=f"Vote {round_.number} ({counts.total} answer{'s' * (counts.total != 1)})",
            text=[f"{n} · {s:.0%}" for n, s in zip(counts.counts, counts.shares, strict=True)],
            textposition="outside", cliponaxis=False))
    layout(fig, "The room's predictions", "Members who chose it", "",
           subtitle=("✓ what the runs showed" if supported is not None else
                     "No run has answered the question yet"))
    top = max((max(t.counts, default=0) for _, t in rounds), default=0)
    fig.update_layout(barmode="group", hovermode="closest",
                      height=140 + (28 * len(rounds) + 24) * len(answers),
                      showlegend=len(rounds) > 1)
    fig.update_xaxes(range=[0, max(1, top) * 1.25], rangemode="tozero", dtick=max(1, top // 5 or 1))
    fig.update_yaxes(autorange="reversed", automargin=True)
    alt = "The room's predictions: " + " ".join(
        f"vote {r.number}: " + "; ".join(f"{a} {n}" for a, n in zip(answers, t.counts, strict=True))
        + "." for r, t in rounds) + (f" The runs showed “{answers[supported]}”."
                                     if supported is not None else "")
    table = [{"vote": r.number, "answer": a, "members": n, "share": round(s, 3),
              "the runs' answer": i == supported}
             for r, t in rounds for i, (a, n, s) in enumerate(zip(answers, t.counts, t.shares,
                                                                   strict=True))]
    return Chart(fig, alt, table)
