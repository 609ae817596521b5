"""Fitting a bigger batch: mixed precision, gradient checkpointing and accumulation, measured
under one memory budget; then past one device: data parallelism in a real process group, and a
two-stage pipeline."""

import dataclasses
import os

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.presets import SCENARIOS
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, show_table, takeaway
from bsdemo.units import format_bytes

lesson_header("fit_batch")
link = PageLink("fit_batch")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = sweeps.workload("fit", link)
    cpu = (sweeps.scheduler().device_info or {}).get("type", "cpu") == "cpu"
    device, about = recipes.simulated_device(cfg, 0.0)
    budget = sweeps.budget_widget("fit", link, default=device if cpu else None, allow_none=False)
    if cpu:
        st.caption(f"Nothing limits memory on this CPU, so the default budget is a simulated "
                   f"device of {format_bytes(device)}: what this model is predicted to need in "
                   f"fp32 at batch {about}. On the CPU the budget applies to accounted memory "
                   "(parameters, gradients, optimizer state, the activations saved for the "
                   "backward pass and a workspace), a lower bound of what the process holds; "
                   "beside it each technique's real peak — what torch's allocator held during a "
                   "step, at fp32's largest batch — says whether a saving is real. On a GPU the "
                   "allocator's own peak is the budget's measure.")
    accum = link.choice(st, "Accumulation: micro-batches per step", (2, 4, 8), 4,
                        key="fit_accum", widget="select_slider")
    link.scenarios(SCENARIOS["fit_batch"])
with results:
    predict("fit_batch")  # above the run button, in either order of the areas
    sweeps.run_button("fit", "Fit the biggest batch", "fit_batch", cfg,
                      {"memory_budget_bytes": budget, "accumulation": int(accum)})


def draw(snap) -> None:
    rows = [p for p in snap.points if p.get("kind") == "fit_batch_result"]
    if not rows:
        return
    chart = charts.fit_chart(rows, snap.options["memory_budget_bytes"])
    show_chart(chart, "fit_chart")
    if snap.done:  # the takeaway right under the main chart
        takeaway(recipes.fit_verdict(rows, snap.options["memory_budget_bytes"],
                                     "cpu" if cpu else "cuda"))
    table = chart.table
    helps = {"batch": "The largest batch one step of this technique fitted under the budget",
             "effective": "The batch the optimizer sees: accumulation's is its micro-batches "
                          "times that batch",
             "loss after": f"Training loss after {rows[0]['budget_steps']} steps at batch "
                           f"{rows[0]['budget_batch']} from the same start",
             "vs fp32": "This technique's loss after those steps, less fp32's",
             "accounted MiB": "The engine's count at the largest batch: what the budget is "
                              "applied to on the CPU"}
    # short number formats keep all nine columns inside 1280 px
    formats = {"samples/s": "%.0f", "bytes/sample": "%.0f", "loss after": "%.3f",
               "vs fp32": "%+.3f"}
    st.dataframe(table, hide_index=True, key="fit_table", column_config={
        name: st.column_config.NumberColumn(
            format=formats.get(name, "%.2f" if "MiB" in name else "%d" if name in (
                "batch", "effective") else "%.4g"),
            help=helps.get(name) or (
                "What torch's CPU allocator held during one step at this batch (the profiler's "
                "memory events), parameters and optimizer state included"
                if name.startswith("real MiB") else None))
        for name in table[0] if name != "technique"})
    if snap.done:
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
st.subheader("Past one device: data parallelism, for real")
st.caption("A torch.distributed process group (gloo) of real processes: each computes the "
           "gradient of its share of one global batch, an all-reduce averages them, and every "
           "process takes the same step. The same steps then run in one process with the whole "
           "batch, from the same start. Global batch = per-process batch × processes.")
a, b, c = st.columns(3)
processes = link.choice(a, "Processes", (1, 2, 3, 4), 2, key="fit_ddp_processes",
                        widget="select_slider",
                        help="This machine has " + str(os.cpu_count() or 1) + " cores; the "
                             "processes share them.")
per_process = link.choice(b, "Batch per process", (16, 32, 64, 128, 256), 64,
                          key="fit_ddp_batch", widget="select_slider")
ddp_steps = link.choice(c, "Steps compared", (3, 5, 10, 20), 5, key="fit_ddp_steps")
if cfg.model not in ("mlp", "cnn"):
    st.caption("The data-parallel check trains an MLP or a CNN: pick one of those above.")
sweeps.run_button("ddp", "Run the process group", "ddp",
                  dataclasses.replace(cfg, batch_size=int(per_process)),
                  {"processes": int(processes), "steps": int(ddp_steps)})


def progress_line(snap, kind: str) -> None:
    """A check's first figure while its group starts: one process's step, measured."""
    shown = [p for p in snap.points if p.get("kind") == kind]
    if shown and snap.result is None:
        st.metric("One process, a step (measured)", f"{shown[-1]['single_process_step_s'] * 1e3:.1f} ms")
        st.caption(shown[-1]["message"])


def draw_ddp(snap) -> None:
    r = snap.result
    if r is None:
        progress_line(snap, "ddp_progress")
        return
    show_chart(charts.ddp_chart(r), "ddp_chart")
    takeaway(recipes.ddp_verdict(r), key="takeaway_ddp")
    cols = st.columns(3)
    cols[0].metric("Largest parameter difference", f"{r['max_abs_param_diff']:.2g}",
                   help="Against one process with the whole global batch, after the same steps; "
                        "float32 rounding is about 1e-7 of a parameter's size.")
    cols[1].metric("All-reduce share of a step", f"{r['allreduce_s'] / r['step_s']:.0%}")
    cols[2].metric("Scaling efficiency", "too noisy" if r.get("too_noisy") else
                   f"{r['scaling_efficiency']:.0%}",
                   help="One process's time for the global batch ÷ (the group's step time × "
                        "processes). 100 % = perfect scaling.")
    st.markdown("**What a cluster of 8 GPUs would add — *predicted*, not measured:** the "
                "all-reduce of this model's gradients over a ring, at each link's published "
                "peak bandwidth (latency and protocol overhead come on top).")
    show_table(recipes.cluster_prediction(r), "ddp_cluster")
    if not cpu:
        st.caption("This server has one GPU: NCCL, the GPU backend, needs a GPU per process, so "
                   "the group ran gloo on the CPU. With two or more GPUs each process would hold "
                   "the model on its own GPU and the all-reduce would cross NVLink or PCIe.")
    downloads("fit_ddp", "ddp_dl", [r], None)


sweeps.job_view("ddp", draw_ddp)

st.subheader("Past one device's memory: a two-stage pipeline (model parallelism, shown)")
st.caption("The MLP cut in two, one half per process: micro-batches flow forward through stage "
           "0, their activations are sent to stage 1, and the gradients come back the same way "
           "(GPipe). A small-scale demonstration of the mechanism: both stages share this "
           "machine.")
a, b = st.columns(2)
micro = link.choice(a, "Micro-batches per step", (1, 2, 4, 8), 4, key="fit_pipe_micro",
                    widget="select_slider")
pipe_batch = link.choice(b, "Batch per step", (64, 128, 256), 128, key="fit_pipe_batch",
                         widget="select_slider")
pipe_cfg = dataclasses.replace(cfg, batch_size=int(pipe_batch))
if cfg.model != "mlp" or cfg.depth < 2:
    st.caption("The pipeline cuts an MLP with at least two hidden layers: pick an MLP preset "
               "above.")
sweeps.run_button("pipe", "Run the pipeline", "pipeline", pipe_cfg,
                  {"micro_batches": int(micro), "steps": 5})


def draw_pipeline(snap) -> None:
    r = snap.result
    if r is None:
        progress_line(snap, "pipeline_progress")
        return
    left, right = st.columns([3, 2])
    with left:
        show_chart(charts.pipeline_chart(r), "pipe_chart")
    with right:
        show_chart(charts.pipeline_memory_chart(r), "pipe_memory")
    takeaway(recipes.pipeline_verdict(r), key="takeaway_pipeline")
    downloads("fit_pipeline", "pipe_dl", [{k: v for k, v in r.items() if k != "schedule"}], None)


sweeps.job_view("pipe", draw_pipeline)
link.finish()
