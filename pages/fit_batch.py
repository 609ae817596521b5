"""Fitting a bigger batch: mixed precision, gradient checkpointing and accumulation, measured
under one memory budget; then past one device: data parallelism in a real process group, and a
two-stage pipeline."""

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.presets import SCENARIOS
from bsdemo.ui import measurement, parallel
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, numbers_table, show_chart, takeaway
from bsdemo.units import format_bytes, signed

lesson = lesson_header("fit_batch")
link = PageLink("fit_batch")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = measurement.workload("fit", link)
    cpu = (measurement.scheduler().device_info or {}).get("type", "cpu") == "cpu"
    device, about = recipes.simulated_device(cfg, 0.0)
    budget = measurement.budget_widget("fit", link, default=device if cpu else None, allow_none=False)
    if cpu:
        st.caption(lesson.text("budget_cpu", device=format_bytes(device), about=about))
    accum = link.choice(
        st, "Accumulation: micro-batches per step", (2, 4, 8), 4, key="fit_accum", widget="select_slider"
    )
    link.scenarios(SCENARIOS["fit_batch"])
with results:
    predict("fit_batch")  # above the run button, in either order of the areas
    measurement.run_button(
        "fit",
        "Fit the biggest batch",
        "fit_batch",
        cfg,
        {"memory_budget_bytes": budget, "accumulation": int(accum)},
    )


def draw(snap) -> None:
    rows = [p for p in snap.points if p.get("kind") == "fit_batch_result"]
    if not rows:
        return
    chart = charts.fit_chart(rows, snap.options["memory_budget_bytes"])
    show_chart(chart, "fit_chart", main=True)
    if snap.done:  # the takeaway, shown above the main chart (BASE_CSS)
        takeaway(recipes.fit_verdict(rows, snap.options["memory_budget_bytes"], "cpu" if cpu else "cuda"))
    table = chart.table
    helps = {
        name: words.format(steps=rows[0]["budget_steps"], batch=rows[0]["budget_batch"])
        for name, words in lesson.texts["columns"].items()
    }
    # short number formats keep all nine columns inside 1280 px
    formats = {
        "samples/s": "%.0f",
        "bytes/sample": "%.0f",
        "loss after": "%.3f",
        "batch": "%d",
        "effective": "%d",
    }
    # a difference's sign as the text writes it (a real minus, no signed zero): printf cannot
    shown = [r | {"vs fp32": signed(r["vs fp32"], 3)} for r in table]
    numbers_table(shown, "fit_table", helps, formats | {name: "%.2f" for name in table[0] if "MiB" in name})
    if snap.done:
        prediction_check("fit_batch", recipes.fit_prediction(rows), done=True)
        downloads("fit_batch", "fit_dl", table, chart)


with results:
    measurement.job_view("fit", draw)

parallel.data_parallel(link, cfg, lesson, cpu)
parallel.pipeline(link, cfg, lesson)
link.finish()
