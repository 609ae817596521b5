"""SGD, full batch, mini-batch: the three regimes on one model, data, seed and epoch budget."""

import dataclasses

import streamlit as st

from bsdemo import charts, lessonlinks, recipes
from bsdemo.presets import SCENARIOS
from bsdemo.ui import measurement
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, show_table, takeaway
from bsdemo.units import format_bytes

lesson = lesson_header("regimes")
link = PageLink("regimes")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    measurement.workload("reg", link)
    epochs, sgd, mini, cap = lessonlinks.REGIMES_CONTROLS[3:]
    limits = measurement.scheduler().limits
    cap_high = max(1, int(limits.max_wall_s // 3))  # the three share this server's cap for one job
    a, b, c, d = st.columns(4)
    link.control(a, epochs)
    link.control(b, sgd)
    link.control(c, dataclasses.replace(mini, high=min(mini.high, limits.max_batch_size)))
    link.control(
        d,
        dataclasses.replace(cap, high=cap_high, default=min(cap.default, cap_high)),
        help=lesson.text("help_cap"),
    )
    budget = measurement.budget_widget("reg", link, allow_none=True)
    runs = lessonlinks.regimes_runs(link.values())
    link.scenarios(SCENARIOS["regimes"])
with results:
    predict("regimes")  # above the run button, in either order of the areas
    measurement.group_button("reg", "Train all three", [r for _, r in runs], [n for n, _ in runs])


AXES = {"epochs": "epochs", "steps": "weight updates (log)", "seconds": "seconds (log)"}


def draw(snaps) -> None:
    chart = st.container()  # the chart above the choice of its x-axis (drawn after: it reads it)
    axis = (
        st.segmented_control(
            "Loss against", list(AXES), format_func=AXES.get, default="epochs", required=True, key="reg_axis"
        )
        or "epochs"
    )
    with chart:  # updates and seconds span three orders of magnitude between the regimes
        show_chart(charts.labelled_loss_chart(snaps, axis, log=axis != "epochs"), "reg_loss", main=True)
    rows = charts.comparison_table(snaps)
    verdict = recipes.regimes_verdict(rows)
    takeaway(verdict)  # shown above the main chart (BASE_CSS lifts it)
    show_table(rows, "reg_table", hide=("batch", "first loss", "peak loss"))  # batch: in labels
    for label, peak in recipes.over_budget(snaps, budget) if budget else []:
        st.error(
            f"{label} needs {format_bytes(peak)}: it would not fit in a {format_bytes(budget)} budget.",
            icon=":material/error:",
        )
    prediction_check("regimes", recipes.regimes_prediction(rows))
    if verdict:  # all three ended
        downloads("regimes", "reg_dl", rows, charts.labelled_loss_chart(snaps, "epochs"))


with results:
    measurement.group_view("reg", draw)
link.finish()
