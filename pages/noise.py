"""Gradient noise: how the variance of a mini-batch gradient falls with the batch, and B_simple."""

import streamlit as st

from bsdemo import charts, recipes, toy
from bsdemo.presets import SCENARIOS
from bsdemo.ui import classroom, critical, measurement
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway
from bsdemo.units import fixed, setting

BATCH_SETS = ("1,4,16,64,256", "1,2,4,8,16,32,64,128,256,512", "1,8,64,512")


@st.cache_data(max_entries=32, show_spinner=False)
def paths_chart_for(steps: int, lr: float):
    return charts.paths_chart(toy.paths(lr=lr, steps=steps))


lesson = lesson_header("noise")
link = PageLink("noise")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = measurement.workload("noi", link)
    a, b, c = st.columns(3)
    sizes = link.choice(a, "Batch sizes", BATCH_SETS, BATCH_SETS[0], key="noi_batches")
    draws = link.number(
        b, "Gradients drawn per batch size", 4, 128, 32, key="noi_draws", help=lesson.text("help_draws")
    )
    after = link.number(
        c,
        "Train this many steps first (0 = at initialisation)",
        0,
        2000,
        0,
        key="noi_after",
        help=lesson.text("help_after"),
    )
    st.caption(lesson.text("full_gradient"))
    link.scenarios(SCENARIOS["noise"])
with results:
    predict("noise")  # above the run button, in either order of the areas
    classroom.sweep_panel("noise", cfg)  # in a class: the room's sweep of this lesson
    measurement.run_button(
        "noi",
        "Measure the noise",
        "noise",
        cfg,
        {"batch_sizes": [int(s) for s in sizes.split(",")], "draws": int(draws), "after_steps": int(after)},
    )


def draw(snap) -> None:
    r = snap.result
    if r is None:
        return
    variance, cosine = charts.noise_charts(r)
    left, right = st.columns(2)
    with left:
        show_chart(variance, "noi_variance", main=True)
    with right:
        show_chart(cosine, "noi_cosine")
    takeaway(recipes.noise_verdict(r))  # shown above the main chart (BASE_CSS lifts it)
    cols = st.columns(3)
    cols[0].metric(
        "Variance slope (log-log)", f"{fixed(r['variance_slope'], 2)}", help=lesson.text("help_slope")
    )
    lo, hi = r["b_simple_range"]
    cols[1].metric("B_simple, direct", f"{r['b_simple']:.0f}", help=lesson.text("help_direct", lo=lo, hi=hi))
    lo2, hi2 = r["b_simple_two_batch_range"]
    small, big = r["two_batch_sizes"]
    cols[2].metric(
        f"B_simple, two-batch ({small}/{big})",
        f"{r['b_simple_two_batch']:.0f}",
        help=lesson.text("help_two_batch", small=small, big=big, lo=lo2, hi=hi2),
    )
    prediction_check("noise", recipes.noise_prediction(r), done=True)
    downloads("noise", "noi_dl", variance.table, variance)


with results:
    measurement.job_view("noi", draw)

critical.study(link, cfg, lesson)

st.header(lesson.text("paths_title"))
st.caption(lesson.text("paths_caption"))
left, right = st.columns(2)
steps = link.number(left, "Steps (every path)", 5, 400, 100, key="noi_path_steps")
lr = link.choice(
    right,
    "Learning rate (every path)",
    (0.01, 0.02, 0.05, 0.1),
    0.05,
    key="noi_path_lr",
    widget="select_slider",
    format_func=lambda v: f"{setting(v)}",
)
surface = paths_chart_for(int(steps), float(lr))
show_chart(surface, "noi_paths")
takeaway(recipes.paths_verdict(surface.table, int(steps)), key="takeaway_paths")

link.finish()
