"""Gradient noise: how the variance of a mini-batch gradient falls with the batch, and B_simple."""

import dataclasses

import streamlit as st

from bsdemo import charts, recipes, toy
from bsdemo.jobkinds import LR_RULES
from bsdemo.presets import SCENARIOS
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway

BATCH_SETS = ("1,4,16,64,256", "1,2,4,8,16,32,64,128,256,512", "1,8,64,512")
CRITICAL_BATCHES = (1, 4, 16, 64, 256, 4096)  # 4096: the whole training set
RULE_LABELS = {"constant": "the same lr for all", "sqrt": "× √(B/32)", "linear": "× B/32"}

@st.cache_data(max_entries=32, show_spinner=False)
def paths_chart_for(steps: int, lr: float):
    return charts.paths_chart(toy.paths(lr=lr, steps=steps))


lesson_header("noise")
link = PageLink("noise")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = sweeps.workload("noi", link)
    a, b, c = st.columns(3)
    sizes = link.choice(a, "Batch sizes", BATCH_SETS, BATCH_SETS[0], key="noi_batches")
    draws = link.number(b, "Gradients drawn per batch size", 4, 128, 32, key="noi_draws",
                        help="More draws, narrower ranges; each is one forward and backward "
                             "pass.")
    after = link.number(c, "Train this many steps first (0 = at initialisation)", 0, 2000, 0,
                        key="noi_after", help="With the page's optimizer and lr at batch 32.")
    st.caption("The full-batch gradient G is taken over the whole training set; each mini-batch "
               "gradient g_B over B samples drawn without replacement. Nothing is trained "
               "unless you ask for steps first.")
    link.scenarios(SCENARIOS["noise"])
with results:
    predict("noise")  # above the run button, in either order of the areas
    sweeps.run_button("noi", "Measure the noise", "noise", cfg,
                      {"batch_sizes": [int(s) for s in sizes.split(",")], "draws": int(draws),
                       "after_steps": int(after)})


def draw(snap) -> None:
    r = snap.result
    if r is None:
        return
    variance, cosine = charts.noise_charts(r)
    left, right = st.columns(2)
    with left:
        show_chart(variance, "noi_variance")
    with right:
        show_chart(cosine, "noi_cosine")
    takeaway(recipes.noise_verdict(r))  # right under the main chart
    cols = st.columns(3)
    cols[0].metric("Variance slope (log-log)", f"{r['variance_slope']:.2f}",
                   help="Least squares on log variance against log batch; 1/B is −1.")
    lo, hi = r["b_simple_range"]
    cols[1].metric("B_simple, direct", f"{r['b_simple']:.0f}",
                   help=f"tr(Σ)/|G|²; the middle 68 % of bootstrap estimates: {lo:.0f}–{hi:.0f}.")
    lo2, hi2 = r["b_simple_two_batch_range"]
    small, big = r["two_batch_sizes"]
    cols[2].metric(f"B_simple, two-batch ({small}/{big})", f"{r['b_simple_two_batch']:.0f}",
                   help=f"From |g_B|² at batch {small} and {big} only; the middle 68 % of "
                        f"bootstrap estimates: {lo2:.0f}–{hi2:.0f}.")
    prediction_check("noise", recipes.noise_prediction(r))
    downloads("noise", "noi_dl", variance.table, variance)


with results:
    sweeps.job_view("noi", draw)

st.subheader("What the noise buys: steps to a target loss, and the critical batch")
st.caption("One run per batch size from the same initialisation, plain SGD, each until the loss "
           "over the whole training set first reaches the target. The lr follows the rule you "
           "pick, from the reference batch's lr — as a practitioner scales it, not tuned per "
           "batch.")
a, b, c, d = st.columns(4)
rule = link.choice(a, "lr rule", LR_RULES, "sqrt", key="noi_rule",
                   format_func=RULE_LABELS.get)
ref_lr = link.choice(b, "lr at batch 32", (0.05, 0.1, 0.2, 0.3), 0.2, key="noi_ref_lr",
                     format_func=lambda v: f"{v:g}")
cap = link.choice(c, "…but never above", (0.4, 0.8, 1.6), 0.8, key="noi_cap",
                  format_func=lambda v: f"{v:g}",
                  help="Past 2/sharpness a step overshoots: a rule that grows the lr without "
                       "bound makes the largest batches diverge.")
target = link.choice(d, "Target training loss", (0.3, 0.1, 0.05), 0.1, key="noi_target",
                     format_func=lambda v: f"{v:g}")
sweeps.run_button("noc", "Train to the target at each batch", "critical",
                  dataclasses.replace(cfg, optimizer="sgd", lr=float(ref_lr)),
                  {"batch_sizes": list(CRITICAL_BATCHES), "target_loss": float(target),
                   "rule": rule, "reference_batch": 32, "lr_cap": float(cap)})


def draw_critical(snap) -> None:
    r = snap.result
    if r is None:
        done = [p for p in snap.points if p.get("kind") == "critical_point"]
        if done:
            st.caption("So far: " + "; ".join(
                f"batch {p['batch_size']}: {p['reached_at'] or p['status']}" for p in done))
        return
    noise_job = sweeps.shown().get("noi_job")
    noise = sweeps.scheduler().snapshot(noise_job) if noise_job is not None else None
    shared = noise and recipes.shared_b_simple(noise.config, noise.options, noise.result,
                                               snap.config)
    if shared:  # the measurement above saw the same start: its value, not a second estimate
        r = {**r, "b_simple": shared}
    chart = charts.critical_chart(r)
    show_chart(chart, "noc_chart")
    takeaway(recipes.critical_verdict(r), key="takeaway_critical")
    cols = st.columns(3)
    cols[0].metric("Fewest steps (S_min)", f"{r['s_min']:,.0f}" if r["s_min"] else "–")
    cols[1].metric("Critical batch", f"{r['b_crit']:.0f}" if r["b_crit"] else "–",
                   help="Where the steps to the target are twice the fewest (log-log "
                        "interpolation between the measured batches).")
    cols[2].metric("B_simple at initialisation", f"{r['b_simple']:.0f}",
                   help="The measurement above's direct estimate: it measured this same start."
                   if shared else "tr(Σ)/|G|² from 32 batch-1 gradients at the runs' common "
                   "start (measure the noise above, at initialisation, for a finer estimate).")
    downloads("critical", "noc_dl", chart.table, chart)


sweeps.job_view("noc", draw_critical)

st.subheader("Noise you can see: SGD on a two-parameter problem")
st.caption("Least squares y ≈ w·x + b on 256 points: the loss over (w, b) is drawn exactly, and "
           "each path is real mini-batch SGD from one start with one learning rate, computed "
           "here as you move the controls.")
left, right = st.columns(2)
steps = link.number(left, "Steps (every path)", 5, 400, 100, key="noi_path_steps")
lr = link.choice(right, "Learning rate (every path)", (0.01, 0.02, 0.05, 0.1), 0.05,
                 key="noi_path_lr", widget="select_slider", format_func=lambda v: f"{v:g}")
surface = paths_chart_for(int(steps), float(lr))
show_chart(surface, "noi_paths")
takeaway(recipes.paths_verdict(surface.table, int(steps)), key="takeaway_paths")

st.markdown(
    "**Why.** A mini-batch gradient is the mean of B per-sample gradients. Averaging B "
    "independent draws divides their variance by B — and drawing without replacement from a "
    "finite set divides it further by (N − 1)/(N − B), down to nothing at the full batch. The "
    "signal, |G|², does not shrink. So past the batch where the noise tr(Σ)/B falls below the "
    "signal — B_simple — a larger batch makes each step only a little better.")
link.finish()
