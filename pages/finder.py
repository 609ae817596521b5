"""Choosing a batch size: predict from a few probes and verify with a real step; then each
architecture's batch range, measured here, beside the rule of thumb."""

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.architectures import ARCHITECTURES, DEFAULT_SECONDS
from bsdemo.presets import SCENARIOS
from bsdemo.recipes.measurements import FINDER_DEVICE_MARGIN
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, show_table, takeaway
from bsdemo.units import format_bytes

MARGINS = [round(0.05 * i, 2) for i in range(11)]  # 0%, 5%, … 50% of memory kept free
ARCH_BATCH_SETS = ("8,32,128,512", "4,16,64,256", "16,64,256,1024")
ARCH_SECONDS = (DEFAULT_SECONDS, 1.5, 2.5, 5.0, 10.0)

lesson_header("finder")
link = PageLink("finder")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = sweeps.workload("find", link)
    cpu = (sweeps.scheduler().device_info or {}).get("type", "cpu") == "cpu"
    device, about = recipes.simulated_device(cfg, FINDER_DEVICE_MARGIN)
    budget = sweeps.budget_widget("find", link, default=device if cpu else None, allow_none=True)
    if cpu:
        st.caption(f"Nothing limits memory on this CPU, so the default budget is a simulated device "
                   f"of {format_bytes(device)}: what this model is predicted to need at batch "
                   f"{about}, with the margin, applied to accounted memory (a lower bound of "
                   "what the process holds). Choose “the device's own” for this machine's "
                   "memory.")
    left, right = st.columns(2)
    margin = link.choice(left, "Safety margin (share of memory kept free)", MARGINS, 0.1,
                         key="find_margin", widget="select_slider", format_func=lambda m: f"{m:.0%}")
    target = link.number(right, "Target effective batch (0 = none)", 0,
                         sweeps.scheduler().limits.max_effective_batch_size, 0, key="find_target",
                         help="Reached with micro-batch × gradient-accumulation steps.")
    link.scenarios(SCENARIOS["finder"])
with results:
    predict("finder")  # above the run button, in either order of the areas
    sweeps.run_button("find", "Find my batch size", "find", cfg, {
        "memory_budget_bytes": budget, "margin": margin, "target_effective_batch": target or None,
        "reference_batch": 32, "reference_lr": cfg.lr})


def draw(snap) -> None:
    rows = [{"probe": p["probe"], "batch size": p["batch_size"], "status": p["status"],
             "peak memory": format_bytes(p["peak_memory_bytes"]) if p["peak_memory_bytes"] else "–",
             "samples/s": round(p["samples_per_sec"]) if p["samples_per_sec"] else None,
             "why": p["reason"]} for p in snap.points]
    show_table(rows, "find_probes")
    r = snap.result
    if r is None:
        return
    if r["batch_size"] is None:
        st.error(f"No batch size fits. {r['message']}")
        return
    accum = f" × {r['accumulation_steps']} accumulation steps" if r["accumulation_steps"] > 1 else ""
    st.success(f"**Use batch {r['batch_size']}{accum}.** {r['message']} The largest batch "
               f"took {r['probes']} real memory probes ({', '.join(map(str, r['tested_batch_sizes']))}); "
               f"doubling from 1 would have taken {recipes.doubling_trials(r['max_batch_size'] or 1)} "
               "(the last one failing) plus a bisection.")
    if r.get("throughput"):
        st.caption("The recommendation's samples/s: the sizes that fit, each timed in rounds "
                   "(a shuffled order each round), median and middle half.")
        show_table([{"batch size": t["batch_size"], "samples/s": round(t["samples_per_sec"]),
                     "middle half": f"{t['samples_per_sec_q1']:,.0f}–"
                                    f"{t['samples_per_sec_q3']:,.0f}",
                     "rounds": t["rounds"], "timed by": t["clock"]} for t in r["throughput"]],
                   "find_throughput")
    prediction_check("finder", recipes.finder_prediction(r))
    if "lr_linear" in r:
        st.markdown(f"Tuned at batch 32 with lr {cfg.lr:g}? For effective batch "
                    f"{r['effective_batch_size']} try **{r['lr_linear']:.3g}** (linear rule, "
                    f"lr × k) or **{r['lr_sqrt']:.3g}** (square-root rule, lr × √k), with a "
                    "warm-up.")
    downloads("finder", "find_dl", snap.points)


with results:
    sweeps.job_view("find", draw)

st.subheader("Each architecture's batch size, measured here")
st.caption("A CNN, a tiny Transformer and an LSTM (these two read the digits row by row) and a "
           "GAN, each from its own preset, trained at "
           "each batch size for the same short time — the budget you really have is time; "
           "on a CPU worker, the training thread's CPU time, so a busy server makes the study "
           "take longer but trains each run as far — "
           "with the lr scaled by √(B/32) from the preset's lr at batch 32 (the Transformer "
           "warms up over its first 10 steps). Each run gives samples/s, peak memory and the "
           "quality it reached. The page's dataset and model above do not apply here; its seed "
           "and device do.")
a, b = st.columns(2)
arch_batches = link.choice(a, "Batch sizes", ARCH_BATCH_SETS, ARCH_BATCH_SETS[0],
                           key="find_arch_batches")
seconds = link.choice(b, "Training seconds per run", ARCH_SECONDS, DEFAULT_SECONDS,
                      key="find_arch_seconds", format_func=lambda v: f"{v:g} s",
                      help=f"{len(ARCHITECTURES)} architectures × the batch sizes runs, each this "
                           "long plus its evaluations.")
sweeps.run_button("arch", "Measure each architecture", "architectures", cfg,
                  {"architectures": list(ARCHITECTURES),
                   "batch_sizes": [int(b) for b in arch_batches.split(",")],
                   "seconds": float(seconds)})


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
        if pair[0] == "speed" and snap.done:  # the takeaway right under the main charts
            takeaway(recipes.architecture_verdict(summaries, snap.options["seconds"], points),
                     key="takeaway_architectures")
    if summaries:
        show_table(charts.architecture_table(summaries), "arch_table")
    if snap.done:
        downloads("architectures", "arch_dl", points, figures["speed"])


sweeps.job_view("arch", draw_architectures)
link.finish()
