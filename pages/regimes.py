"""SGD, full batch, mini-batch: the three regimes on one model, data, seed and epoch budget."""

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, show_table
from bsdemo.units import format_bytes

lesson_header("regimes")
link = PageLink("regimes")

cfg = sweeps.workload("reg", link)
a, b, c, d = st.columns(4)
epochs = link.number(a, "Epochs (each regime)", 1, 100, 5, key="reg_epochs")
sgd = link.number(b, "SGD batch", 1, 16, 1, key="reg_sgd")
limits = sweeps.scheduler().limits
mini = link.number(c, "Mini-batch", 2, min(4096, limits.max_batch_size), 32, key="reg_mini")
cap = link.number(d, "Time cap per run (s)", 1, max(1, int(limits.max_wall_s // 3)),
                  min(20, max(1, int(limits.max_wall_s // 3))), key="reg_cap",
                  help="A run that reaches it stops and says so. The three share this "
                       "server's time cap for one job.")
budget = sweeps.budget_widget("reg", link, allow_none=True)
runs = [(recipes.regime_label(name, run), run) for name, run in recipes.regime_configs(
    cfg, int(epochs), int(mini), float(cap), sgd_batch=int(sgd))]
predict("regimes")
sweeps.group_button("reg", "Train all three", [r for _, r in runs], [n for n, _ in runs])


def draw(snaps) -> None:
    tabs = st.tabs(["against epochs", "against weight updates (log)", "against seconds (log)"])
    for tab, axis in zip(tabs, ("epochs", "steps", "seconds"), strict=True):
        with tab:  # updates and seconds span three orders of magnitude between the regimes
            show_chart(charts.labelled_loss_chart(snaps, axis, log=axis != "epochs"),
                       f"reg_loss_{axis}")
    rows = charts.comparison_table(snaps)
    show_table(rows, "reg_table", hide=("batch", "first loss", "peak loss"))  # batch: in labels
    for label, peak in recipes.over_budget(snaps, budget) if budget else []:
        st.error(f"{label} needs {format_bytes(peak)}: it would not fit in a "
                 f"{format_bytes(budget)} budget.", icon=":material/error:")
    verdict = recipes.regimes_verdict(rows)
    if verdict:
        st.markdown(verdict)
    prediction_check("regimes", recipes.regimes_prediction(rows))
    if verdict:  # all three ended
        downloads("regimes", "reg_dl", rows, charts.labelled_loss_chart(snaps, "epochs"))


sweeps.group_view("reg", draw)
link.finish()
