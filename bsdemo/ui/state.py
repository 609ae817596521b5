"""Process-wide and per-session state: the one scheduler, and who this browser session is."""

from __future__ import annotations

import uuid

import streamlit as st

from bsdemo.jobs import Scheduler, default_workers


@st.cache_resource(show_spinner=False)
def scheduler() -> Scheduler:
    """One scheduler per server process, shared by every session (its workers stay warm)."""
    return Scheduler(workers=default_workers())


def owner() -> str:
    """A stable id for this browser session: the scheduler allows one active run per owner."""
    if "owner" not in st.session_state:
        st.session_state["owner"] = uuid.uuid4().hex
    return st.session_state["owner"]


def session_runs() -> list[int]:
    """Job ids this session submitted, oldest first."""
    return st.session_state.setdefault("runs", [])
