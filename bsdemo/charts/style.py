"""The chart language every page speaks: one colour per batch size, a second channel for runs
that share one, one legend entry per run, smoothing, a y-range that spikes cannot take over,
the way a run ended marked on its curve, and a useful empty chart.

Pure: run data in, Plotly objects out (no Streamlit, no torch).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# plotly looks numpy and pandas up in sys.modules without importing them: script threads of a
# cold server racing their first import would find them half-initialised (AttributeError, and
# plotly then marks them missing for good). Loaded here, once, before any thread draws.
import numpy  # noqa: F401
import pandas  # noqa: F401
import plotly.graph_objects as go

from bsdemo.charts import vision
from bsdemo.charts.draft import Draft
from bsdemo.runs import JobSnapshot
from bsdemo.units import setting, sig

# Nine colours every reader tells apart: no two closer than vision.MIN_DIFFERENCE (CIEDE2000)
# with normal vision or simulated protanopia, deuteranopia or tritanopia, each at least 3:1 on
# white (WCAG's minimum for lines and marks). From Paul Tol's muted and vibrant schemes, Okabe
# and Ito's orange darkened in hue to 3:1, IBM's violet and D3's red. A batch's colour is keyed
# by log2(batch); batches nine doublings apart (1 and 512) share a hue. The batches a lesson
# compares most (32 against 256, 8 against 64) are far apart in hue.
BATCH_PALETTE = (
    "#332288",
    "#EE3377",
    "#117733",
    "#D62728",
    "#3A8FC8",
    "#882255",
    "#785EF0",
    "#AA4499",
    "#C77C00",
)
# the second channel, for runs that share a batch: the k-th such run's marker and line dash
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "star", "hexagon", "x")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
# the measurement charts' series: Okabe and Ito's blue, orange (darkened in hue to 3:1 on white),
# green and pink, with Paul Tol's red, indigo and purple in place of their vermillion, sky blue
# and yellow, which a reader without red cones cannot tell from the orange (CIEDE2000 1-3)
OKABE_ITO = ("#0072B2", "#C77C00", "#009E73", "#CC3311", "#CC79A7", "#332288", "#AA3377", "#000000")
OOM_COLOUR = "#D55E00"  # Okabe-Ito vermillion: out of memory and divergence, everywhere
ENDINGS = {  # how a run ended -> (its mark on the curve, the words beside it)
    "diverged": ("x", "diverged"),
    "oom": ("x", "out of memory"),
    "cancelled": ("square-open", "stopped"),
    "time_cap": ("line-ns", "time cap"),
    "failed": ("x-open", "failed"),
}
X_AXES = {  # x-axis choice -> (step-event field, axis title with unit)
    "steps": ("step", "Optimizer steps"),
    "samples": ("samples_seen", "Samples seen"),
    "epochs": ("epoch", "Epochs"),
    "seconds": ("wall_time_s", "Wall-clock time (s)"),
}
ROBUST_QUANTILE = 0.95  # the y-range covers this share of the points (and every run's start)


@dataclass
class Chart:
    figure: go.Figure
    alt: str  # one or two sentences for screen readers: what is plotted and what it shows
    table: list[dict[str, Any]] = field(default_factory=list)  # the same data as rows


@dataclass(frozen=True)
class Style:
    colour: str
    symbol: str
    dash: str


def batch_colour(batch_size: int) -> str:
    """The colour of a (effective) batch size, the same on every page."""
    return BATCH_PALETTE[round(math.log2(max(batch_size, 1))) % len(BATCH_PALETTE)]


def styles(runs: Sequence[JobSnapshot]) -> list[Style]:
    """Each run's style: its batch's colour, and the k-th run of a batch the k-th marker and
    dash. A run whose batch colour another run already holds (a second run of one batch, at
    another learning rate, say; or batches nine doublings apart) takes a spare colour instead,
    one every reader tells from those drawn (vision.MIN_DIFFERENCE), while any is left: runs
    differ by colour, not by dash alone."""
    batches = [snap.effective_batch for snap in runs]
    # first pass: each batch's first run in its batch colour, unless another batch holds it
    colours: list[str | None] = [None] * len(runs)
    owner: dict[str, int] = {}  # colour -> the batch that holds it
    for i, b in enumerate(batches):
        if b not in batches[:i] and owner.setdefault(batch_colour(b), b) == b:
            colours[i] = batch_colour(b)
    # second pass: the rest in spare colours every reader tells from all held so far
    for i, b in enumerate(batches):
        if colours[i] is None:
            held = [c for c in colours if c is not None]
            colours[i] = next(
                (c for c in _spares() if c not in held and all(vision.distinguishable(c, h) for h in held)),
                batch_colour(b),
            )
    seen: dict[int, int] = {}
    out = []
    for b, colour in zip(batches, colours, strict=True):
        k = seen.get(b, 0)
        seen[b] = k + 1
        out.append(Style(colour, SYMBOLS[k % len(SYMBOLS)], DASHES[k % len(DASHES)]))
    return out


def _spares() -> tuple[str, ...]:
    """Colours for runs whose batch colour is taken: the series colours, then the batch ones."""
    return tuple(dict.fromkeys((*OKABE_ITO[:-1], *BATCH_PALETTE)))


def ema(values: Sequence[float | None], weight: float) -> list[float | None]:
    """TensorBoard's smoothing: an exponential moving average, debiased so it starts at the
    first value; None (and non-finite values) pass through as gaps."""
    if weight <= 0:
        return list(values)
    out: list[float | None] = []
    last, n = 0.0, 0
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(None)
            continue
        n += 1
        last = last * weight + (1 - weight) * v
        out.append(last / (1 - weight**n))
    return out


def robust_top(series: Sequence[Sequence[float | None]], floor: float = 0.0) -> float | None:
    """A y-axis top that spikes cannot take over: the ROBUST_QUANTILE of all the values, but at
    least every series' first value (where a loss curve starts) and floor; None with no data."""
    values = sorted(v for s in series for v in s if v is not None and math.isfinite(v))
    if not values:
        return None
    firsts = [next((v for v in s if v is not None and math.isfinite(v)), 0.0) for s in series]
    quantile = values[min(len(values) - 1, int(ROBUST_QUANTILE * len(values)))]
    top = max([quantile, floor, *firsts]) * 1.08
    return top if top > 0 else None


def clip_marks(fig: go.Figure | Draft, points: Sequence[tuple[float, float]], top: float) -> int:
    """Mark the points above `top` at the chart's edge (one trace, named with their count);
    returns how many there were."""
    above = [(x, y) for x, y in points if y is not None and y > top]
    if above:
        fig.add_trace(
            dict(
                type="scatter",
                x=[x for x, _ in above],
                y=[top * 0.985] * len(above),
                mode="markers",
                name=f"{len(above)} point(s) above the chart",
                hoverinfo="text",
                hovertext=[f"{sig(y, 4)}" for _, y in above],
                marker=dict(symbol="triangle-up", size=7, color="#555555"),
            )
        )
    return len(above)


def end_mark(
    fig: go.Figure | Draft,
    snap: JobSnapshot,
    x: float | None,
    y: float | None,
    style: Style,
    top: float | None,
) -> None:
    """The way a run ended, marked where its curve stops (held inside the chart)."""
    key = snap.ending
    if key not in ENDINGS or x is None or y is None:
        return
    symbol, words = ENDINGS[key]
    colour = OOM_COLOUR if key in ("diverged", "oom", "failed") else style.colour
    shown = min(y, top * 0.95) if top else y
    fig.add_trace(
        dict(
            type="scatter",
            x=[x],
            y=[shown],
            mode="markers+text",
            text=[words],
            textposition="top left",
            showlegend=False,
            hoverinfo="text",
            hovertext=[f"{words} at {sig(y, 4)}"],
            legendgroup=str(snap.run_number),
            marker=dict(symbol=symbol, size=14, color=colour, line=dict(width=2, color=colour)),
            textfont=dict(color=colour),
        )
    )


def layout(
    fig: go.Figure | Draft, title: str, x_title: str, y_title: str, subtitle: str | None = None, **yaxis
) -> go.Figure | Draft:
    """Title, axis titles, the legend under the plot (clear of the x title) and margins. A
    subtitle longer than half a page's chart holds goes one part (" · ") a line."""
    lines = 1
    if subtitle and len(subtitle) > SUBTITLE_CHARS and " · " in subtitle:
        lines = subtitle.count(" · ") + 1
        subtitle = subtitle.replace(" · ", "<br>")
    fig.update_layout(
        title=dict(text=title, subtitle=dict(text=subtitle) if subtitle else None),
        xaxis=dict(title=dict(text=x_title)),
        yaxis=dict(title=dict(text=y_title)),
        height=CHART_PX + 18 * (lines - 1),
        margin=dict(l=60, r=20, t=(62 + 18 * (lines - 1)) if subtitle else 50, b=50),
        legend=dict(orientation="h", y=-0.3, yanchor="top"),
        hovermode="x unified",
    )
    if yaxis:
        fig.update_yaxes(**yaxis)
    return fig


CHART_PX = 340  # a chart's height: with the question, Run and the takeaway, a 1280x720 screen
SUBTITLE_CHARS = 60  # about what one line holds in a chart half a 1280 px page wide
AXIS_TITLE_PX = 14  # plotly's axis titles, unless set
AXIS_LABELS_PX = 38  # below a plot whose x axis has no title: its tick labels' band
LEGEND_ROW_PX = 26  # a row with its padding, generous: too little and plotly pushes the plot up
LEGEND_WIDTH_PX = 360  # the narrowest a legend gets: a chart in half of a 1280 px page


def legend_rows(names: Sequence[str], font: int) -> int:
    """How many rows a horizontal legend of `names` takes at LEGEND_WIDTH_PX: its entries
    packed in order, each its symbol (40 px) and its text (~0.6 em a character)."""
    rows, used = 1, 0.0
    for name in names:
        width = 40 + 0.6 * font * len(name)
        if used and used + width > LEGEND_WIDTH_PX:
            rows, used = rows + 1, 0.0
        used += width
    return rows


def fit_legend(fig: go.Figure) -> go.Figure:
    """The legend right under the plot's x-axis title, with room made below for its rows
    (legend_rows: an estimate that errs towards room, the spare room left at the figure's foot
    rather than between the plot and its legend), so it never sits on the title nor is cut."""
    _wrap_y_title(fig, fig.layout.yaxis.title.font.size or AXIS_TITLE_PX)  # taller than its plot
    names = [t.name for t in fig.data if t.showlegend is not False and t.name]
    if len(names) < 2 and fig.layout.showlegend is not True:
        return fig  # plotly shows no legend for a single trace
    if fig.layout.legend.yref == "container":
        return fig  # fitted already: a second fit would count the legend's room as the axis's
    font = fig.layout.legend.font.size or 12  # a projector's legend is larger
    rows = legend_rows(names, font)
    extra = max(LEGEND_ROW_PX, round(font * 2)) * rows + 14
    height = (fig.layout.height or CHART_PX) + extra
    axis = fig.layout.margin.b or 50  # the x axis's own room: its tick labels and title
    if not fig.layout.xaxis.title.text:  # tick labels only: the least room plotly keeps them
        axis = min(axis, AXIS_LABELS_PX)
    # the legend's top where the axis's room ends; the rows get the rest: a low estimate would
    # make plotly push the plot up, away from its legend
    fig.update_layout(
        legend=dict(orientation="h", yref="container", y=extra / height, yanchor="top", x=0, xanchor="left"),
        margin=dict(b=axis + extra),
        height=height,
    )
    return fig


PROJECTOR_TEXT_PX = 20  # readable from the back of a lecture room at 1280x720


def projector(fig: go.Figure) -> go.Figure:
    """The figure for a projector: every text at least PROJECTOR_TEXT_PX - 2 px and near black,
    lines twice as thick and markers larger, the plot taller to keep its proportions."""
    size = PROJECTOR_TEXT_PX
    fig.update_layout(
        font=dict(size=size, color="#111111"),
        title_font=dict(size=size + 6),
        legend_font=dict(size=size - 2),
        height=round((fig.layout.height or CHART_PX) * 1.35),
    )
    fig.update_xaxes(
        title_font=dict(size=size, color="#111111"),
        tickfont=dict(size=size - 2),
        linecolor="#444444",
        gridcolor="#dddddd",
    )
    fig.update_yaxes(
        title_font=dict(size=size, color="#111111"),
        tickfont=dict(size=size - 2),
        linecolor="#444444",
        gridcolor="#dddddd",
    )
    for trace in fig.data:
        line = getattr(trace, "line", None)
        if line is not None and trace.type == "scatter":
            trace.line.width = 2 * (line.width or 2)
            if trace.marker is not None:
                trace.marker.size = round(1.5 * (trace.marker.size or 6))
    for note in fig.layout.annotations or ():
        note.font.size = max(note.font.size or 0, size - 2)
    _wrap_y_title(fig, size)
    subtitle = fig.layout.title.subtitle.text if fig.layout.title.subtitle else None
    if subtitle:  # a line a part (it would run off), in room of its own above the plot
        parts = re.split(" · |<br>", subtitle)
        fig.update_layout(
            title_subtitle=dict(text="<br>".join(parts), font=dict(size=size - 4, color="#333333")),
            # room for the title and each line under it, clear of the plot
            margin=dict(t=round(62 + 1.3 * (size + 6) + 1.5 * size * len(parts))),
        )
        fig.layout.height += round(12 + 1.5 * size * len(parts))
    return fig


def _wrap_y_title(fig: go.Figure, size: int) -> None:
    """A y-axis title longer than its plot is tall, in two lines (at a projector's size it would
    run past the plot's top into the subtitle), with room made for the second line."""
    title = fig.layout.yaxis.title.text
    if not title or "<br>" in title:
        return
    margin = fig.layout.margin
    plot = (fig.layout.height or CHART_PX) - (margin.t or 80) - (margin.b or 80)
    if len(title) * 0.55 * size <= plot or " " not in title:
        return
    middle = len(title) // 2
    cut = min((i for i, c in enumerate(title) if c == " "), key=lambda i: abs(i - middle))
    fig.update_yaxes(title_text=f"{title[:cut]}<br>{title[cut + 1 :]}")
    fig.update_layout(margin=dict(l=(margin.l or 80) + round(1.3 * size)))


def empty(fig: go.Figure | Draft, message: str) -> None:
    """Before any data: a sentence where the plot will be, not meaningless axes."""
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(
        text=message,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font=dict(size=14, color="#666666"),
    )


def log_x(fig: go.Figure | Draft) -> None:
    fig.update_xaxes(type="log")


def log_ticks(values: Sequence[float | None]) -> dict[str, list]:
    """tickvals and ticktext for a log axis over `values`: 1, 2 and 5 times each power of ten
    (only the powers over more than three decades), each labelled in full (1k, 2k, 5k, 10k):
    plotly's own small digits between the decades read as stray numbers. {} without data."""
    finite = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not finite:
        return {}
    lo, hi = min(finite), max(finite)
    steps = (1,) if hi / lo > 1000 else (1, 2, 5)
    ticks = [
        m * 10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in steps
    ]
    inside = [t for t in ticks if lo <= t <= hi]
    # the nearest tick outside the data on each side, so the ends are read too
    below = [t for t in ticks if t < lo][-1:]
    above = [t for t in ticks if t > hi][:1]
    ticks = below + inside + above
    return {"tickvals": ticks, "ticktext": [_si(t) for t in ticks]}


def _si(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{setting(value / size)}{suffix}"
    return f"{setting(value)}"
