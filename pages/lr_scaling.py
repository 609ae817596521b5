"""Learning-rate scaling: raise the batch by k — and the learning rate with it."""

import streamlit as st

from bsdemo import charts, lessonlinks, recipes
from bsdemo.presets import SCENARIOS
from bsdemo.ui import classroom, measurement
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, show_table, takeaway
from bsdemo.units import setting

lesson = lesson_header("lr_scaling")
link = PageLink("lr_scaling")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = measurement.workload("lr", link)
    a, b, c, d, e = st.columns(5)
    ref_batch, ref_lr, k, epochs, warmup = lessonlinks.LR_CONTROLS[3:]
    link.control(a, ref_batch)
    link.control(b, ref_lr, widget="select_slider", format_func=lambda v: f"{setting(v)}")
    link.control(c, k)
    link.control(d, epochs)
    link.control(e, warmup, help=lesson.text("help_warmup"))
    values = link.values()
    variants = lessonlinks.lr_runs(values)
    big = variants[1][1]  # "lr unchanged": the reference batch × k
    if values["ref_batch"] * values["k"] > big.validated()[0].train_samples:
        st.info(
            f"Batch {values['ref_batch'] * values['k']} is more than the training set: it will "
            "be clamped (full batch)."
        )
    link.scenarios(SCENARIOS["lr_scaling"])
with results:
    predict("lr_scaling")  # above the run button, in either order of the areas
    classroom.sweep_panel("lr_scaling", cfg)  # in a class: the room's sweep of this lesson
    measurement.group_button("lr", "Compare", [v for _, v in variants], [n for n, _ in variants])


def draw(snaps) -> None:
    main = charts.labelled_loss_chart(snaps, "epochs")
    show_chart(main, "lr_loss", main=True)
    rows = charts.comparison_table(snaps)
    verdict = recipes.lr_verdict(rows)
    takeaway(verdict)  # shown above the main chart (BASE_CSS lifts it)
    # batch and lr are in the run labels, the first loss is in the closing text's ratio, and
    # memory belongs to another lesson: what is left fits 1280 px
    show_table(rows, "lr_table", hide=("batch", "lr", "first loss", "peak memory (MiB)"))
    prediction_check("lr_scaling", recipes.lr_prediction(rows))
    if verdict:  # all five ended
        downloads("lr_scaling", "lr_dl", rows, main)


with results:
    measurement.group_view("lr", draw)

st.header("Where the best learning rate sits, per batch size")
grid_epochs = link.number(st, "Epochs per cell", 1, 50, 3, key="lr_grid_epochs")
cells = recipes.lr_grid(cfg, int(grid_epochs))
measurement.group_button(
    "grid",
    f"Train the {len(cells)}-run grid",
    [run for _, run in cells],
    [n for n, _ in cells],
    key="grid_run",
)


def draw_grid(snaps) -> None:
    results = recipes.grid_cells(snaps)
    grid = charts.lr_grid_chart(results)
    show_chart(grid, "lr_grid")
    if not all(s.done for _, s in snaps):  # no ranking from cells still training
        st.caption(
            f"{sum(not s.done for _, s in snaps)} of {len(snaps)} cells still training: "
            "a batch's ★ appears when its whole row is done, the verdict when all are."
        )
        return
    verdict = recipes.best_lr_verdict(recipes.best_lr_per_batch(results), sorted({c["lr"] for c in results}))
    takeaway(verdict, key="takeaway_grid")
    downloads("lr_scaling", "grid_dl", results, grid)


measurement.group_view("grid", draw_grid)
link.finish()
