"""Process-wide and per-session state: the one scheduler, and who this browser session is."""

from __future__ import annotations

import uuid

import streamlit as st

from bsdemo.config import ConfigError
from bsdemo.jobs import Scheduler, default_workers
from bsdemo.limits import Limits

LIMITS_ERROR: list[str] = []  # a bad limits file is shown in the sidebar, not a crash


@st.cache_resource(show_spinner=False)
def scheduler() -> Scheduler:
    """One scheduler per server process, shared by every session (its workers stay warm)."""
    try:
        limits = Limits.load()
    except ConfigError as exc:
        LIMITS_ERROR.append(f"The server's limits could not be read ({exc}); defaults apply.")
        limits = Limits()
    return Scheduler(workers=default_workers(), limits=limits)


def owner() -> str:
    """A stable id for this browser session: the scheduler allows one active run per owner."""
    if "owner" not in st.session_state:
        st.session_state["owner"] = uuid.uuid4().hex
    return st.session_state["owner"]


def session_runs() -> list[int]:
    """Job ids this session submitted, oldest first."""
    return st.session_state.setdefault("runs", [])
