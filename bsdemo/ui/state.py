"""Process-wide and per-session state: the one scheduler, and who this browser session is."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import streamlit as st

from bsdemo.config import ConfigError
from bsdemo.jobs import Scheduler
from bsdemo.limits import Limits
from bsdemo.store import RunStore

LIMITS_ERROR: list[str] = []  # a bad limits file is shown in the sidebar, not a crash


@st.cache_resource(show_spinner=False)
def scheduler() -> Scheduler:
    """One scheduler per server process, shared by every session (its workers stay warm)."""
    try:
        limits = Limits.load()
    except ConfigError as exc:
        LIMITS_ERROR.append(f"The server's limits could not be read ({exc}); defaults apply.")
        limits = Limits()
    data_dir = os.environ.get("BSDEMO_DATA_DIR")  # set in the container; unset: no store
    store = RunStore(Path(data_dir) / "runs.sqlite3") if data_dir else None
    return Scheduler(limits=limits, store=store)  # limits.workers: BSDEMO_WORKERS


def owner() -> str:
    """A stable id for this browser session: the scheduler allows one active run per owner."""
    if "owner" not in st.session_state:
        st.session_state["owner"] = uuid.uuid4().hex
    return st.session_state["owner"]


def session_runs() -> list[int]:
    """Job ids this session submitted, oldest first."""
    return st.session_state.setdefault("runs", [])
