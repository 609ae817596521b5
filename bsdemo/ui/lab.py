"""The Training Lab's widgets and run controls (its live view: bsdemo.ui.labview; its run
history and queueing a run: bsdemo.ui.labruns; its phone layout: lab_phone.css).

Widgets hold their values in session state under `w_*` keys; `settings()` turns them into a
RunConfig. A link's query parameters fill the widgets once per session, and Run writes the
config and the run's id back to the URL, so a copied link reproduces the run's settings and shows
the run — read-only: control belongs to the browser that started it (bsdemo.ui.state.owner).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl

import streamlit as st

from bsdemo.cluster import SchedulerLost
from bsdemo.config import DEVICES, NORMS, OPTIMIZERS, ConfigError, RunConfig, config_from_query, parse_run_id
from bsdemo.plaintext import plain
from bsdemo.presets import LAB_SCENARIOS, PRESETS, preset_of

# status-only polls before the first point: every poll costs each browser ~60 ms of main-thread
# time even when nothing changed, so a waiting tab polls slowly and a starting one quickly
from bsdemo.ui.labruns import history, submit
from bsdemo.ui.labview import live_view
from bsdemo.ui.links import scenario_row, view_params
from bsdemo.ui.state import owner, predictions, scheduler, session_runs
from bsdemo.ui.widgets import (
    LR_CHOICES,
    OPTIMIZER_LABELS,
)
from bsdemo.units import setting

__all__ = [
    "PHONE_CSS",
    "history",
    "init_from_url",
    "live_view",
    "reattach",
    "run_controls",
    "scenario_buttons",
    "settings_form",
]
PHONE_CSS = (Path(__file__).with_name("lab_phone.css")).read_text(encoding="utf-8")


BATCH_POWERS = [2**i for i in range(13)]  # 1 … 4096 on the slider; any value via "exact"
# the settings whose widget (w_<name>) holds the field's value as it is; the others: the preset
# (dataset, model), the batch (a power of two, or exact), budgets where 0 means none
AS_IS = (
    "norm",
    "width",
    "depth",
    "lr",
    "accumulation_steps",
    "optimizer",
    "warmup_steps",
    "seed",
    "device",
    "eval_interval",
    "samples",
    "noise",
)


# ----- settings <-> widgets -----
def _to_widgets(cfg: RunConfig) -> None:
    s = st.session_state
    s["w_preset"] = preset_of(cfg) or "digits-mlp"
    s["w_batch_exact"] = cfg.batch_size not in BATCH_POWERS
    s["w_batch_pow"] = cfg.batch_size if cfg.batch_size in BATCH_POWERS else 32
    s["w_batch_value"] = cfg.batch_size
    for name in AS_IS:
        s[f"w_{name}"] = getattr(cfg, name)
    s["w_epochs"] = cfg.epochs or 0
    s["w_max_steps"] = cfg.max_steps or 0
    s["w_time_limit_s"] = float(cfg.time_limit_s or 0.0)


def _apply_preset() -> None:
    preset = PRESETS[st.session_state["w_preset"]]
    defaults = RunConfig()
    for name in ("width", "depth", "samples", "noise", "optimizer", "lr"):
        st.session_state[f"w_{name}"] = preset.settings.get(name, getattr(defaults, name))
    if "epochs" in preset.settings:  # a preset that needs its own budget (the GAN) sets it
        st.session_state["w_epochs"] = preset.settings["epochs"]


def init_from_url() -> str | None:
    """Fill the widgets from the URL once per session; returns an error message for a bad link."""
    if st.session_state.get("lab_initialised"):
        return st.session_state.get("lab_url_error")
    st.session_state["lab_initialised"] = True
    params = st.query_params.to_dict()
    gone = reattach(params.get("run"))
    cfg, error = config_from_query(params)  # never raises, whatever the URL holds
    _to_widgets(cfg)
    error = " ".join(filter(None, [error, gone])) or None
    st.session_state["lab_url_error"] = error
    return error


def reattach(raw: str | None) -> str | None:
    """Show the run a link names. It is this browser's own after a reload (the same cookie, so
    the same owner: Stop works); anyone else's link shows it read-only. Returns what to tell the
    reader when the link names a run this server no longer has (ids are never reused, across
    restarts too, so a link never shows somebody else's run)."""
    job = parse_run_id(raw)
    snap = scheduler().snapshot(job) if job is not None else None
    if snap is None:
        return (
            (
                f"Run {job} from this link is no longer on this server (it was restarted, or "
                "the run is older than the runs it keeps): its settings are filled in, press "
                "Run to train it again."
            )
            if job is not None
            else None
        )
    if snap.kind != "train":
        return None
    if snap.id not in session_runs():
        session_runs().append(snap.id)
    return None


def scenario_buttons() -> None:
    """The lecture scenarios (presets.LAB_SCENARIOS): each sets every control at once."""
    scenario_row("lab_scenarios", "scenario", LAB_SCENARIOS, _use_scenario)


def _use_scenario(query: str) -> None:
    cfg, _ = config_from_query(dict(parse_qsl(query)))
    _to_widgets(cfg)


def settings_form(narrow: bool = False) -> RunConfig:
    """Draw the settings widgets; return the RunConfig they describe (not yet validated).
    narrow: one column (a side panel beside the charts), else two."""
    s = st.session_state
    # first: how the settings below act (their panel's width holds its label whole)
    st.toggle("Live: trains as you change", key="live", value=True, help=LIVE_HELP)
    st.selectbox(
        "Dataset and model",
        list(PRESETS),
        key="w_preset",
        format_func=lambda name: PRESETS[name].label,
        on_change=_apply_preset,
    )
    left, right = (st.container(), st.container()) if narrow else st.columns(2)
    with left:
        top = scheduler().limits.max_batch_size  # the server refuses more: never offer it
        if s["w_batch_exact"]:
            s["w_batch_value"] = min(s["w_batch_value"], top)
            st.number_input("Batch size (samples per forward/backward pass)", 1, top, key="w_batch_value")
        else:
            powers = [b for b in BATCH_POWERS if b <= top] or [1]
            s["w_batch_pow"] = min(s["w_batch_pow"], powers[-1])
            st.select_slider("Batch size (samples per forward/backward pass)", powers, key="w_batch_pow")
        st.checkbox(
            "Exact batch size",
            key="w_batch_exact",
            help="Type any batch size instead of picking a power of two.",
        )
        lr_options = sorted(set(LR_CHOICES) | {s["w_lr"]})
        st.select_slider("Learning rate (log scale)", lr_options, key="w_lr", format_func=setting)
        st.number_input(
            "Gradient-accumulation steps",
            1,
            1024,
            key="w_accumulation_steps",
            help="Micro-batches whose gradients are summed before one optimizer step.",
        )
    with right:
        st.selectbox("Optimizer", OPTIMIZERS, key="w_optimizer", format_func=OPTIMIZER_LABELS.get)
        st.number_input(
            "Epoch budget (passes over the training set)",
            0,
            10_000,
            key="w_epochs",
            help="0 = no epoch budget: then set max steps under Advanced.",
        )
        st.number_input("Seed (model init and shuffling)", 0, 2**31 - 1, key="w_seed")
    with st.container(key="lab_advanced"), st.expander("Advanced"):  # keyed: hideable
        a, b, c = (st.container(),) * 3 if narrow else st.columns(3)
        a.selectbox("Normalisation", NORMS, key="w_norm")
        a.number_input("Width (units / CNN channels)", 1, 4096, key="w_width")
        a.number_input("Depth (hidden layers / conv blocks / LSTM layers)", 1, 16, key="w_depth")
        b.number_input("Warm-up steps (linear lr ramp)", 0, 10_000_000, key="w_warmup_steps")
        b.number_input("Max optimizer steps (0 = none)", 0, 10_000_000, key="w_max_steps")
        b.number_input("Evaluate every N steps (0 = each epoch)", 0, 10_000_000, key="w_eval_interval")
        c.number_input("Dataset size (generated sets)", 20, 200_000, key="w_samples")
        c.number_input("Input noise (2-D sets)", 0.0, 10.0, key="w_noise", step=0.05)
        c.selectbox("Device", DEVICES, key="w_device", help="auto = CUDA GPU, then Apple MPS, then the CPU.")
        limit = scheduler().limits.max_wall_s
        s["w_time_limit_s"] = min(float(s["w_time_limit_s"]), limit)
        b.number_input(
            f"Time cap in seconds (0 = this server's {setting(limit)})",
            0.0,
            limit,
            key="w_time_limit_s",
            step=5.0,
        )
    preset = PRESETS[s["w_preset"]].settings
    as_is = {name: s[f"w_{name}"] for name in AS_IS} | {"lr": float(s["w_lr"]), "noise": float(s["w_noise"])}
    return RunConfig(
        dataset=preset["dataset"],
        model=preset["model"],
        batch_size=s["w_batch_value"] if s["w_batch_exact"] else s["w_batch_pow"],
        epochs=s["w_epochs"] or None,
        max_steps=s["w_max_steps"] or None,
        time_limit_s=float(s["w_time_limit_s"]) or None,
        **as_is,
    )


# ----- run controls -----
def run_controls(cfg: RunConfig) -> None:
    """What the settings mean before Run (effective batch, updates/epoch), then Run and Stop."""
    sched = scheduler()
    try:
        checked, notices = cfg.validated()
    except ConfigError as exc:
        st.error(plain(f"Cannot run these settings — {exc}."))
        checked, notices = None, []
    for notice in notices:
        st.info(notice)
    # one row: the buttons, and what the settings mean beside them (a line saved for the chart)
    run_col, stop_col, meaning = st.columns([1, 1, 4], vertical_alignment="center")
    _live_start(cfg if checked is not None else None, st.session_state.get("live", True))
    active = sched.active_job(owner())
    if checked is not None:
        # the updates an epoch are the lab's question: counted here once it is answered or a
        # run has shown them (a run's status counts its steps), never before
        shown = predictions().get("training_lab") is not None or bool(session_runs())
        meaning.markdown(
            f"**Effective batch** {checked.batch_size} × {checked.accumulation_steps} = "
            f"**{checked.effective_batch_size}** samples a step · "
            + (
                f"**{checked.updates_per_epoch}** updates per epoch "
                f"(ceil({checked.train_samples} / {checked.effective_batch_size})) · "
                f"**{checked.planned_steps:,}** planned"
                if shown
                else "updates per epoch: predict, or run, first"
            )
        )
    # callbacks run before the script reruns, so this very run already shows the new job
    # a run of this browser's that waits to start is superseded by the next Run (the
    # scheduler drops it; the new one takes its place in the queue)
    waiting = sched.waiting_job(owner()) if active is not None else None
    run_col.button(
        "Run" if active is None else "Queue another run" if waiting is None else "Run instead",
        type="primary",
        key="run",
        disabled=checked is None or not sched.can_submit(owner(), "train"),
        icon=":material/play_arrow:",
        on_click=submit,
        args=(cfg,),
        help=None
        if waiting is None
        else f"Run {waiting} has not started yet: these settings replace it in the queue.",
    )
    stop_col.button("Stop", key="stop", disabled=active is None, icon=":material/stop:", on_click=_stop)
    if st.session_state.get("submit_error"):
        st.warning(plain(st.session_state.pop("submit_error")))


LIVE_HELP = (
    "On: each change of a setting starts a run with it at once, stopping the run going "
    "(its curve stays, faint, marked superseded). Off: changes wait for Run."
)


def _live_start(cfg: RunConfig | None, live: bool) -> None:
    """Live mode: settings that changed since this page's last script run start a run at once,
    superseding this browser's run going. Nothing on the page's first run in a tab (opening a
    link or reloading runs nothing), nor while the settings are invalid."""
    state = st.session_state
    params = cfg.to_params() if cfg is not None else None
    seen = state.get("live_seen")
    if live and params is not None and seen is not None and params != seen:
        submit(cfg, supersede=True)
    # only once the run is in and its link written: a rerun that cuts this one short (the
    # next step of a drag) must find these settings still to run
    state["live_seen"] = params
    started = state.get("live_started")
    if (
        started is not None and started[1] == params and st.query_params.get("run") != str(started[0])
    ):  # a rerun cut short after the run went in: the browser's next rerun
        # brought back its old link, so the new run's is written again
        st.query_params.from_dict(params | {"run": str(started[0])} | view_params())


def _stop() -> None:
    """Stop the run on screen if it is active, else the session's other active run."""
    sched, runs = scheduler(), session_runs()
    try:
        current = sched.snapshot(runs[-1]) if runs else None
        if current is not None and not current.done and current.owner == owner():
            sched.cancel(current.id, owner=owner())
        else:
            sched.cancel(sched.active_job(owner()), owner=owner())
    except SchedulerLost as exc:  # a callback's error would replace the page: kept for it
        st.session_state["submit_error"] = str(exc)
