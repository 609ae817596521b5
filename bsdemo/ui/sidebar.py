"""The shared sidebar, on every page: which device this server trains on, how busy it is, and
the heartbeat that keeps this browser's runs attended wherever in the lab its tab is."""

from __future__ import annotations

import streamlit as st

from bsdemo.cluster import SchedulerLost
from bsdemo.plaintext import plain
from bsdemo.ui.state import SERVER_NOTICES, owner, remember_browser, scheduler
from bsdemo.units import GIB, format_bytes


def device_badge() -> None:
    # poll only until the first worker has reported its device; then draw once per script run
    @st.fragment(run_every=1.0 if scheduler().device_info is None else None)
    def badge() -> None:
        try:
            info = scheduler().device_info
        except SchedulerLost as exc:  # a course's scheduler gone: said, the sidebar stays
            st.error(plain(str(exc)))
            return
        if info is None:
            st.badge("Starting the training worker…", icon=":material/hourglass_top:", color="gray")
            return
        memory = info.get("total_memory_bytes")
        size = f" · {memory / GIB:.0f} GiB" if memory else ""
        if info["type"] == "cpu":
            st.badge(f"CPU{size}", icon=":material/memory:", color="blue")
            st.caption(
                f"{info.get('name', 'CPU')} · {info.get('cores')} cores · torch "
                f"{info.get('torch')}. No GPU: runs train on the CPU, memory is accounted."
            )
        else:
            st.badge(f"GPU{size}", icon=":material/bolt:", color="green")
            st.caption(f"{info.get('name')} · torch {info.get('torch')}")

    with st.sidebar:
        badge()
        heartbeat()
        load = scheduler().load()
        memory = ""
        if load["usable_memory_bytes"]:
            memory = (
                f" · memory held by runs {format_bytes(load['held_memory_bytes'])} of "
                f"{format_bytes(load['usable_memory_bytes'])} (their predicted peaks)"
            )
        st.caption(
            f"Server now: {load['running']} running, {load['queued']} waiting, "
            f"{load['workers']} worker(s){memory}."
        )
        for message in [*SERVER_NOTICES, scheduler().store_notice]:
            if message:
                st.warning(plain(message))
    remember_browser()


def heartbeat() -> None:
    """While this browser has a run going or waiting, tell the scheduler its tab is open, from
    whichever page it shows (Home and the quiz draw no run of their own): moving between pages
    never leaves a run unattended. A third of the grace period apart, so one late poll costs
    nothing; a browser with no run polls nothing."""
    sched = scheduler()
    active = sched.active_job(owner()) is not None

    @st.fragment(run_every=max(1.0, sched.limits.unattended_grace_s / 3) if active else None)
    def beat() -> None:
        sched.heartbeat(owner())

    beat()
