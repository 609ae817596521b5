"""Choosing a batch size: predict from a few probes and verify with a real step; then each
architecture's batch range, measured here, beside the rule of thumb."""

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.architectures import ARCHITECTURES, DEFAULT_SECONDS
from bsdemo.presets import SCENARIOS
from bsdemo.recipes.measurements import FINDER_DEVICE_MARGIN
from bsdemo.ui import measurement
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, show_table, takeaway
from bsdemo.units import format_bytes, percent, setting

MARGINS = [round(0.05 * i, 2) for i in range(11)]  # 0%, 5%, … 50% of memory kept free
ARCH_BATCH_SETS = ("8,32,128,512", "4,16,64,256", "16,64,256,1024")
ARCH_SECONDS = (DEFAULT_SECONDS, 1.5, 2.5, 5.0, 10.0)

lesson = lesson_header("finder")
link = PageLink("finder")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = measurement.workload("find", link)
    cpu = (measurement.scheduler().device_info or {}).get("type", "cpu") == "cpu"
    device, about = recipes.simulated_device(cfg, FINDER_DEVICE_MARGIN)
    budget = measurement.budget_widget("find", link, default=device if cpu else None, allow_none=True)
    if cpu:
        st.caption(lesson.text("budget_cpu", device=format_bytes(device), about=about))
    left, right = st.columns(2)
    margin = link.choice(
        left,
        "Safety margin (share of memory kept free)",
        MARGINS,
        0.1,
        key="find_margin",
        widget="select_slider",
        format_func=lambda m: f"{percent(m, 0)}",
    )
    target = link.number(
        right,
        "Target effective batch (0 = none)",
        0,
        measurement.scheduler().limits.max_effective_batch_size,
        0,
        key="find_target",
        help=lesson.text("help_target"),
    )
    link.scenarios(SCENARIOS["finder"])
with results:
    predict("finder")  # above the run button, in either order of the areas
    measurement.run_button(
        "find",
        "Find my batch size",
        "find",
        cfg,
        {
            "memory_budget_bytes": budget,
            "margin": margin,
            "target_effective_batch": target or None,
            "reference_batch": 32,
            "reference_lr": cfg.lr,
        },
    )


def draw(snap) -> None:
    r = snap.result
    # the main result: the probes, the memory fit's prediction, the budget and the verified batch
    show_chart(charts.finder_chart(snap.points, r), "find_chart", main=True)
    if r is not None and r["batch_size"] is None:
        text = (
            lesson.text("diverged", message=r["message"])
            if r.get("outcome") == "diverged"
            else lesson.text("no_fit", message=r["message"])
        )
        takeaway(text, level="error")
    elif r is not None:
        takeaway(
            lesson.text(
                "use",
                use=recipes.finder_use(r),
                message=r["message"],
                probes=r["probes"],
                tested=", ".join(map(str, r["tested_batch_sizes"])),
                doubling=recipes.doubling_trials(r["max_batch_size"] or 1),
            ),
            level="success",
        )  # shown above the chart (BASE_CSS lifts it)
    show_table(charts.probe_table(snap.points), "find_probes")
    if r is None or r["batch_size"] is None:
        return
    if r.get("throughput"):
        st.caption(lesson.text("throughput"))
        show_table(charts.throughput_table(r["throughput"]), "find_throughput")
    prediction_check("finder", recipes.finder_prediction(r))
    if "lr_linear" in r:
        st.markdown(
            lesson.text(
                "lr_advice",
                lr=setting(cfg.lr),
                batch=r["effective_batch_size"],
                linear=setting(r["lr_linear"], 3),
                sqrt=setting(r["lr_sqrt"], 3),
            )
        )
    downloads("finder", "find_dl", snap.points)


with results:
    measurement.job_view("find", draw)

st.header(lesson.text("architectures_title"))
st.caption(lesson.text("architectures_caption"))
a, b = st.columns(2)
arch_batches = link.choice(a, "Batch sizes", ARCH_BATCH_SETS, ARCH_BATCH_SETS[0], key="find_arch_batches")
seconds = link.choice(
    b,
    "Training seconds per run",
    ARCH_SECONDS,
    DEFAULT_SECONDS,
    key="find_arch_seconds",
    format_func=lambda v: f"{setting(v)} s",
    help=lesson.text("help_seconds", count=len(ARCHITECTURES)),
)
measurement.run_button(
    "arch",
    "Measure each architecture",
    "architectures",
    cfg,
    {
        "architectures": list(ARCHITECTURES),
        "batch_sizes": [int(b) for b in arch_batches.split(",")],
        "seconds": float(seconds),
    },
)


def draw_architectures(snap) -> None:
    points = [p for p in snap.points if p.get("kind") == "architecture_point"]
    if not points:
        return
    figures = charts.architecture_charts(points, snap.options["seconds"])
    summaries = [p for p in snap.points if p.get("kind") == "architecture_summary"]
    for pair in (("speed", "memory"), ("accuracy", "frechet")):
        for column, name in zip(st.columns(2), pair, strict=True):
            with column:
                show_chart(figures[name], f"arch_{name}")
        if pair[0] == "speed" and snap.done:  # the takeaway, shown above the main chart (BASE_CSS)
            takeaway(
                recipes.architecture_verdict(summaries, snap.options["seconds"], points),
                key="takeaway_architectures",
            )
    if summaries:
        show_table(charts.architecture_table(summaries), "arch_table")
    if snap.done:
        downloads("architectures", "arch_dl", points, figures["speed"])


measurement.job_view("arch", draw_architectures)
link.finish()
