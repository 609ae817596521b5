"""A class-sourced sweep: each member runs a cell of a sweep page's grid, the projector draws
the room's runs combined by cell."""

from __future__ import annotations

import streamlit as st

from bsdemo.classroom.store import ClassError
from bsdemo.errors import ConfigError, clip
from bsdemo.jobkinds import ROOM_KIND
from bsdemo.plaintext import plain
from bsdemo.store import StoreUnavailable
from bsdemo.ui.classroom.seat import Seat, class_store, seat
from bsdemo.ui.state import client_address, owner
from bsdemo.units import fixed, percent, setting

# ----- a class-sourced sweep -----
JOBS_KEY = "class_jobs"  # this tab's runs of sweep cells, reported to the class when they end
SWEEP_POLL_S = 2.0  # the projector's combined chart, and a member's cell run


def _pending() -> list[dict]:
    return st.session_state.setdefault(JOBS_KEY, [])


def _run_cell(page: str, number: int, cells: list[tuple[int, dict]]) -> None:
    """on_click: queue the runs of (cell, config) — a member's one cell, or the instructor's
    fill of the empty cells — and remember them for reporting."""
    from bsdemo.cluster import SchedulerLost
    from bsdemo.config import RunConfig
    from bsdemo.scheduler import ActiveRunError
    from bsdemo.ui.state import scheduler

    try:
        configs = [RunConfig(**config) for _, config in cells]
        if len(configs) == 1:
            ids = [
                scheduler().submit(configs[0], owner(), kind=ROOM_KIND, fresh=True, address=client_address())
            ]
        else:
            ids = scheduler().submit_group(configs, owner(), address=client_address(), fresh=True)
    except (ConfigError, ActiveRunError, SchedulerLost) as exc:
        st.session_state[f"class_sweep_message_{page}"] = str(exc)
        return
    _pending().extend(
        {"page": page, "sweep": number, "cell": cell, "job": job}
        for (cell, _), job in zip(cells, ids, strict=True)
    )


def report_finished() -> None:
    """Send this tab's finished cell runs to the class (from the scheduler's record of the run,
    never from the browser); called on every page's run and by the sweep's polls."""
    jobs = st.session_state.get(JOBS_KEY)
    current = seat()
    if not jobs or current is None:
        return
    from bsdemo.classroom.sweep import cell_report
    from bsdemo.ui.state import scheduler

    left = []
    for job in jobs:
        snap = scheduler().snapshot(job["job"])
        if snap is None or snap.kind != ROOM_KIND:
            continue  # the server forgot it (a restart), or not a cell's run: nothing to report
        if not snap.done:
            left.append(job)
            continue
        report = cell_report(
            status=snap.status,
            config=snap.config,
            summary=snap.summary,
            steps=snap.steps,
            start=snap.start,
            shared_device=snap.shared_device,
            turns_with=snap.turns_with,
            stored_at=snap.stored_at,
            run=snap.run_number,
        )
        try:
            class_store().report(
                current.code,
                job["page"],
                job["sweep"],
                job["cell"],
                report,
                member=current.member,
                key=current.key,
            )
        except StoreUnavailable:
            left.append(job)  # tried again at the next poll
            continue
        except (ClassError, ConfigError) as exc:
            st.session_state[f"class_sweep_message_{job['page']}"] = str(exc)
            continue
        st.session_state[f"class_sweep_sent_{job['page']}"] = report
    st.session_state[JOBS_KEY] = left


def _workload(config: dict) -> str:
    from bsdemo.presets import PRESETS

    names = [
        p.label
        for p in PRESETS.values()
        if p.settings.get("dataset") == config.get("dataset")
        and p.settings.get("model") == config.get("model")
    ]
    from bsdemo.ui.widgets import OPTIMIZER_LABELS

    what = names[0] if names else f"{config.get('dataset')} · {config.get('model')}"
    optimizer = config.get("optimizer", "sgd")
    return f"{what}, {OPTIMIZER_LABELS.get(optimizer, optimizer)}, {config.get('epochs')} epochs"


def sweep_panel(page: str, cfg) -> None:
    """A lesson's class-sourced sweep: for the instructor, "Give each student a cell" and the
    room's combined chart; for a member, their cell and its Run. Nothing outside a class."""
    current = seat()
    if current is None:
        return
    report_finished()
    if current.teaching:
        _instructor_sweep(page, current, cfg)
    else:
        _member_sweep(page, current)


def _message(page: str) -> None:
    said = st.session_state.pop(f"class_sweep_message_{page}", None)
    if said:
        st.error(plain(said))


def _member_sweep(page: str, current: Seat) -> None:
    from bsdemo.classroom import sweep

    try:
        mine = class_store().my_cell(current.code, current.member, page)
    except StoreUnavailable:
        return
    if mine is None:
        return
    held, index = mine
    cell = held.cells[index]
    config = sweep.cell_config(
        held.config, cell, sweep.member_seed(held.config.get("seed", 0), current.member)
    )
    box = st.container(border=True, key=f"class_cell_{page}")
    box.markdown(f"**Your cell in the class's sweep: {cell.label()}**")
    box.caption(
        plain(
            f"On your instructor's workload ({_workload(held.config)}), with a seed "
            f"of your own ({config['seed']}), at most {setting(sweep.TIME_LIMIT_S)} s of "
            "training. Your result goes to the room's chart, with no name."
        )
    )
    from bsdemo.ui.state import scheduler

    waiting = [j for j in _pending() if j["page"] == page and j["sweep"] == held.number]
    box.button(
        f"Run my cell ({cell.label()})",
        type="primary",
        key=f"class_cell_run_{page}",
        icon=":material/play_arrow:",
        on_click=_run_cell,
        args=(page, held.number, [(index, config)]),
        disabled=bool(waiting) or not scheduler().can_submit(owner()),
    )
    with box:
        _message(page)
        _cell_progress(page, held.number)


def _cell_progress(page: str, number: int) -> None:
    """This tab's cell runs on the page: how far they are, what reached the room."""
    from bsdemo.ui.state import scheduler

    def line() -> None:
        report_finished()
        mine = [j for j in _pending() if j["page"] == page and j["sweep"] == number]
        for job in mine:
            snap = scheduler().snapshot(job["job"])
            if snap is None:
                continue
            if snap.status == "queued":
                st.caption(f"Your cell's run is queued (place {snap.queue_position or '–'}).")
            else:
                epoch = (snap.latest or {}).get("epoch")
                st.caption(
                    "Your cell is training"
                    + (f": epoch {fixed(epoch, 1)}" if epoch else "…")
                    + " — its result goes to the room when it ends."
                )
        sent = st.session_state.get(f"class_sweep_sent_{page}")
        if sent and not mine:
            acc = sent.get("accuracy")
            speed = sent.get("speed") or sent.get("samples_per_sec")
            st.success(
                plain(
                    f"Sent to the room: {sent['status']}"
                    + (f", {percent(acc)} test accuracy" if acc is not None else "")
                    + (f", {fixed(speed, 0)} samples/s ({sent.get('clock', 'wall clock')})" if speed else "")
                    + f" (batch {sent['batch']}, seed {sent['seed']})."
                ),
                icon=":material/groups:",
            )
        return not mine

    polled_fragment(line, SWEEP_POLL_S if _pending() else None)


def polled_fragment(view, every: float | None) -> None:
    from bsdemo.ui.widgets import polled

    polled(view, every)


def _instructor_sweep(page: str, current: Seat, cfg) -> None:
    import dataclasses

    from bsdemo.classroom import sweep

    classes = class_store()
    config = dataclasses.asdict(cfg)

    def hand_out() -> None:
        try:
            classes.open_sweep(current.code, current.key, page, config, seed=int(config["seed"]))
        except (ClassError, StoreUnavailable) as exc:
            st.session_state[f"class_sweep_message_{page}"] = str(exc)

    cells = sweep.grid(page)
    box = st.container(border=True, key=f"class_sweep_{page}")
    try:
        held = classes.current_sweep(current.code, page)
    except StoreUnavailable as exc:
        box.caption(plain(f"The class cannot be reached just now ({clip(str(exc), 120)})."))
        return
    with box:
        _message(page)
    if held is None:
        what = (
            f"{len(sweep.LR_BATCHES)} batch sizes × {len(sweep.LR_VALUES)} learning rates"
            if page == "lr_scaling"
            else f"batch sizes {', '.join(map(str, sweep.BATCHES))}"
        )
        head = box.container(horizontal=True, vertical_alignment="center")
        head.markdown(f"**The class's sweep** · {len(cells)} cells: {what}", width="content")
        head.button(
            "Give each student a cell",
            key=f"class_sweep_open_{page}",
            on_click=hand_out,
            icon=":material/grid_view:",
            help="Each member's page gets one cell of the grid on the workload set on "
            "this page; members who join later get one too.",
        )
        box.caption(
            "Every member runs one cell on their own page, with a seed of their own: "
            "the room fills the grid together, and several runs of a cell show their "
            "spread."
        )
        return

    def room() -> bool:
        report_finished()
        got = classes.sweep_results(current.code, page)
        if got is None:
            return True
        held_now, results, holders = got
        combined = sweep.combine(held_now.cells, results)
        draw_sweep(page, held_now, combined, holders, hand_out)
        return False

    with box:
        polled_fragment(room, SWEEP_POLL_S)
    if held.config != config:
        box.caption(
            plain(
                f"The sweep runs the workload it was handed out with "
                f"({_workload(held.config)}); press Hand out again for this page's "
                "settings."
            )
        )


def _fill(page: str, number: int) -> None:
    from bsdemo.classroom import sweep

    current = seat()
    got = class_store().sweep_results(current.code, page)
    if got is None:
        return
    held, results, _ = got
    if held.number != number:
        return
    combined = sweep.combine(held.cells, results)
    runs = [
        (i, sweep.cell_config(held.config, held.cells[i], int(held.config.get("seed", 0))))
        for i in combined.empty
    ]
    if runs:
        _run_cell(page, number, runs)


def draw_sweep(page: str, held, combined, holders: int, hand_out) -> None:
    """The room's combined chart of a sweep (the instructor's projector), under one line: how
    far the room is, Fill the empty cells, Hand out again."""
    from bsdemo.charts.room import class_curves_chart, class_grid_chart, class_speed_chart
    from bsdemo.ui.widgets import show_chart

    mine = [j for j in _pending() if j["page"] == page and j["sweep"] == held.number]
    line = st.container(horizontal=True, vertical_alignment="center")
    line.markdown(
        f"**The class's sweep** · Sweep {held.number}: **{combined.filled} of "
        f"{len(combined.cells)} cells** have a run ({combined.runs} "
        f"run{'s' * (combined.runs != 1)}); {holders} member{'s' * (holders != 1)} "
        "hold a cell.",
        width="content",
    )
    if combined.empty:
        line.button(
            f"Fill the {len(combined.empty)} empty cells" if not mine else f"Filling… {len(mine)} left",
            key=f"class_sweep_fill_{page}",
            on_click=_fill,
            args=(page, held.number),
            disabled=bool(mine),
            icon=":material/format_color_fill:",
            help="Runs the cells nobody has run from this browser, one after another.",
        )
    line.button(
        "Hand out again",
        key=f"class_sweep_open_{page}",
        on_click=hand_out,
        icon=":material/grid_view:",
        help="A new sweep on the workload set on this page: every member a cell again, "
        "the room's chart empty.",
    )
    if page == "lr_scaling":
        show_chart(class_grid_chart(combined), f"class_grid_{page}")
    else:
        speed, curves = class_speed_chart(combined), class_curves_chart(combined)
        left, right = st.columns(2)
        first, second = (speed, curves) if page == "throughput" else (curves, speed)
        with left:
            show_chart(first, f"class_first_{page}")
        with right:
            show_chart(second, f"class_second_{page}")
        finals = [
            f"{c.cell.batch}: {percent(c.median('accuracy'), 0)}"
            + (f" ({c.runs} runs)" if c.runs > 1 else "")
            for c in combined.cells
            if c.median("accuracy") is not None
        ]
        if finals:
            st.caption("Final test accuracy, median by batch — " + "; ".join(finals) + ".")
    if combined.mixed:
        st.caption(
            plain(
                "Measured under different conditions: "
                + "; ".join(combined.conditions)
                + ". Speeds from different conditions are drawn as separate lines."
            )
        )
