"""Gradient noise: how the variance of a mini-batch gradient falls with the batch, and B_simple."""

import streamlit as st

from bsdemo import charts, recipes, toy
from bsdemo.presets import SCENARIOS
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink, areas
from bsdemo.ui.widgets import downloads, show_chart

BATCH_SETS = ("1,4,16,64,256", "1,2,4,8,16,32,64,128,256,512", "1,8,64,512")

@st.cache_data(max_entries=32, show_spinner=False)
def paths_chart_for(steps: int, lr: float):
    return charts.paths_chart(toy.paths(lr=lr, steps=steps))


lesson_header("noise")
link = PageLink("noise")

controls, results = areas()  # presentation mode: results above the controls
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
    predict("noise")
with results:
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
    cols = st.columns(3)
    cols[0].metric("Variance slope (log-log)", f"{r['variance_slope']:.2f}",
                   help="Least squares on log variance against log batch; 1/B is −1.")
    lo, hi = r["b_simple_range"]
    cols[1].metric("B_simple, direct", f"{r['b_simple']:.0f}",
                   help=f"tr(Σ)/|G|²; 16–84 % bootstrap range {lo:.0f}–{hi:.0f}.")
    lo2, hi2 = r["b_simple_two_batch_range"]
    small, big = r["two_batch_sizes"]
    cols[2].metric(f"B_simple, two-batch ({small}/{big})", f"{r['b_simple_two_batch']:.0f}",
                   help=f"From |g_B|² at batch {small} and {big} only; 16–84 % range "
                        f"{lo2:.0f}–{hi2:.0f}.")
    verdict = recipes.noise_verdict(r)
    if verdict:
        st.markdown(verdict)
    prediction_check("noise", recipes.noise_prediction(r))
    downloads("noise", "noi_dl", variance.table, variance)


with results:
    sweeps.job_view("noi", draw)

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
st.markdown(recipes.paths_verdict(surface.table, int(steps)))

st.markdown(
    "**Why.** A mini-batch gradient is the mean of B per-sample gradients. Averaging B "
    "independent draws divides their variance by B — and drawing without replacement from a "
    "finite set divides it further by (N − 1)/(N − B), down to nothing at the full batch. The "
    "signal, |G|², does not shrink. So past the batch where the noise tr(Σ)/B falls below the "
    "signal — B_simple — a larger batch makes each step only a little better.")
link.finish()
