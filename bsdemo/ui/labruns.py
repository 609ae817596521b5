"""The Training Lab's runs: which earlier ones are drawn beside the newest (the comparison),
the history table and its downloads, and queueing a run (Run, "Run it fresh", Live mode)."""

from __future__ import annotations

import streamlit as st

from bsdemo import charts, export
from bsdemo.cluster import SchedulerLost
from bsdemo.config import ConfigError, RunConfig
from bsdemo.runs import JobSnapshot
from bsdemo.scheduler import ActiveRunError
from bsdemo.ui.links import view_params
from bsdemo.ui.state import client_address, owner, scheduler, session_runs
from bsdemo.ui.widgets import (
    show_table,
)

COMPARED = 5  # earlier runs drawn beside the newest by default (more: the student adds them)


# ----- comparison -----
def _newest_finished(current: int) -> tuple[list[JobSnapshot], list[int]]:
    """(the session's finished runs other than `current`, oldest first; the ids of the ones
    drawn unless dropped: the COMPARED newest that ran their course, and the newest run Live
    mode superseded that had drawn a step (faint: the curve the student was just watching; a
    quick drag's others are left out))."""
    done = [
        s for j in session_runs() if j != current and (s := scheduler().snapshot(j)) is not None and s.done
    ]
    whole = [s.id for s in done if s.superseded_by is None][-COMPARED:]
    replaced = [s.id for s in done if s.superseded_by is not None and s.steps["step"]][-1:]
    return done, whole + replaced


def compared_runs(current: int) -> list[JobSnapshot]:
    """The earlier runs drawn beside the run on screen: the COMPARED newest finished ones,
    less those the student dropped, plus older ones they added back."""
    done, newest = _newest_finished(current)
    s = st.session_state
    dropped, added = s.get("overlays_dropped", set()), s.get("overlays_added", set())
    return [r for r in done if (r.id in newest and r.id not in dropped) or r.id in added]


def _chosen(current: int) -> None:
    """on_change of the compared runs: remember what the student dropped and added, against
    the default, so a run finishing later joins the comparison on its own."""
    _, newest = _newest_finished(current)
    chosen = set(st.session_state["overlays"])
    st.session_state["overlays_dropped"] = set(newest) - chosen
    st.session_state["overlays_added"] = chosen - set(newest)


# ----- history -----
def history() -> list[JobSnapshot]:
    """The session's runs as a table, the choice of earlier runs drawn beside the current one,
    and the runs as downloads; returns the snapshots it drew them from (the page's closing text
    reads the same ones)."""
    runs = session_runs()
    if not runs:
        return []
    snaps = [s for s in (scheduler().snapshot(j) for j in runs) if s is not None]
    # full width, under the panel and the charts (beside the settings its columns were cut);
    # as of this script run: the tiles above are the live figures, and the page reruns when
    # the run ends
    st.header("Your runs")
    show_table(charts.runs_table(snaps), "runs_table")
    finished = [s.id for s in snaps if s.done and s.id != runs[-1]]
    labels = {s.id: charts.run_label(s) for s in snaps}
    if finished:
        st.session_state["overlays"] = [s.id for s in compared_runs(runs[-1])]
        st.multiselect(
            "Earlier runs drawn beside this one",
            finished,
            key="overlays",
            format_func=lambda j: labels.get(j, str(j)),
            on_change=_chosen,
            args=(runs[-1],),
            help=f"Your {COMPARED} newest finished runs are drawn by default: remove "
            "one to drop it, add an older one to bring it back. Each batch size "
            "keeps its own colour on every chart.",
        )
    left, right = st.columns(2)
    left.download_button(
        "Download these runs (JSON)",
        export.runs_json(snaps),
        file_name="batch-size-lab-runs.json",
        mime="application/json",
        key="export_json",
        icon=":material/download:",
    )
    right.download_button(
        "Download the steps (CSV)",
        export.runs_csv(snaps),
        file_name="batch-size-lab-steps.csv",
        mime="text/csv",
        key="export_csv",
        icon=":material/download:",
    )
    return snaps


def submit(cfg: RunConfig, fresh: bool = False, supersede: bool = False) -> None:
    """Queue cfg as this browser's run (Run, "Run it fresh" for a stored result, or Live mode's
    change of a setting, which `supersede`s the run going) and write its settings and id into
    the URL; a refusal is kept for the controls to show. The first Run after Live mode started
    a run with these very settings starts nothing more (the press a student makes by habit);
    a second one runs them again."""
    sched, state = scheduler(), st.session_state
    started, state["live_started"] = state.get("live_started"), None
    if (
        not fresh
        and not supersede
        and started is not None
        and state.get("live")
        and session_runs()[-1:] == [started[0]]
        and started[1] == cfg.to_params()
    ):
        st.toast(
            "Live mode started this run when you changed the setting; press Run again to run it once more.",
            icon=":material/bolt:",
        )
        return
    try:
        job_id = sched.submit(cfg, owner(), fresh=fresh, address=client_address(), supersede=supersede)
    except (ConfigError, ActiveRunError, SchedulerLost) as exc:
        st.session_state["submit_error"] = str(exc)
    else:
        session_runs().append(job_id)
        if supersede:  # Live mode's: the Run a student presses next by habit is this one
            state["live_started"] = (job_id, cfg.to_params())
        # the link reproduces the settings and names the run; a reload of this tab (the same
        # browser, so the same owner) re-attaches to it with control, anyone else only watches
        st.query_params.from_dict(cfg.to_params() | {"run": str(job_id)} | view_params())
