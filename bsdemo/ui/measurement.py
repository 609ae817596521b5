"""Shared widgets for the measurement pages: workload, memory budget, and a polled job view.

Sweeps and finders run as exclusive scheduler jobs; a page keeps its newest job id under its own
key in what this browser is shown (back after a reload) and redraws the job's points from a
polling fragment while it runs.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
from collections.abc import Callable

import streamlit as st

from bsdemo import lessonlinks
from bsdemo.cluster import SchedulerLost
from bsdemo.config import ConfigError, RunConfig
from bsdemo.jobkinds import KINDS, PROGRESS_KINDS, planned_points
from bsdemo.lessonlinks import workload_controls
from bsdemo.plaintext import plain
from bsdemo.presets import PRESETS
from bsdemo.runs import JobSnapshot
from bsdemo.scheduler import ActiveRunError
from bsdemo.ui.links import PageLink
from bsdemo.ui.state import client_address, owner, remembered, scheduler, session_runs
from bsdemo.ui.waiting import waiting_message
from bsdemo.ui.widgets import OPTIMIZER_LABELS, REFRESH_S, measured_on, polled, stored_time
from bsdemo.units import GIB, MIB, fixed, format_bytes, powers_of_two

CPU_BUDGETS = [m * MIB for m in (0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 512, 1024)]
GPU_BUDGETS = [g * GIB for g in (0.25, 0.5, 1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 128)]


def shown() -> dict:
    """What each page of this browser shows: "<prefix>_job" -> its newest job id, and
    "<prefix>_group" -> its newest comparison's (label, job id) pairs; back after a reload."""
    return remembered("shown", dict)


def largest_batches() -> list[int]:
    """The sweep pages' "largest batch" choices: powers of two from 16 up to this server's
    max_batch_size (the scheduler refuses more, so the slider never offers it)."""
    top = scheduler().limits.max_batch_size
    return powers_of_two(top)[4:] or [powers_of_two(top)[-1]]


def workload(prefix: str, link: PageLink) -> RunConfig:
    """Preset (dataset + model), size and optimizer for a lesson page, linked
    (bsdemo.lessonlinks: the controls and the config they make)."""
    preset, size, optimizer = workload_controls(prefix)
    left, middle, right = st.columns([3, 1, 2])
    name = link.control(left, preset, format_func=lambda n: PRESETS[n].label)
    chosen = link.control(middle, size, help="S/M/L/XL set the width and depth: XL fills a large GPU.")
    # the preset's own optimizer (or the page's, for its default preset), unless the link or
    # the reader set one
    own = lessonlinks.default_optimizer(prefix, name)
    picked = link.control(
        right,
        dataclasses.replace(optimizer, default=own),
        format_func=OPTIMIZER_LABELS.get,
        help="Adam keeps two extra copies of the parameters as state.",
    )
    return lessonlinks.workload(name, chosen, picked)


def budget_options() -> list[int]:
    info = scheduler().device_info or {}
    options = CPU_BUDGETS if info.get("type", "cpu") == "cpu" else GPU_BUDGETS
    total = info.get("total_memory_bytes")
    return [b for b in options if not total or b <= total] or options[:1]


def budget_widget(
    prefix: str, link: PageLink, default: int | None = None, allow_none: bool = True
) -> int | None:
    sizes = budget_options()
    if default is not None and default not in sizes:
        sizes = sorted([*sizes, default])  # a page's own default is offered exactly as it is
    options = ([None] if allow_none else []) + sizes
    cpu = (scheduler().device_info or {}).get("type", "cpu") == "cpu"
    return link.choice(
        st,
        "Memory budget (“pretend this device has …”)",
        options,
        default if default is not None else options[0],
        key=f"{prefix}_budget",
        widget="select_slider",
        format_func=lambda b: "the device's own" if b is None else format_bytes(b),
        help=(
            "On the CPU there is no allocator limit: the budget is enforced on accounted "
            "memory and an out-of-memory is labelled simulated."
            if cpu
            else "Caps the CUDA allocator for the run: past it the OOM is the allocator's own."
        ),
    )


def submit(prefix: str, kind: str, cfg: RunConfig, options: dict) -> None:
    """on_click callback: queue the job and remember it for this page."""
    try:
        job = scheduler().submit(cfg, owner(), kind=kind, options=options, address=client_address())
    except (ConfigError, ActiveRunError, SchedulerLost) as exc:
        st.session_state[f"{prefix}_error"] = str(exc)
    else:
        shown()[f"{prefix}_job"] = job
        session_runs()  # make sure the session has its list (the lab page reads it)


def finished_result(prefix: str, field: str) -> dict | None:
    """A field of the result of this page's newest `prefix` job, once it has one."""
    job_id = shown().get(f"{prefix}_job")
    snap = scheduler().snapshot(job_id) if job_id is not None else None
    return (snap.result or {}).get(field) if snap is not None and snap.result else None


def trace_file(point: dict) -> bytes:
    """A profile point's Chrome trace as the profiler wrote it."""
    return gzip.decompress(base64.b64decode(point["trace_gz_b64"]))


def run_button(
    prefix: str, label: str, kind: str, cfg: RunConfig, options: dict, key: str | None = None
) -> None:
    sched = scheduler()
    active = sched.active_job(owner())
    waiting = sched.waiting_job(owner(), kind) if active is not None else None
    st.button(
        label,
        type="primary",
        key=key or f"{prefix}_run",
        disabled=not sched.can_submit(owner(), kind),
        on_click=submit,
        args=(prefix, kind, cfg, options),
        icon=":material/play_arrow:",
        help=f"Replaces your run {waiting}, which has not started yet."
        if waiting
        else "Queued behind your other run."
        if active
        else None,
    )
    if st.session_state.get(f"{prefix}_error"):
        st.warning(plain(st.session_state.pop(f"{prefix}_error")))


def job_view(prefix: str, draw: Callable[[JobSnapshot], None]) -> None:
    """Draw this page's newest job with `draw`, polled while it is queued or running."""
    job_id = shown().get(f"{prefix}_job")
    if job_id is None:
        return
    first = scheduler().snapshot(job_id)
    active = first is not None and not first.done

    def view() -> bool:
        snap = scheduler().snapshot(job_id)
        if snap is None:
            st.warning("That measurement is no longer held by the server; run it again.")
            return False
        if snap.status == "queued":
            st.info(
                waiting_message(snap, "Measurement")
                + (
                    " Measurements run alone on the device, so they wait for other runs to finish."
                    if KINDS[snap.kind].exclusive
                    else ""
                ),
                icon=":material/hourglass_top:",
            )
        elif snap.status == "running":
            planned = planned_points(snap.kind, snap.options)
            alone = KINDS[snap.kind].exclusive
            st.info(
                f"{'Measuring alone on the device' if alone else 'Running'}… "
                f"{sum(p['kind'] not in PROGRESS_KINDS for p in snap.points)} "
                f"{'point' if alone else 'result'}(s) so far" + (f" of {planned}" if planned else "") + "."
            )
        elif snap.status in ("failed", "oom"):
            st.error(plain(snap.end["message"]))
        elif snap.status == "cancelled":
            st.warning(snap.end["message"])
        if snap.points or snap.result:
            draw(snap)
        return snap.done

    polled(view, REFRESH_S if active else None)


def group_progress(snap: JobSnapshot, kind: str) -> None:
    """A process group's first figure while its interpreters start: one process's step,
    measured (the `kind` progress records of a ddp or pipeline check)."""
    shown = [p for p in snap.points if p.get("kind") == kind]
    if shown and snap.result is None:
        st.metric(
            "One process, a step (measured)", f"{fixed(shown[-1]['single_process_step_s'] * 1e3, 1)} ms"
        )
        st.caption(shown[-1]["message"])


def stored_note(prefix: str, snaps: list[tuple[str, JobSnapshot]]) -> None:
    """Say which runs of a comparison the run store served (when and where they were
    measured), with a button to train them all again now."""
    stored = [(label, s) for label, s in snaps if s.stored_at is not None]
    if not stored:
        return
    times = sorted(s.stored_at for _, s in stored)
    device, _ = measured_on(stored[0][1])
    when = " to ".join(dict.fromkeys(stored_time(t) for t in (times[0], times[-1])))
    names = "all" if len(stored) == len(snaps) else ", ".join(label for label, _ in stored)
    left, right = st.columns([5, 1], vertical_alignment="center")
    # plain text for the names and the device; the times stay readable (not code)
    left.info(
        f"Stored results ({plain(names)}): measured earlier on {plain(device)}, {when}, "
        "and served at once from the run store.",
        icon=":material/history:",
    )
    right.button(
        "Train fresh",
        key=f"{prefix}_fresh",
        on_click=submit_group,
        args=(prefix, [RunConfig(**s.config) for _, s in snaps], [label for label, _ in snaps], True),
        disabled=not scheduler().can_submit(owner()),
        help="The same runs, all trained again now.",
    )


def submit_group(prefix: str, cfgs: list[RunConfig], labels: list[str], fresh: bool = False) -> None:
    """on_click callback: queue a comparison (several training runs) for this page; runs the
    run store holds for this device are served from it unless `fresh`."""
    try:
        ids = scheduler().submit_group(cfgs, owner(), address=client_address(), fresh=fresh)
    except (ConfigError, ActiveRunError, SchedulerLost) as exc:
        st.session_state[f"{prefix}_error"] = str(exc)
    else:
        shown()[f"{prefix}_group"] = list(zip(labels, ids, strict=True))


def group_button(
    prefix: str, label: str, cfgs: list[RunConfig], labels: list[str], key: str | None = None
) -> None:
    st.button(
        label,
        type="primary",
        key=key or f"{prefix}_run",
        disabled=not scheduler().can_submit(owner()),
        on_click=submit_group,
        args=(prefix, cfgs, labels),
        icon=":material/play_arrow:",
    )
    if st.session_state.get(f"{prefix}_error"):
        st.warning(plain(st.session_state.pop(f"{prefix}_error")))


def group_view(prefix: str, draw: Callable[[list[tuple[str, JobSnapshot]]], None]) -> None:
    """Draw this page's newest comparison, polled while any of its runs is active."""
    group = shown().get(f"{prefix}_group")
    if not group:
        return
    first = [(label, s) for label, j in group if (s := scheduler().snapshot(j)) is not None]
    active = any(not s.done for _, s in first)
    stored_note(prefix, first)  # outside the fragment: its button reruns the whole page

    def view() -> bool:
        snaps = [(label, scheduler().snapshot(j)) for label, j in group]
        snaps = [(label, s) for label, s in snaps if s is not None]
        done = sum(s.done for _, s in snaps)
        if done < len(snaps):
            running = [label for label, s in snaps if s.status == "running"]
            shared = any(s.shared_device for _, s in snaps)
            st.info(
                f"{done} of {len(snaps)} runs done"
                + (f"; training: {', '.join(running)}" if running else "")
                + (". Runs share the device: their samples/s are measured under sharing." if shared else ".")
            )
        draw(snaps)
        return done == len(snaps)

    polled(view, REFRESH_S if active else None)
