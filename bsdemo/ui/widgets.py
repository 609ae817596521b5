"""The shelf every page takes from: chart display, the polling fragment, shared choices.

`polled` is the one way a page watches a job: a fragment that reruns on a timer while the job is
active, attends this browser's runs on every poll (a heartbeat: the tab is open) and reruns the
whole page once when what it watched moves on, so the controls around it catch up.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import streamlit as st

from bsdemo import export
from bsdemo.charts import Chart, fit_legend, for_people, projector
from bsdemo.cluster import SchedulerLost
from bsdemo.lessonlinks import LR_STEPS
from bsdemo.plaintext import plain
from bsdemo.recipes import closing
from bsdemo.runs import JobSnapshot
from bsdemo.ui.links import presenting
from bsdemo.ui.state import owner, predictions, scheduler

REFRESH_S = 0.5  # a running job's view polls this often (>= 1 update/s as promised)
FIGURES_KEPT = 64  # shared figures kept (shared_figures)
_FIGURES: collections.OrderedDict[tuple, Any] = collections.OrderedDict()
_FIGURES_LOCK = threading.Lock()
LR_CHOICES = list(LR_STEPS)
OPTIMIZER_LABELS = {
    "sgd": "SGD",
    "momentum": "SGD + momentum 0.9",
    "adam": "Adam",
    "adamw": "AdamW (weight decay 0.01)",
}


def framed(chart: Chart) -> Chart:
    """The chart as the page shows it: for a projector when presenting, its legend fitted. Its
    figure is changed in place: frame a chart once (show_chart does, unless told it is)."""
    figure = projector(chart.figure) if presenting() else chart.figure
    fit_legend(figure)
    return chart


def show_chart(chart: Chart, key: str, is_framed: bool = False, main: bool = False) -> None:
    """A chart with its alt text, and its data as a table when the reader asked for tables.
    is_framed: the chart went through framed() already (a shared one: shared_figures); main:
    the page's main chart, in a container keyed "main_chart" (projected on a landscape screen,
    links.PRESENT_CSS sets it beside the question, Run and the takeaway)."""
    figure = (chart if is_framed else framed(chart)).figure
    with st.container(key="main_chart") if main else contextlib.nullcontext():
        st.plotly_chart(figure, key=key, alt=chart.alt, config={"displaylogo": False})
    if st.session_state.get("show_tables"):  # opt-in: re-sending tables every poll is costly
        st.dataframe(chart.table, hide_index=True, key=f"{key}_table", height=200)


def shared_figures(key: tuple, build: Callable[[], Any]) -> Any:
    """build()'s result for key, made once for every session drawing the same runs with the same
    settings (a room watching one run: bsdemo.scheduler publishes one copy of a running job every
    PUBLISH_S, so their polls share a key). Process-wide, the newest FIGURES_KEPT kept; what it
    returns is shared between sessions and must not be changed. Two sessions asking at once may
    both build it: the second result is dropped, nothing is wrong."""
    with _FIGURES_LOCK:
        hit = _FIGURES.get(key)
        if hit is not None:
            _FIGURES.move_to_end(key)
            return hit
    value = build()
    with _FIGURES_LOCK:
        _FIGURES[key] = value
        while len(_FIGURES) > FIGURES_KEPT:
            _FIGURES.popitem(last=False)
    return value


def runs_key(shown: list[JobSnapshot]) -> tuple:
    """What the figures of these runs are made from: each run's numbers at this version."""
    return tuple((s.run_number, s.version, s.status, s.stored_at) for s in shown)


def takeaway(text: str | None, level: str = "info", key: str = "takeaway") -> None:
    """A closing text as a page shows it, drawn right under its main chart: the one-sentence
    takeaway in a box (level: info, success, warning or error), the explanation folded under
    "More".

    The lead in a container keyed `key` (a page with several takeaways names each:
    "takeaway_…"): every page's styles lift the main one above the chart it closes
    (links.BASE_CSS), where a 1280x720 screen shows it under the run button; "More" stays under
    the chart."""
    if not text:
        return
    lead, more = closing.split(text)
    box = {"info": st.info, "success": st.success, "warning": st.warning, "error": st.error}
    with st.container(key=key):
        box[level](lead, icon=":material/arrow_right_alt:")
    if more:
        with st.expander("More"):
            st.markdown(more)


def show_table(rows: list[dict], key: str, height: int | None = None, hide: tuple[str, ...] = ()) -> None:
    """Rows as a table for people (bsdemo.charts.for_people): formatted numbers with units,
    short headers, empty columns left out, and `hide`'s columns (already in the run labels)."""
    shown, columns = for_people(
        [{k: v for k, v in r.items() if k not in hide and not k.startswith("_")} for r in rows]
    )
    config = {
        name: st.column_config.NumberColumn(c["label"], format=c["format"])
        if c["format"]
        else st.column_config.Column(c["label"])
        for name, c in columns.items()
    }
    st.dataframe(
        shown, hide_index=True, key=key, column_config=config, **({"height": height} if height else {})
    )


def numbers_table(
    rows: list[dict], key: str, helps: dict[str, str], formats: dict[str, str], default: str = "%.4g"
) -> None:
    """Rows of numbers as a table: each column's printf format (`formats`, else `default`) and
    its help (`helps`, by column name or the start of one), every column but the first."""

    def help_for(name: str) -> str | None:
        return helps.get(name) or next((h for k, h in helps.items() if name.startswith(k)), None)

    def column(name: str):  # text where the page wrote the numbers itself (units.signed)
        if all(isinstance(r.get(name), str | None) for r in rows):
            return st.column_config.TextColumn(help=help_for(name))
        return st.column_config.NumberColumn(format=formats.get(name, default), help=help_for(name))

    st.dataframe(
        rows, hide_index=True, key=key, column_config={name: column(name) for name in list(rows[0])[1:]}
    )


def polled(draw: Callable[[], bool], every: float | None) -> None:
    """Draw with `draw` inside a fragment rerun every `every` seconds (None: drawn once).

    Each poll first heartbeats this browser's runs. `draw` returns True when what it watches
    has moved on (ended, or reached its next state); while polling, the whole page then reruns
    once to draw that state's view.
    """

    @st.fragment(run_every=every)
    def poll() -> None:
        try:
            scheduler().heartbeat(owner())
            moved_on = draw()
        except SchedulerLost as exc:  # a course's scheduler gone: said here, the page stays
            st.error(plain(str(exc)))
            return
        if moved_on and every is not None:
            st.rerun()

    poll()


def measured_on(snap: JobSnapshot) -> tuple[str, str]:
    """(the device, the local time) a stored result was measured on and at."""
    device = (snap.start or {}).get("device", {}).get("name", "this server's device")
    return device, stored_time(snap.stored_at)


def stored_time(when: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(when))


def downloads(page: str, key: str, rows: list[dict], chart: Chart | None = None) -> None:
    """A page's results as CSV and JSON (with its settings from the URL and the tab's
    prediction), and its chart as a self-contained interactive HTML file (made on click; the
    chart's own camera icon saves a PNG)."""
    settings = st.query_params.to_dict()
    prediction = predictions().get(page)
    cols = st.columns([1, 1, 1, 2])
    cols[0].download_button(
        "Results (CSV)",
        export.results_csv(rows),
        f"{page}-results.csv",
        "text/csv",
        key=f"{key}_csv",
        icon=":material/download:",
    )
    cols[1].download_button(
        "Results (JSON)",
        export.results_json(page, settings, rows, prediction),
        f"{page}-results.json",
        "application/json",
        key=f"{key}_json",
        icon=":material/download:",
    )
    if chart is not None:
        figure = chart.figure
        cols[2].download_button(
            "Chart (HTML)",
            lambda: figure.to_html(include_plotlyjs=True),
            f"{page}-chart.html",
            "text/html",
            key=f"{key}_html",
            icon=":material/download:",
            help="Interactive, works offline. For a picture, use the camera icon above the chart.",
        )
