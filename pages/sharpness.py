"""Generalisation gap and sharpness: a small and a large batch trained to the same training loss."""

import dataclasses

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.jobkinds import SHARPNESS_REMEDIES
from bsdemo.lessonlinks import workload, workload_controls
from bsdemo.presets import PRESETS, SCENARIOS
from bsdemo.tunables import HESSIAN_ITERS, LONGER_FACTOR, REMEDY_LR_CAP, SHARPNESS_MAX_STEPS, WARMUP_SHARE
from bsdemo.ui import measurement
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway
from bsdemo.units import percent, setting

SMALL = (4, 8, 16, 32, 64)
LARGE = (256, 512, 4096)  # 4096: the whole training set of every preset the study offers
LRS = (0.05, 0.1, 0.2, 0.3, 0.5)
TARGETS = (0.05, 0.02, 0.01, 0.005)
PRESETS_OFFERED = ("digits-mlp", "digits-cnn", "synthetic-mlp", "moons-mlp", "spirals-mlp")
lesson = lesson_header("sharpness")
values = {
    "cap": setting(REMEDY_LR_CAP),
    "longer": LONGER_FACTOR,
    "warmup_steps": round(WARMUP_SHARE * SHARPNESS_MAX_STEPS),
}
labels, helps = (
    {k: v.format(**values) for k, v in lesson.texts[group].items()}
    for group in ("remedy_labels", "remedy_help")
)
link = PageLink("sharpness")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    preset, size, _ = workload_controls("shp")
    left, middle, right = st.columns([3, 1, 2])
    name = link.control(
        left, dataclasses.replace(preset, options=PRESETS_OFFERED), format_func=lambda n: PRESETS[n].label
    )
    chosen = link.control(middle, size, help=lesson.text("help_size"))
    right.text_input(
        "Optimizer", "plain SGD", disabled=True, key="shp_optimizer_shown", help=lesson.text("help_optimizer")
    )
    a, b, c, d = st.columns(4)
    small = link.choice(a, "Small batch", SMALL, 16, key="shp_small")
    large = link.choice(
        b,
        "Large batch",
        LARGE,
        4096,
        key="shp_large",
        format_func=lambda v: "the whole training set" if v == 4096 else str(v),
    )
    lr = link.choice(c, "Learning rate (both)", LRS, 0.3, key="shp_lr", format_func=lambda v: f"{setting(v)}")
    target = link.choice(
        d, "Train until the loss is", TARGETS, 0.01, key="shp_target", format_func=lambda v: f"{setting(v)}"
    )
    st.markdown(lesson.text("remedies"))
    picked = [
        remedy
        for remedy, where in zip(SHARPNESS_REMEDIES, st.columns(4), strict=True)
        if link.toggle(where, labels[remedy], False, key=f"shp_{remedy}", help=helps[remedy])
    ]
    st.caption(lesson.text("runs_caption", max_steps=SHARPNESS_MAX_STEPS))
    link.scenarios(SCENARIOS["sharpness"])
cfg = dataclasses.replace(workload(name, chosen, "sgd"), lr=float(lr))
with results:
    predict("sharpness")  # above the run button, in either order of the areas
    measurement.run_button(
        "shp",
        "Train both to the target",
        "sharpness",
        cfg,
        {"batch_sizes": [int(small), int(large)], "target_loss": float(target), "remedies": list(picked)},
    )


def draw(snap) -> None:
    runs = [p for p in snap.points if p.get("kind") == "sharpness_run"]
    r = snap.result
    if r is None:  # the runs' loss so far, streamed while they train; the finished ones' table
        live = charts.live_curves(snap.points, float(target))
        if live is not None:
            show_chart(live, "shp_live")
        if runs:
            st.dataframe(charts.sharpness_table(runs, None), hide_index=True, key="shp_progress")
        return
    curves, trace, cut = charts.sharpness_charts(r)
    left, right = st.columns(2)
    with left:
        show_chart(curves, "shp_curves", main=True)
    with right:
        show_chart(trace, "shp_trace")
    takeaway(recipes.sharpness_verdict(r))  # shown above the main chart (BASE_CSS lifts it)
    show_chart(cut, "shp_slice")
    table = charts.sharpness_table(r["runs"], r["train_samples"])
    st.dataframe(
        table,
        hide_index=True,
        key="shp_table",
        column_config={
            name: st.column_config.NumberColumn(format="%.4g")
            for name in table[0]
            if name not in ("run", "steps")
        },
    )
    st.caption(
        lesson.text(
            "measures_caption",
            samples=r["hessian_samples"],
            radius=percent(r["radius"], 0),
            iters=HESSIAN_ITERS,
        )
    )
    prediction_check("sharpness", recipes.sharpness_prediction(r), done=True)
    downloads("sharpness", "shp_dl", table, cut)


with results:
    measurement.job_view("shp", draw)

link.finish()
