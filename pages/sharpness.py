"""Generalisation gap and sharpness: a small and a large batch trained to the same training loss."""

import dataclasses

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.jobkinds import (
    LONGER_FACTOR,
    REMEDY_LR_CAP,
    SHARPNESS_MAX_STEPS,
    SHARPNESS_REMEDIES,
    WARMUP_SHARE,
)
from bsdemo.lessonlinks import workload, workload_controls
from bsdemo.presets import PRESETS, SCENARIOS
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway

SMALL = (4, 8, 16, 32, 64)
LARGE = (256, 512, 4096)  # 4096: the whole training set of every preset the study offers
LRS = (0.05, 0.1, 0.2, 0.3, 0.5)
TARGETS = (0.05, 0.02, 0.01, 0.005)
PRESETS_OFFERED = ("digits-mlp", "digits-cnn", "synthetic-mlp", "moons-mlp", "spirals-mlp")
REMEDY_LABELS = {"scale_lr": f"lr × √k (≤ {REMEDY_LR_CAP:g})", "warmup": "Warm-up to it",
                 "longer": f"Train {LONGER_FACTOR}× longer", "noise": "Add small-batch noise"}
REMEDY_HELP = {
    "scale_lr": f"The large batch's lr times √k, k = large / small (Krizhevsky 2014; Hoffer et "
                f"al. 2017), at most {REMEDY_LR_CAP:g}: at k = 90 the rule asks for 2.8, and "
                "past 2 / (the starting sharpness) a step diverges.",
    "warmup": f"The same scaled lr, reached by a linear ramp over the first "
              f"{round(WARMUP_SHARE * SHARPNESS_MAX_STEPS)} steps (Goyal et al. 2017).",
    "longer": f"Keep training past the target, to {LONGER_FACTOR}× the steps it needed (Hoffer "
              "et al. 2017: 'train longer, generalise better').",
    "noise": "Add to each full-batch step the gradient noise of a small batch: the difference "
             "of two independent small-batch gradients, divided by √2.",
}

lesson_header("sharpness")
link = PageLink("sharpness")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    preset, size, _ = workload_controls("shp")
    left, middle, right = st.columns([3, 1, 2])
    name = link.control(left, dataclasses.replace(preset, options=PRESETS_OFFERED),
                        format_func=lambda n: PRESETS[n].label)
    chosen = link.control(middle, size, help="S/M/L/XL set the width and depth.")
    right.text_input("Optimizer", "plain SGD", disabled=True, key="shp_optimizer_shown",
                     help="The study is about plain gradient steps, whose stability limit is "
                          "2/lr.")
    a, b, c, d = st.columns(4)
    small = link.choice(a, "Small batch", SMALL, 16, key="shp_small")
    large = link.choice(b, "Large batch", LARGE, 4096, key="shp_large",
                        format_func=lambda v: "the whole training set" if v == 4096 else str(v))
    lr = link.choice(c, "Learning rate (both)", LRS, 0.3, key="shp_lr",
                     format_func=lambda v: f"{v:g}")
    target = link.choice(d, "Train until the loss is", TARGETS, 0.01, key="shp_target",
                         format_func=lambda v: f"{v:g}")
    st.markdown("**Remedies for the large batch** — each switch adds one more run of it:")
    picked = [remedy for remedy, where in zip(SHARPNESS_REMEDIES, st.columns(4), strict=True)
              if link.toggle(where, REMEDY_LABELS[remedy], False,
                             key=f"shp_{remedy}", help=REMEDY_HELP[remedy])]
    st.caption("Both runs start from the same initialisation and train with plain SGD until "
               "the loss over the whole training set first reaches the target (or "
               f"{SHARPNESS_MAX_STEPS:,} steps). Sharpness is measured at each solution; nothing "
               "is replayed.")
    link.scenarios(SCENARIOS["sharpness"])
cfg = dataclasses.replace(workload(name, chosen, "sgd"), lr=float(lr))
with results:
    predict("sharpness")  # above the run button, in either order of the areas
    sweeps.run_button("shp", "Train both to the target", "sharpness", cfg,
                      {"batch_sizes": [int(small), int(large)], "target_loss": float(target),
                       "remedies": list(picked)})


def draw(snap) -> None:
    runs = [p for p in snap.points if p.get("kind") == "sharpness_run"]
    r = snap.result
    if r is None:  # the runs' loss so far, streamed while they train; the finished ones' table
        live = charts.live_curves(snap.points, float(target))
        if live is not None:
            show_chart(live, "shp_live")
        if runs:
            st.dataframe(charts.sharpness_table(runs, None), hide_index=True,
                         key="shp_progress")
        return
    curves, trace, cut = charts.sharpness_charts(r)
    left, right = st.columns(2)
    with left:
        show_chart(curves, "shp_curves")
    with right:
        show_chart(trace, "shp_trace")
    takeaway(recipes.sharpness_verdict(r))  # right under the main charts
    show_chart(cut, "shp_slice")
    table = charts.sharpness_table(r["runs"], r["train_samples"])
    st.dataframe(table, hide_index=True, key="shp_table", column_config={
        name: st.column_config.NumberColumn(format="%.4g") for name in table[0]
        if name not in ("run", "steps")})
    st.caption(f"Top eigenvalue: the Hessian of the training loss over "
               f"{r['hessian_samples']:,} training samples, 20 power iterations. Rise nearby: "
               f"the mean rise of the training loss at 8 random points "
               f"{r['radius']:.0%} of each weight row's norm away.")
    prediction_check("sharpness", recipes.sharpness_prediction(r))
    downloads("sharpness", "shp_dl", table, cut)


with results:
    sweeps.job_view("shp", draw)

st.markdown(
    "**Why.** Near a minimum the loss is close to a bowl whose steepest curvature is the "
    "Hessian's top eigenvalue λ. A gradient step of size lr multiplies the distance from the "
    "bottom along that direction by (1 − lr·λ): past λ = 2/lr it overshoots further every step. "
    "Full-batch gradient descent follows the exact gradient, and trained long enough at one "
    "lr it drifts into ever sharper regions until λ reaches about 2/lr (Cohen et al. 2021); "
    "the trace above shows how far your run got before it reached the target. A small batch's gradient noise "
    "kicks it out of sharp valleys that its noise does not fit in, so it settles where the "
    "bottom is wide. Whether wide means better on the test set is the contested part: Keskar et "
    "al. (2017) found large batches generalise worse; Hoffer et al. (2017) and Goyal et al. "
    "(2017) closed most of that gap by training longer and scaling the learning rate; Dinh et "
    "al. (2017) showed that sharpness alone can be changed without changing the function.")
link.finish()
