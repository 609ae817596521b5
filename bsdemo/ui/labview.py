"""The Training Lab's live view: this browser's newest run, polled while it trains — its status,
tiles and charts — drawn beside the earlier runs it is compared with, and the run history."""

from __future__ import annotations

import functools
import statistics
import time

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.charts.gan import frechet_chart, is_gan, samples_chart
from bsdemo.charts.regions import latest_regions, regions_chart
from bsdemo.config import RunConfig
from bsdemo.plaintext import plain
from bsdemo.runs import JobSnapshot, cpu_rates, stable_rate, turns_note
from bsdemo.ui.labruns import compared_runs, submit
from bsdemo.ui.links import X_AXIS_PARAM, presenting
from bsdemo.ui.state import lab_view, owner, scheduler, session_runs
from bsdemo.ui.waiting import waiting_message
from bsdemo.ui.widgets import (
    REFRESH_S,
    framed,
    measured_on,
    polled,
    runs_key,
    shared_figures,
    show_chart,
    takeaway,
)
from bsdemo.units import MIB, fixed, percent, sig

# a queued run's status-only polls: every poll costs each browser ~60 ms of main-thread time even
# when nothing changed, so a waiting tab polls slowly
QUEUED_REFRESH_S = 2.0
# ... but a run submitted this recently is polled as a running one is (REFRESH_S): on a quiet
# server it starts within a moment, and a slider's release should show its first point within
# a second (bench/live_bench.py); a run still waiting after that goes to the slow polls
FRESH_QUEUED_S = 3.0
# ... on a quiet server only: with more runs than this going or waiting (a class) the fast polls
# of thirty browsers cost the server more than they save (bench/room_bench.py under two CPU
# hogs: first points' p50 1.2-1.5 s with them, 0.7-1.1 s without)
FAST_POLL_MOST_ACTIVE = 4
# there, a run submitted less than this long ago is waited for (its first step) by the script
# run that submitted it: its first point is drawn at once (bsdemo.scheduler: ~0.2 s on a CPU)
FIRST_POINT_WAIT_S = 0.5


def _quiet() -> bool:
    """Whether the server runs few enough jobs for a fresh run's fast polls."""
    load = scheduler().load()
    return load["running"] + load["queued"] <= FAST_POLL_MOST_ACTIVE


def _snapshot_soon(job_id: int):
    """The run's snapshot. A run submitted a moment ago on a quiet server takes its first step
    within FIRST_POINT_WAIT_S: this script run waits for it, so the page draws the first point
    now rather than at its next poll (half a second later)."""
    sched = scheduler()
    snap = sched.snapshot(job_id)
    if (
        snap is None
        or snap.done
        or snap.steps.get("step")
        or time.time() - snap.submitted_at > FIRST_POINT_WAIT_S
        or not _quiet()
    ):
        return snap
    while time.time() < snap.submitted_at + FIRST_POINT_WAIT_S:
        time.sleep(0.02)
        now = sched.snapshot(job_id)
        if now is None:
            break
        snap = now
        if snap.done or snap.steps.get("step"):
            break
    return snap


# ----- live view -----
def live_view() -> None:
    """Charts of this session's newest run, redrawn from a polling fragment while it is active."""
    runs = session_runs()
    if not runs:
        st.caption("Press **Run** to train. Curves appear here as the run measures them.")
        _charts([])  # empty charts now: the chart code loads with the page, not after Run
        return
    current = runs[-1]
    snap = _snapshot_soon(current)
    was_active = snap is not None and not snap.done
    if was_active and snap.status == "queued":
        # nothing measured yet. Only the status line polls (a class of waiting tabs must not
        # redraw four charts each every second); the charts are drawn once, and the whole page
        # reruns when the run starts. A started run's first point comes in the live view's own
        # poll: a room whose runs start together (in turns) must not rerun thirty whole pages
        # at the moment their first points arrive.
        fresh = time.time() - snap.submitted_at < FRESH_QUEUED_S and _quiet()

        def pending() -> bool:
            now = scheduler().snapshot(current)
            if now is None or now.done or now.status != snap.status:
                return True  # to the next state's view (and poll interval)
            if fresh and time.time() - snap.submitted_at >= FRESH_QUEUED_S:
                return True  # still waiting: the page again, with the slow polls
            _status(now)
            return False

        polled(pending, REFRESH_S if fresh else QUEUED_REFRESH_S)
        _body(snap, current)
        return

    def view() -> bool:
        now = scheduler().snapshot(current)
        if now is None:
            st.warning(f"Run {current} is no longer held by the server.")
            return False
        _status(now)
        _body(now, current)  # tiles and charts: one snapshot, one frame
        return now.done  # once: refresh the controls outside the fragment

    polled(view, REFRESH_S if was_active else None)


def _body(snap: JobSnapshot, current: int) -> None:
    """The charts of the run on screen, with the session's earlier runs it is compared with
    (compared_runs), then its tiles: the loss and samples/s charts come right after Run, in
    the first screen."""
    _charts(compared_runs(current) + [snap])
    _tiles(snap)


def _chart_controls(shown: list[JobSnapshot]) -> tuple[str, float, bool]:
    """(x-axis, smoothing weight, log x) for the run charts, with the tables toggle. The x-axis
    is the student's choice once made (kept for the browser, so a reload keeps it, and in the
    link a run writes); until then samples seen where the runs drawn differ in batch size
    (against steps a bigger batch's few steps would be squeezed into a corner), else optimizer
    steps. The default is never written into a widget the student may be clicking: each default
    is a widget of its own, so only a click counts as a choice."""
    view = lab_view()
    if "x_axis_linked" not in st.session_state:  # once a session: a link's choice
        st.session_state["x_axis_linked"] = True
        if st.query_params.get(X_AXIS_PARAM) in charts.X_AXES:
            view["x_axis"] = st.query_params.get(X_AXIS_PARAM)
    chosen = view.get("x_axis")
    if chosen in charts.X_AXES:
        key, default = "x_axis", chosen
    else:
        default = "samples" if len({s.effective_batch for s in shown}) > 1 else "steps"
        key = f"x_axis_{default}_by_default"
    x_axis = (
        st.segmented_control(
            "x-axis",
            list(charts.X_AXES),
            key=key,
            default=default,
            format_func=lambda k: charts.X_AXES[k][1],
            required=True,
            on_change=_x_axis_chosen,
            args=(key,),
        )
        or default
    )
    smooth_col, log_col, table_col = st.columns([2, 1, 1.3], vertical_alignment="bottom")
    smoothing = smooth_col.slider(
        "Smoothing",
        0.0,
        0.99,
        0.6,
        0.01,
        key="smoothing",
        help="An exponential moving average over the per-step curves, "
        "as TensorBoard draws it (0 = none); the raw curve stays "
        "faint behind it.",
    )
    log = log_col.toggle("Log x", key="log_x", help="A logarithmic x-axis: long and short runs side by side.")
    table_col.toggle(
        "Data tables", key="show_tables", help="Every chart's data as a table (screen-reader friendly)."
    )
    return x_axis, smoothing, log


def _x_axis_chosen(key: str) -> None:
    """The student picked an x-axis: it stays for this browser, and goes into the next link."""
    lab_view()["x_axis"] = st.session_state[key]


def _charts(shown: list[JobSnapshot]) -> None:
    """Loss and samples/s side by side (on a 2-D dataset: loss and the decision regions), the
    takeaway, their display controls under them (drawn first: the charts read them), then
    memory and GPU utilisation (and samples/s, where the regions took its place)."""
    top = st.container(key="lab_charts")  # keyed: a phone draws them before the status line
    x_axis, smoothing, log = _chart_controls(shown)

    def build() -> tuple:
        return (
            framed(charts.loss_chart(shown, x_axis, smoothing, log)),
            framed(charts.throughput_chart(shown, x_axis, smoothing, log)),
            recipes.lab_verdict(shown),
            framed(charts.memory_chart(shown, x_axis, log)),
        )

    # made once for every session drawing the same runs the same way (a room on one run)
    loss, throughput, verdict, memory = shared_figures(
        ("lab", runs_key(shown), x_axis, smoothing, log, presenting()), build
    )
    # a 2-D dataset: what each run learned, beside its loss curve (redrawn with each snapshot)
    regions = any(latest_regions(snap) for snap in shown)
    with top:
        left, right = st.columns(2)
        with left:
            show_chart(loss, "loss_chart", is_framed=True, main=True)
        with right:
            if regions:
                show_chart(regions_chart(shown, most=1), "regions_chart")
            else:
                show_chart(throughput, "throughput_chart", is_framed=True)
        takeaway(verdict)  # what the runs drawn show (lifted above them: BASE_CSS)
    left, right = st.columns(2)
    with left:
        if regions:
            show_chart(throughput, "throughput_chart", is_framed=True)
        else:
            show_chart(memory, "memory_chart", is_framed=True)
    with right:
        if regions:
            show_chart(memory, "memory_chart", is_framed=True)
        elif charts.has_utilization(shown):
            show_chart(charts.utilization_chart(shown, x_axis, smoothing, log), "utilization_chart")
        else:
            st.caption("GPU utilisation appears here when the run is on an NVIDIA GPU (read from NVML).")
    if regions and charts.has_utilization(shown):
        show_chart(charts.utilization_chart(shown, x_axis, smoothing, log), "utilization_chart")
    gans = [snap for snap in shown if is_gan(snap)]
    if gans:
        left, right = st.columns(2)
        with left:
            show_chart(samples_chart(gans[-1]), "gan_samples")
        with right:
            show_chart(frechet_chart(gans, x_axis), "gan_frechet")
        st.caption(
            "A GAN has two players. The loss chart shows the discriminator's loss "
            "(evaluated: on the training or test images against as many generated ones) "
            "and, dotted, the generator's, −log D(G(z)); the accuracy is the "
            "discriminator's share of right calls, so 50 % means the generator fools it "
            "half the time. Both update together in every step. The Fréchet distance "
            "says how far the generated images are from real ones — lower is better."
        )


def _status(snap: JobSnapshot) -> None:
    if snap.status == "queued":
        st.info(waiting_message(snap), icon=":material/hourglass_top:")
    elif snap.status == "running" and snap.start is None:
        st.info(f"Run {snap.run_number} is starting (loading data, building the model)…")
    elif snap.status == "running":
        shared = " Another run shares the device, so its speed is shared too." if snap.shared_device else ""
        turns = " " + turns_note(snap.turns_with) if snap.turns_with else ""
        st.info(f"Run {snap.run_number} is training on {snap.start['device'].get('name')}.{shared}{turns}")
    elif snap.status == "completed" and snap.stored_at is not None:
        device, when = measured_on(snap)
        st.success(
            f"Stored result, measured on {plain(device)} at {when}: {snap.end['message']}",
            icon=":material/history:",
        )
        st.button(
            "Run it fresh",
            key="fresh",
            on_click=submit,
            args=(RunConfig(**snap.config), True),
            help="The same settings, measured again now.",
        )
    elif snap.status == "completed":  # the engine's own words and numbers
        st.success(snap.end["message"])
    elif snap.status == "cancelled":
        st.warning(snap.end["message"])
    else:
        st.error(plain(f"Run {snap.run_number} {snap.status}: {snap.end['message']}"))
    for notice in (snap.start or {}).get("notices", []) + ([snap.notice] if snap.notice else []):
        st.caption(plain(notice))
    if snap.owner != owner():
        st.caption(
            "Read-only: another browser started this run. A link shares a run's settings "
            "and lets you watch it; Stop stays with the browser that pressed Run."
        )


def _tiles(snap: JobSnapshot) -> None:
    latest, steps, evals = snap.latest or {}, snap.steps, snap.evals
    planned = (snap.start or {}).get("planned_steps")
    rates = steps["samples_per_sec"][3:] or steps["samples_per_sec"]  # skip warm-up steps
    peaks = [p for p in steps["peak_memory_bytes"] if p is not None]
    source = (snap.start or {}).get("memory_source", "")
    # a row that wraps: five tiles side by side where the column is wide, on two lines where
    # it is narrow (the panel beside the settings at 1280 px), never cut to "26,2…"
    row = st.container(horizontal=True, gap="medium")
    cols = [functools.partial(row.metric, width="content")] * 5
    cols[0]("Optimizer steps", f"{latest.get('step', 0):,}" + (f" / {planned:,}" if planned else ""))
    cols[1]("Step loss", f"{fixed(latest['loss'], 4)}" if "loss" in latest else "–")
    if is_gan(snap):
        distances = [d for d in evals.get("frechet_distance", []) if d is not None]
        reference = snap.summary.get("frechet_reference")
        cols[2](
            "Fréchet distance",
            f"{sig(distances[-1])}" if distances else "–",
            help="Generated against real test images, lower is better"
            + (f"; real training images score {sig(reference, 2)}." if reference else "."),
        )
    else:
        cols[2]("Test accuracy", f"{percent(evals['test_accuracy'][-1])}" if evals["test_accuracy"] else "–")
    # live: the median of the steps so far; once ended, the run's own summary (full batches);
    # by the training thread's CPU time where the run has it (what the device did), else the
    # wall clock's median step
    per_step = cpu_rates(steps)
    cpu = [v for v in (per_step[3:] or per_step) if v]
    final = stable_rate(snap.summary)
    rate = final if final is not None else statistics.median(cpu or rates) if rates else None
    by_cpu = bool(snap.summary.get("cpu_samples_per_sec")) if snap.summary else bool(cpu)
    wall = (
        latest["samples_seen"] / latest["wall_time_s"] if latest.get("wall_time_s") else None
    )  # what the run got over its wall clock
    # short labels: five tiles fit 1280 px, in presentation mode too; the help says the rest
    cols[3](
        "Samples/s",
        f"{fixed(rate, 0)}" if rate is not None else "–",
        help="Samples per second of the median step (the first few are warm-up and "
        "left out)"
        + (
            ", by the training thread's CPU time, which other programs on the machine cannot lengthen"
            if by_cpu
            else ""
        )
        + "."
        + (f" Over its wall clock the run got {fixed(wall, 0)} samples/s." if wall else ""),
    )
    rss = snap.summary.get("process_rss_bytes")
    data = (snap.start or {}).get("dataset_bytes") or 0
    # an accounted peak counts the step's tensors, not the data set resident beside them: said
    # beside the number, with the data set's size
    outside = f"+ data set {fixed(data / MIB, 2)} MiB, not in it" if source == "accounted" and data else None
    cols[4](
        "Memory, " + (source or "measured"),
        f"{fixed(max(peaks) / MIB, 2)} MiB" if peaks else "–",
        delta=outside if peaks else None,
        delta_color="off",
        delta_arrow="off",
        help=(
            "Accounted: the tensors one step needs, counted exactly (parameters, "
            "gradients, optimizer state, saved activations) — a lower bound on what "
            "the process holds. The training and test sets stay in memory for the "
            "whole run beside them"
            + (f" ({fixed(data / MIB, 2)} MiB), not counted here." if data else ".")
            + (
                f" The worker process held {fixed(rss / MIB, 0)} MiB at the end (resident "
                "size: interpreter, libraries and the allocator's slack too)."
                if rss
                else ""
            )
        )
        if source == "accounted"
        else None,
    )
    if rate and wall and rate > 1.3 * wall:
        st.caption(
            f"Over its wall clock this run got {fixed(wall, 0)} samples/s, "
            f"{percent(1 - wall / rate, 0)} less than the median step: steps vary — the first "
            "ones, an epoch's partial last batch, and pauses while other processes had "
            "the CPU all count in the wall clock, not in the median."
        )
