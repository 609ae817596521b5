"""Gradient accumulation: k micro-batches of b equal one batch of k·b — until they don't."""

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.config import RunConfig
from bsdemo.presets import SCENARIOS
from bsdemo.ui import measurement
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway
from bsdemo.units import fixed, format_bytes

lesson = lesson_header("accumulation")
link = PageLink("accumulation")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    a, b, c = st.columns(3)
    micro = link.number(
        a, "Micro-batch b", 1, min(1024, measurement.scheduler().limits.max_batch_size), 32, key="acc_micro"
    )
    k = link.number(b, "Accumulation steps k", 1, 64, 4, key="acc_k")
    steps = link.number(c, "Optimizer steps compared", 1, 50, 5, key="acc_steps")
    st.markdown(lesson.text("break_it"))
    t1, t2, t3 = st.columns(3)
    unscaled = link.toggle(t1, "Forget to divide the loss by k", False, key="acc_unscaled")
    batchnorm = link.toggle(t2, "Use a BatchNorm model", False, key="acc_bn")
    variable = link.toggle(
        t3, "Variable-length sequences, per-token mean per micro-batch", False, key="acc_var"
    )
    cfg = RunConfig(norm="batch" if batchnorm else "none")
    link.scenarios(SCENARIOS["accumulation"])
with results:
    predict("accumulation")  # above the run button, in either order of the areas
    measurement.run_button(
        "acc",
        "Compare",
        "accum_check",
        cfg,
        {
            "micro_batch": int(micro),
            "accum": int(k),
            "steps": int(steps),
            "unscaled_loss": unscaled,
            "variable_length": variable,
        },
    )


def draw(snap) -> None:
    r = snap.result
    if r is None:
        return
    level, text = recipes.accumulation_verdict(r)
    chart = charts.accumulation_chart(r)
    show_chart(chart, "acc_chart", main=True)
    takeaway(text, level)  # shown above the main chart (BASE_CSS lifts it)
    cols = st.columns(4)
    cols[0].metric(
        f"Peak memory, one batch of {r['effective_batch_size']}", format_bytes(r["big_peak_memory_bytes"])
    )
    cols[1].metric(
        f"Peak memory, {r['accumulation_steps']} × {r['micro_batch']}",
        format_bytes(r["accumulated_peak_memory_bytes"]),
        help=r["memory_source"],
    )
    cols[2].metric("Samples/s, one batch", f"{fixed(r['big_samples_per_sec'], 0)}")
    cols[3].metric("Samples/s, accumulated", f"{fixed(r['accumulated_samples_per_sec'], 0)}")
    st.markdown("**Why.** " + recipes.accumulation_why(r))
    prediction_check("accumulation", recipes.accumulation_prediction(r))
    # the check's summary, then one row per parameter tensor
    downloads(
        "accumulation", "acc_dl", [{k: v for k, v in r.items() if k != "per_layer"}, *r["per_layer"]], chart
    )


with results:
    measurement.job_view("acc", draw)
link.finish()
