"""Normalisation at tiny batches: BatchNorm leans on the batch, GroupNorm and LayerNorm do not."""

import dataclasses

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.presets import SCENARIOS
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway

BATCH_SETS = ("2,4,8,32,128", "2,8,32", "2,4,8,16,32,64,128,256")

lesson_header("norms")
link = PageLink("norms")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = sweeps.workload("nrm", link)
    left, right = st.columns(2)
    epochs = link.number(left, "Epochs (every run)", 1, 20, 2, key="nrm_epochs",
                         help="Every cell trains the same epochs, so larger batches make fewer "
                              "updates.")
    sizes = link.choice(right, "Batch sizes", BATCH_SETS, BATCH_SETS[0], key="nrm_batches")
    st.caption("Each normalisation (none, BatchNorm, GroupNorm, LayerNorm) is trained at each "
               "batch size from the same seed: one run per cell, then two evaluations of the "
               "test set in training mode, shuffled two ways.")
    link.scenarios(SCENARIOS["norms"])
with results:
    predict("norms")  # above the run button, in either order of the areas
    sweeps.run_button("nrm", "Train the grid", "norms",
                      dataclasses.replace(cfg, epochs=int(epochs), accumulation_steps=1),
                      {"batch_sizes": [int(b) for b in sizes.split(",")]})


def draw(snap) -> None:
    cells = [p for p in snap.points if p.get("kind") == "norms_result"]
    if not cells:
        return
    chart = charts.norms_chart(cells)
    show_chart(chart, "nrm_chart")
    if snap.done:  # the takeaway right under the main chart
        takeaway(recipes.norms_verdict(cells, cfg.model))
    st.caption("Test accuracy (%) per normalisation and batch size; the last two BatchNorm rows: "
               "accuracy with the test batch's own statistics, and the share (%) of its "
               "predictions that changed when only the batch-mates did.")
    table = charts.norms_table(cells)
    st.dataframe(table, hide_index=True, key="nrm_table", column_config={
        name: st.column_config.NumberColumn(format="%.1f") for name in table[0]
        if name != "normalisation"})
    if snap.done:
        prediction_check("norms", recipes.norms_prediction(cells))
        downloads("norms", "nrm_dl", cells, chart)


with results:
    sweeps.job_view("nrm", draw)

st.markdown(
    "**Why.** BatchNorm replaces each feature x by (x − mean) / std over the batch, then scales "
    "and shifts it. At batch 2 the mean and standard deviation of two numbers are a poor "
    "estimate of the data's, and each sample is normalised against its one partner. At "
    "evaluation BatchNorm uses running averages gathered in training instead, so the model it "
    "trained is not quite the model it tests. GroupNorm (groups of features) and LayerNorm (all "
    "features) normalise one sample at a time: the batch size never enters.")
st.markdown(
    "**And accumulation does not help.** Accumulating 16 micro-batches of 2 gives the optimizer "
    "the gradient of 32 samples, but BatchNorm still normalises each forward pass over its own "
    "2: its statistics are per micro-batch. The accumulation page's BatchNorm switch measures "
    "the difference this makes; with GroupNorm or LayerNorm accumulation is exact again.")
st.page_link("pages/accumulation.py", label="Open Gradient accumulation (its BatchNorm switch)",
             icon=":material/layers:", query_params={"bn": "1"})
link.finish()
