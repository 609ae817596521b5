"""Fitting a bigger batch: mixed precision, gradient checkpointing and accumulation, measured
under one memory budget."""

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.presets import SCENARIOS
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink, areas
from bsdemo.ui.widgets import downloads, show_chart
from bsdemo.units import format_bytes

lesson_header("fit_batch")
link = PageLink("fit_batch")

controls, results = areas()  # presentation mode: results above the controls
with controls:
    cfg = sweeps.workload("fit", link)
    cpu = (sweeps.scheduler().device_info or {}).get("type", "cpu") == "cpu"
    device, about = recipes.simulated_device(cfg, 0.0)
    budget = sweeps.budget_widget("fit", link, default=device if cpu else None, allow_none=False)
    if cpu:
        st.caption(f"Nothing limits memory on this CPU, so the default budget is a simulated "
                   f"device of {format_bytes(device)}: what this model is predicted to need in "
                   f"fp32 at batch {about}. On the CPU memory is accounted (parameters, gradients, "
                   "optimizer state and the activations saved for the backward pass); on a GPU "
                   "it is the allocator's own peak.")
    accum = link.choice(st, "Accumulation: micro-batches per step", (2, 4, 8), 4,
                        key="fit_accum", widget="select_slider")
    link.scenarios(SCENARIOS["fit_batch"])
    predict("fit_batch")
with results:
    sweeps.run_button("fit", "Fit the biggest batch", "fit_batch", cfg,
                      {"memory_budget_bytes": budget, "accumulation": int(accum)})


def draw(snap) -> None:
    rows = [p for p in snap.points if p.get("kind") == "fit_batch_result"]
    if not rows:
        return
    chart = charts.fit_chart(rows, snap.options["memory_budget_bytes"])
    show_chart(chart, "fit_chart")
    table = chart.table
    st.dataframe(table, hide_index=True, key="fit_table", column_config={
        name: st.column_config.NumberColumn(format="%.4g") for name in table[0]
        if name not in ("technique", "largest batch", "effective batch")})
    if snap.done:
        verdict = recipes.fit_verdict(rows, snap.options["memory_budget_bytes"],
                                      "cpu" if cpu else "cuda")
        if verdict:
            st.markdown(verdict)
        prediction_check("fit_batch", recipes.fit_prediction(rows))
        downloads("fit_batch", "fit_dl", table, chart)


with results:
    sweeps.job_view("fit", draw)

st.markdown(
    "**Why.** A step's memory is a fixed part — the parameters, their gradients, the optimizer's "
    "state — plus the activations the forward pass saves for the backward, which grow with the "
    "batch. *Mixed precision* (autocast) saves them in 16 bits instead of 32, halving the part "
    "that grows; the parameters stay in fp32. *Gradient checkpointing* keeps only each block's "
    "input and recomputes the block's forward pass during the backward: memory for time. "
    "*Accumulation* never holds more than one micro-batch: the optimizer sees k of them as one "
    "batch, at the micro-batch's memory and k times its time.")
st.info("Still to come on this page: data parallelism across real processes (gradients averaged "
        "by all-reduce) and a two-stage pipeline — the ways to go past one device. The first "
        "already runs in a terminal: `python -m bsdemo ddp-check --processes 2` starts a "
        "torch.distributed group and compares it with one process.",
        icon=":material/construction:")
link.finish()
