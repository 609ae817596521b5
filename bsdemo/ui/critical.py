"""Lesson 8's second study: steps to a target loss at each batch size, and the critical batch —
its controls, its run button and its polled results."""

from __future__ import annotations

import dataclasses

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.config import RunConfig
from bsdemo.jobkinds import LR_RULES
from bsdemo.lessons import Lesson
from bsdemo.runs import JobSnapshot
from bsdemo.ui import measurement
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway
from bsdemo.units import fixed, setting

CRITICAL_BATCHES = (1, 4, 16, 64, 256, 4096)  # 4096: the whole training set
RULE_LABELS = {"constant": "the same lr for all", "sqrt": "× √(B/32)", "linear": "× B/32"}


def study(link: PageLink, cfg: RunConfig, lesson: Lesson) -> None:
    """Plain SGD from one start to a target training loss at each batch, the lr by a rule."""
    st.header(lesson.text("critical_title"))
    st.caption(lesson.text("critical_caption"))
    a, b, c, d = st.columns(4)
    rule = link.choice(a, "lr rule", LR_RULES, "sqrt", key="noi_rule", format_func=RULE_LABELS.get)
    ref_lr = link.choice(
        b,
        "lr at batch 32",
        (0.05, 0.1, 0.2, 0.3),
        0.2,
        key="noi_ref_lr",
        format_func=lambda v: f"{setting(v)}",
    )
    cap = link.choice(
        c,
        "…but never above",
        (0.4, 0.8, 1.6),
        0.8,
        key="noi_cap",
        format_func=lambda v: f"{setting(v)}",
        help=lesson.text("help_cap"),
    )
    target = link.choice(
        d,
        "Target training loss",
        (0.3, 0.1, 0.05),
        0.1,
        key="noi_target",
        format_func=lambda v: f"{setting(v)}",
    )
    measurement.run_button(
        "noc",
        "Train to the target at each batch",
        "critical",
        dataclasses.replace(cfg, optimizer="sgd", lr=float(ref_lr)),
        {
            "batch_sizes": list(CRITICAL_BATCHES),
            "target_loss": float(target),
            "rule": rule,
            "reference_batch": 32,
            "lr_cap": float(cap),
        },
    )

    def draw(snap: JobSnapshot) -> None:
        r = snap.result
        if r is None:
            done = [p for p in snap.points if p.get("kind") == "critical_point"]
            if done:
                st.caption(
                    "So far: "
                    + "; ".join(f"batch {p['batch_size']}: {p['reached_at'] or p['status']}" for p in done)
                )
            return
        noise_job = measurement.shown().get("noi_job")
        noise = measurement.scheduler().snapshot(noise_job) if noise_job is not None else None
        shared = noise and recipes.shared_b_simple(noise.config, noise.options, noise.result, snap.config)
        if shared:  # the measurement above saw the same start: its value, not a second estimate
            r = {**r, "b_simple": shared}
        chart = charts.critical_chart(r)
        show_chart(chart, "noc_chart")
        takeaway(recipes.critical_verdict(r), key="takeaway_critical")
        cols = st.columns(3)
        cols[0].metric("Fewest steps (S_min)", f"{fixed(r['s_min'], 0)}" if r["s_min"] else "–")
        cols[1].metric(
            "Critical batch", f"{r['b_crit']:.0f}" if r["b_crit"] else "–", help=lesson.text("help_critical")
        )
        cols[2].metric(
            "B_simple at initialisation",
            f"{r['b_simple']:.0f}",
            help=lesson.text("help_shared" if shared else "help_own"),
        )
        downloads("critical", "noc_dl", chart.table, chart)

    measurement.job_view("noc", draw)
