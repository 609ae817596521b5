"""Learning-rate scaling: raise the batch by k — and the learning rate with it."""

import dataclasses

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import LR_CHOICES, downloads, show_chart, show_table

lesson_header("lr_scaling")
link = PageLink("lr_scaling")

# a preset fills these widgets (its optimizer on the digits MLP); the first is the page's default
PRESET_KEYS = {"optimizer": "lr_optimizer", "ref_batch": "lr_ref_batch", "ref_lr": "lr_ref_lr",
               "k": "lr_k", "epochs": "lr_epochs"}


def use_preset(name: str) -> None:
    """on_click: set the comparison's widgets to a preset's values."""
    st.session_state.update({key: recipes.LR_PRESETS[name][field]
                             for field, key in PRESET_KEYS.items()})
    st.session_state.update(lr_preset="digits-mlp", lr_size="preset")


default = next(iter(recipes.LR_PRESETS.values()))
buttons = st.columns([1.2, 2, 2, 3], vertical_alignment="center")
buttons[0].markdown("**Start from:**")
for column, name in zip(buttons[1:], recipes.LR_PRESETS, strict=False):
    column.button(name, key=f"lr_use_{name}", on_click=use_preset, args=(name,),
                  help="Sets the optimizer, reference batch and lr, k and epochs below.")
cfg = sweeps.workload("lr", link)
a, b, c, d = st.columns(4)
ref_batch = link.number(a, "Reference batch", 1, 4096, default["ref_batch"], key="lr_ref_batch")
ref_lr = link.choice(b, "Reference lr", LR_CHOICES, default["ref_lr"], key="lr_ref_lr",
                     widget="select_slider", format_func=lambda v: f"{v:g}")
k = link.number(c, "Batch multiplier k", 1, 256, default["k"], key="lr_k")
epochs = link.number(d, "Epochs", 1, 100, default["epochs"], key="lr_epochs")
base = dataclasses.replace(cfg, epochs=int(epochs), time_limit_s=30.0)
variants = recipes.lr_variants(base, int(ref_batch), ref_lr, int(k))
if ref_batch * k > base.validated()[0].train_samples:
    st.info(f"Batch {ref_batch * k} is more than the training set: it will be clamped (full "
            "batch).")
predict("lr_scaling")
sweeps.group_button("lr", "Compare", [v for _, v in variants], [n for n, _ in variants])


def draw(snaps) -> None:
    main = charts.labelled_loss_chart(snaps, "epochs")
    show_chart(main, "lr_loss")
    rows = charts.comparison_table(snaps)
    # batch and lr are in the run labels, the first loss is in the closing text's ratio, and
    # memory belongs to another lesson: what is left fits 1280 px
    show_table(rows, "lr_table", hide=("batch", "lr", "first loss", "peak memory (MiB)"))
    verdict = recipes.lr_verdict(rows)
    if verdict:
        st.markdown(verdict)
    prediction_check("lr_scaling", recipes.lr_prediction(rows))
    if verdict:  # all five ended
        downloads("lr_scaling", "lr_dl", rows, main)


sweeps.group_view("lr", draw)

st.subheader("Where the best learning rate sits, per batch size")
grid_epochs = link.number(st, "Epochs per cell", 1, 50, 3, key="lr_grid_epochs")
cells = recipes.lr_grid(cfg, int(grid_epochs))
sweeps.group_button("grid", f"Train the {len(cells)}-run grid", [run for _, run in cells],
                    [n for n, _ in cells], key="grid_run")


def draw_grid(snaps) -> None:
    results = recipes.grid_cells(snaps)
    grid = charts.lr_grid_chart(results)
    show_chart(grid, "lr_grid")
    verdict = recipes.best_lr_verdict(recipes.best_lr_per_batch(results))
    if verdict:
        st.markdown(verdict)
    if all(s.done for _, s in snaps):
        downloads("lr_scaling", "grid_dl", results, grid)


sweeps.group_view("grid", draw_grid)
link.finish()
