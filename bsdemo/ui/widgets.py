"""The shelf every page takes from: chart display, the polling fragment, shared choices.

`polled` is the one way a page watches a job: a fragment that reruns on a timer while the job is
active, attends this browser's runs on every poll (a heartbeat: the tab is open) and reruns the
whole page once when what it watched moves on, so the controls around it catch up.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from bsdemo.charts import Chart, fit_legend, for_people, projector
from bsdemo.ui.state import owner, scheduler

REFRESH_S = 0.5  # a running job's view polls this often (>= 1 update/s as promised)
LR_CHOICES = [1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0]
OPTIMIZER_LABELS = {"sgd": "SGD", "momentum": "SGD + momentum 0.9", "adam": "Adam",
                    "adamw": "AdamW (weight decay 0.01)"}


def show_chart(chart: Chart, key: str) -> None:
    """A chart with its alt text, and its data as a table when the reader asked for tables."""
    figure = projector(chart.figure) if st.session_state.get("present") else chart.figure
    st.plotly_chart(fit_legend(figure), key=key, alt=chart.alt, config={"displaylogo": False})
    if st.session_state.get("show_tables"):  # opt-in: re-sending tables every poll is costly
        st.dataframe(chart.table, hide_index=True, key=f"{key}_table", height=200)


def show_table(rows: list[dict], key: str, height: int | None = None,
               hide: tuple[str, ...] = ()) -> None:
    """Rows as a table for people (bsdemo.charts.for_people): formatted numbers with units,
    short headers, empty columns left out, and `hide`'s columns (already in the run labels)."""
    shown, columns = for_people([{k: v for k, v in r.items() if k not in hide} for r in rows])
    config = {name: st.column_config.NumberColumn(c["label"], format=c["format"]) if c["format"]
              else st.column_config.Column(c["label"]) for name, c in columns.items()}
    st.dataframe(shown, hide_index=True, key=key, column_config=config,
                 **({"height": height} if height else {}))


def polled(draw: Callable[[], bool], every: float | None) -> None:
    """Draw with `draw` inside a fragment rerun every `every` seconds (None: drawn once).

    Each poll first heartbeats this browser's runs. `draw` returns True when what it watches
    has moved on (ended, or reached its next state); while polling, the whole page then reruns
    once to draw that state's view.
    """
    @st.fragment(run_every=every)
    def poll() -> None:
        scheduler().heartbeat(owner())
        if draw() and every is not None:
            st.rerun()

    poll()
