"""Lesson 10's last two studies, past one device: data parallelism in a real process group, and
a two-stage pipeline — each its controls, its run button and its polled results."""

from __future__ import annotations

import dataclasses
import os

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.config import RunConfig
from bsdemo.lessons import Lesson
from bsdemo.runs import JobSnapshot
from bsdemo.ui import measurement
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, show_table, takeaway
from bsdemo.units import percent, sig


def data_parallel(link: PageLink, cfg: RunConfig, lesson: Lesson, cpu: bool) -> None:
    """A gloo group of real processes against one process with the whole global batch."""
    st.header(lesson.text("ddp_title"))
    st.caption(lesson.text("ddp_caption"))
    a, b, c = st.columns(3)
    processes = link.choice(
        a,
        "Processes",
        (1, 2, 3, 4),
        2,
        key="fit_ddp_processes",
        widget="select_slider",
        help=lesson.text("ddp_cores", cores=os.cpu_count() or 1),
    )
    per_process = link.choice(
        b, "Batch per process", (16, 32, 64, 128, 256), 64, key="fit_ddp_batch", widget="select_slider"
    )
    steps = link.choice(c, "Steps compared", (3, 5, 10, 20), 5, key="fit_ddp_steps")
    if cfg.model not in ("mlp", "cnn"):
        st.caption(lesson.text("ddp_model"))
    measurement.run_button(
        "ddp",
        "Run the process group",
        "ddp",
        dataclasses.replace(cfg, batch_size=int(per_process)),
        {"processes": int(processes), "steps": int(steps)},
    )

    def draw(snap: JobSnapshot) -> None:
        r = snap.result
        if r is None:
            measurement.group_progress(snap, "ddp_progress")
            return
        show_chart(charts.ddp_chart(r), "ddp_chart")
        takeaway(recipes.ddp_verdict(r), key="takeaway_ddp")
        cols = st.columns(3)
        cols[0].metric(
            "Largest parameter difference",
            f"{sig(r['max_abs_param_diff'], 2)}",
            help=lesson.text("help_difference"),
        )
        cols[1].metric("All-reduce share of a step", f"{percent(r['allreduce_s'] / r['step_s'], 0)}")
        cols[2].metric(
            "Scaling efficiency",
            "too noisy" if r.get("too_noisy") else f"{percent(r['scaling_efficiency'], 0)}",
            help=lesson.text("help_efficiency"),
        )
        st.markdown(lesson.text("ddp_cluster"))
        show_table(recipes.cluster_prediction(r), "ddp_cluster")
        if not cpu:
            st.caption(lesson.text("ddp_one_gpu"))
        downloads("fit_ddp", "ddp_dl", [r], None)

    measurement.job_view("ddp", draw)


def pipeline(link: PageLink, cfg: RunConfig, lesson: Lesson) -> None:
    """The MLP cut in two stages on two processes, micro-batches flowing through (GPipe)."""
    st.header(lesson.text("pipeline_title"))
    st.caption(lesson.text("pipeline_caption"))
    a, b = st.columns(2)
    micro = link.choice(
        a, "Micro-batches per step", (1, 2, 4, 8), 4, key="fit_pipe_micro", widget="select_slider"
    )
    batch = link.choice(
        b, "Batch per step", (64, 128, 256), 128, key="fit_pipe_batch", widget="select_slider"
    )
    if cfg.model != "mlp" or cfg.depth < 2:
        st.caption(lesson.text("pipeline_model"))
    measurement.run_button(
        "pipe",
        "Run the pipeline",
        "pipeline",
        dataclasses.replace(cfg, batch_size=int(batch)),
        {"micro_batches": int(micro), "steps": 5},
    )

    def draw(snap: JobSnapshot) -> None:
        r = snap.result
        if r is None:
            measurement.group_progress(snap, "pipeline_progress")
            return
        left, right = st.columns([3, 2])
        with left:
            show_chart(charts.pipeline_chart(r), "pipe_chart")
        with right:
            show_chart(charts.pipeline_memory_chart(r), "pipe_memory")
        takeaway(recipes.pipeline_verdict(r), key="takeaway_pipeline")
        downloads("fit_pipeline", "pipe_dl", [{k: v for k, v in r.items() if k != "schedule"}], None)

    measurement.job_view("pipe", draw)
