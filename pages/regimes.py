"""SGD, full batch, mini-batch: the three regimes on one model, data, seed and epoch budget."""

import dataclasses

import streamlit as st

from bsdemo import charts
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header
from bsdemo.ui.lab import show_chart
from bsdemo.units import format_bytes

lesson_header("regimes")

cfg = sweeps.workload("reg")
a, b, c, d = st.columns(4)
epochs = a.number_input("Epochs (each regime)", 1, 100, 5, key="reg_epochs")
sgd = b.number_input("SGD batch", 1, 16, 1, key="reg_sgd")
limits = sweeps.scheduler().limits
mini = c.number_input("Mini-batch", 2, min(4096, limits.max_batch_size), 32, key="reg_mini")
cap = d.number_input("Time cap per run (s)", 1, max(1, int(limits.max_wall_s // 3)),
                     min(20, max(1, int(limits.max_wall_s // 3))), key="reg_cap",
                     help="A run that reaches it stops and says so. The three share this "
                          "server's time cap for one job.")
budget = sweeps.budget_widget("reg", allow_none=True)
base = dataclasses.replace(cfg, epochs=int(epochs), time_limit_s=float(cap))
checked, _ = base.validated()
runs = [(f"SGD (batch {sgd})", dataclasses.replace(base, batch_size=int(sgd))),
        (f"full batch ({checked.train_samples})",
         dataclasses.replace(base, batch_size=checked.train_samples)),
        (f"mini-batch ({mini})", dataclasses.replace(base, batch_size=int(mini)))]
sweeps.group_button("reg", "Train all three", [r for _, r in runs], [n for n, _ in runs])


def draw(snaps) -> None:
    tabs = st.tabs(["against epochs", "against weight updates", "against seconds"])
    for tab, axis in zip(tabs, ("epochs", "steps", "seconds"), strict=True):
        with tab:
            show_chart(charts.labelled_loss_chart(snaps, axis), f"reg_loss_{axis}")
    rows = charts.comparison_table(snaps)
    st.dataframe(rows, hide_index=True, key="reg_table")
    if budget:
        for row in rows:
            peak = row["peak memory (MiB)"]
            if peak and peak * 2**20 > budget:
                st.error(f"{row['run']} needs {peak:,.2f} MiB: it would not fit in a "
                         f"{format_bytes(budget)} budget.", icon=":material/error:")
    done = [r for r in rows if r["test accuracy"] is not None]
    if len(done) == len(rows):
        most = max(rows, key=lambda r: r["weight updates"] or 0)
        fastest = min(rows, key=lambda r: r["wall time (s)"] or 1e9)
        best = max(rows, key=lambda r: r["test accuracy"])
        st.markdown(
            f"**What your runs show.** {most['run']} made {most['weight updates']:,} weight "
            f"updates; {fastest['run']} finished first ({fastest['wall time (s)']:.2f} s of "
            f"training); {best['run']} reached the best test accuracy "
            f"({best['test accuracy']:.1%}). The full batch makes one update per epoch, batch 1 "
            "one per sample and pays the fixed per-step cost each time; compare the three curves "
            "against weight updates and against seconds to see both effects.")


sweeps.group_view("reg", draw)
