"""Normalisation at tiny batches: BatchNorm leans on the batch, GroupNorm and LayerNorm do not."""

import dataclasses

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.presets import SCENARIOS
from bsdemo.ui import measurement
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway

BATCH_SETS = ("2,4,8,32,128", "2,8,32", "2,4,8,16,32,64,128,256")

lesson = lesson_header("norms")
link = PageLink("norms")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = measurement.workload("nrm", link)
    left, right = st.columns(2)
    epochs = link.number(
        left, "Epochs (every run)", 1, 20, 2, key="nrm_epochs", help=lesson.text("help_epochs")
    )
    sizes = link.choice(right, "Batch sizes", BATCH_SETS, BATCH_SETS[0], key="nrm_batches")
    st.caption(lesson.text("grid_caption"))
    link.scenarios(SCENARIOS["norms"])
with results:
    predict("norms")  # above the run button, in either order of the areas
    measurement.run_button(
        "nrm",
        "Train the grid",
        "norms",
        dataclasses.replace(cfg, epochs=int(epochs), accumulation_steps=1),
        {"batch_sizes": [int(b) for b in sizes.split(",")]},
    )


def draw(snap) -> None:
    cells = [p for p in snap.points if p.get("kind") == "norms_result"]
    if not cells:
        return
    chart = charts.norms_chart(cells)
    show_chart(chart, "nrm_chart", main=True)
    if snap.done:  # the takeaway, shown above the main chart (BASE_CSS)
        takeaway(recipes.norms_verdict(cells, cfg.model))
    st.caption(lesson.text("table_caption"))
    table = charts.norms_table(cells)
    st.dataframe(
        table,
        hide_index=True,
        key="nrm_table",
        column_config={
            name: st.column_config.NumberColumn(format="%.1f") for name in table[0] if name != "normalisation"
        },
    )
    if snap.done:
        prediction_check("norms", recipes.norms_prediction(cells), done=True)
        downloads("norms", "nrm_dl", cells, chart)


with results:
    measurement.job_view("nrm", draw)

st.markdown(lesson.text("accumulation"))
st.page_link(
    "pages/accumulation.py",
    label=lesson.text("accumulation_link"),
    icon=":material/layers:",
    query_params={"bn": "1"},
)
link.finish()
