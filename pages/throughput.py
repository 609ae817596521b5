"""Throughput and utilisation: samples/s against batch size, and why it saturates."""

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.presets import SCENARIOS
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway
from bsdemo.units import powers_of_two

lesson = lesson_header("throughput")
link = PageLink("throughput")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = sweeps.workload("tp", link)
    choices = sweeps.largest_batches()
    largest = link.choice(st, "Largest batch size in the sweep", choices, min(1024, choices[-1]),
                          key="tp_largest", widget="select_slider")
    st.caption(f"Batch sizes 1, 2, 4, … {largest}, each measured in 3 rounds (a shuffled order "
               "each round, so passing load falls on different sizes): full training steps "
               "(forward, backward, optimizer step), their median and middle half. No other run "
               "of this lab shares the device meanwhile; other processes' load is measured and "
               "shown.")
    link.scenarios(SCENARIOS["throughput"])
with results:
    predict("throughput")  # above the run button, in either order of the areas
    sweeps.run_button("tp", "Run sweep", "sweep", cfg,
                      {"batch_sizes": powers_of_two(largest)})


def draw(snap) -> None:
    points, end, start = snap.points, snap.result, snap.start or {}
    ok = [p for p in points if p["status"] == "ok"]
    if not ok:
        return
    best = max(ok, key=lambda p: p["samples_per_sec"])
    left, right = st.columns(2)
    main = charts.sweep_throughput_chart(points)
    with left:
        show_chart(main, "tp_throughput")
    with right:
        show_chart(charts.sweep_step_time_chart(points, end and end["fit"],
                                                end and end["crossover_batch_size"]), "tp_step")
    if end:  # the takeaway right under the main charts, across both
        takeaway(recipes.throughput_verdict(end, points, end.get("peak_source")))
    cols = st.columns(4)
    cols[0].metric("Best samples/s (measured)", f"{best['samples_per_sec']:,.0f}",
                   help=f"at batch {best['batch_size']}")
    if end:
        knee, span = end["knee_batch_size"], end.get("knee_range")
        cols[1].metric("Throughput knee", knee or "unclear",
                       help=lesson.text("help_knee")
                       + (f"; 68% of resampled rounds put it in {span[0]:.0f}–{span[1]:.0f}."
                          if span else "."))
        cross, span = end["crossover_batch_size"], end.get("crossover_range")
        cols[2].metric("Overhead = compute at B ≈", f"{cross:.0f}" if cross else
                       "unclear" if span and span[1] > 0 else "none measured",
                       help=lesson.text("help_crossover")
                       + (f"; 68% range {span[0]:.0f}–{span[1]:.0f}." if span else "."))
    share = best["share_of_peak"]
    cols[3].metric("Share of peak FLOP/s", f"{share:.1%}" if share is not None else "–",
                   help=f"Peak: {(end or start).get('peak_source')}.")
    if best.get("tokens_per_sec") and best["tokens_per_sec"] != best["samples_per_sec"]:
        st.caption(f"As tokens: {best['tokens_per_sec']:,.0f} tokens/s at batch "
                   f"{best['batch_size']} (each sample is a sequence of tokens).")
    left, right = st.columns(2)
    with left:
        show_chart(charts.sweep_epoch_time_chart(points, start["train_samples"]), "tp_epoch")
    with right:
        show_chart(charts.sweep_utilisation_chart(points), "tp_util")
    st.toggle("Show data tables", key="show_tables")  # under the charts: they reach the screen
    if end:
        prediction_check("throughput", recipes.throughput_prediction(points))
        downloads("throughput", "tp_dl", points, main)


with results:
    sweeps.job_view("tp", draw)
link.finish()
