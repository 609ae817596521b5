"""Learning-rate scaling: raise the batch by k — and the learning rate with it."""

import dataclasses

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header
from bsdemo.ui.widgets import LR_CHOICES, show_chart, show_table

lesson_header("lr_scaling")

cfg = sweeps.workload("lr")
a, b, c, d = st.columns(4)
ref_batch = a.number_input("Reference batch", 1, 4096, 16, key="lr_ref_batch")
ref_lr = b.select_slider("Reference lr", LR_CHOICES, 0.05, key="lr_ref_lr",
                         format_func=lambda v: f"{v:g}")
k = c.number_input("Batch multiplier k", 1, 256, 8, key="lr_k")
epochs = d.number_input("Epochs", 1, 100, 10, key="lr_epochs")
base = dataclasses.replace(cfg, epochs=int(epochs), time_limit_s=30.0)
variants = recipes.lr_variants(base, int(ref_batch), ref_lr, int(k))
if ref_batch * k > base.validated()[0].train_samples:
    st.info(f"Batch {ref_batch * k} is more than the training set: it will be clamped (full "
            "batch).")
sweeps.group_button("lr", "Compare", [v for _, v in variants], [n for n, _ in variants])


def draw(snaps) -> None:
    show_chart(charts.labelled_loss_chart(snaps, "epochs"), "lr_loss")
    rows = charts.comparison_table(snaps)
    show_table(rows, "lr_table", hide=("batch", "lr"))  # both are in the run labels
    verdict = recipes.lr_verdict(rows)
    if verdict:
        st.markdown(verdict)


sweeps.group_view("lr", draw)

st.subheader("Where the best learning rate sits, per batch size")
grid_epochs = st.number_input("Epochs per cell", 1, 50, 3, key="lr_grid_epochs")
cells = recipes.lr_grid(cfg, int(grid_epochs))
sweeps.group_button("grid", f"Train the {len(cells)}-run grid", [run for _, run in cells],
                    [n for n, _ in cells], key="grid_run")


def draw_grid(snaps) -> None:
    results = recipes.grid_cells(snaps)
    show_chart(charts.lr_grid_chart(results), "lr_grid")
    verdict = recipes.best_lr_verdict(recipes.best_lr_per_batch(results))
    if verdict:
        st.markdown(verdict)


sweeps.group_view("grid", draw_grid)
