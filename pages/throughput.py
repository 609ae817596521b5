"""Throughput and utilisation: samples/s against batch size, and why it saturates."""

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.plaintext import plain
from bsdemo.presets import SCENARIOS
from bsdemo.ui import classroom, measurement
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway
from bsdemo.units import fixed, percent, powers_of_two

lesson = lesson_header("throughput")
link = PageLink("throughput")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = measurement.workload("tp", link)
    choices = measurement.largest_batches()
    largest = link.choice(
        st,
        "Largest batch size in the sweep",
        choices,
        min(1024, choices[-1]),
        key="tp_largest",
        widget="select_slider",
    )
    st.caption(
        f"Batch sizes 1, 2, 4, … {largest}, each measured in 3 rounds (a shuffled order "
        "each round, so passing load falls on different sizes): full training steps "
        "(forward, backward, optimizer step), their median and middle half. No other run "
        "of this lab shares the device meanwhile; other processes' load is measured and "
        "shown."
    )
    link.scenarios(SCENARIOS["throughput"])
with results:
    predict("throughput")  # above the run button, in either order of the areas
    classroom.sweep_panel("throughput", cfg)  # in a class: the room's sweep of this lesson
    measurement.run_button("tp", "Run sweep", "sweep", cfg, {"batch_sizes": powers_of_two(largest)})


def draw(snap) -> None:
    points, end, start = snap.points, snap.result, snap.start or {}
    ok = [p for p in points if p["status"] == "ok"]
    if not ok:
        return
    best = max(ok, key=lambda p: p["samples_per_sec"])
    left, right = st.columns(2)
    main = charts.sweep_throughput_chart(points)
    with left:
        show_chart(main, "tp_throughput", main=True)
    with right:
        show_chart(
            charts.sweep_step_time_chart(points, end and end["fit"], end and end["crossover_batch_size"]),
            "tp_step",
        )
    if end:  # the takeaway, shown above the main charts (BASE_CSS)
        takeaway(recipes.throughput_verdict(end, points, end.get("peak_source")))
    cols = st.columns(4)
    cols[0].metric(
        "Best samples/s (measured)",
        f"{fixed(best['samples_per_sec'], 0)}",
        help=f"at batch {best['batch_size']}",
    )
    if end:
        knee, span = end["knee_batch_size"], end.get("knee_range")
        cols[1].metric(
            "Throughput knee",
            knee or "unclear",
            help=lesson.text("help_knee")
            + (f"; 68% of resampled rounds put it in {span[0]:.0f}–{span[1]:.0f}." if span else "."),
        )
        cross, span = end["crossover_batch_size"], end.get("crossover_range")
        cols[2].metric(
            "Overhead = compute at B ≈",
            f"{cross:.0f}" if cross else "unclear" if span and span[1] > 0 else "none measured",
            help=lesson.text("help_crossover")
            + (f"; 68% range {span[0]:.0f}–{span[1]:.0f}." if span else "."),
        )
    share = best["share_of_peak"]
    cols[3].metric(
        "Share of peak FLOP/s",
        f"{percent(share)}" if share is not None else "–",
        help=f"Peak: {(end or start).get('peak_source')}.",
    )
    if best.get("tokens_per_sec") and best["tokens_per_sec"] != best["samples_per_sec"]:
        st.caption(
            f"As tokens: {fixed(best['tokens_per_sec'], 0)} tokens/s at batch "
            f"{best['batch_size']} (each sample is a sequence of tokens)."
        )
    left, right = st.columns(2)
    with left:
        show_chart(charts.sweep_epoch_time_chart(points, start["train_samples"]), "tp_epoch")
    with right:
        show_chart(charts.sweep_utilisation_chart(points), "tp_util")
    st.toggle("Show data tables", key="show_tables")  # under the charts: they reach the screen
    if end:
        prediction_check("throughput", recipes.throughput_prediction(points))
        downloads("throughput", "tp_dl", points, main)


def draw_profile(snap) -> None:
    """The profile's timeline, split and overhead cut, set beside this page's sweep's fit."""
    points = [p for p in snap.points if p["kind"] == "profile_point"]
    cuts = [p for p in snap.points if p["kind"] == "cut_point"]
    if not any(p["status"] == "ok" for p in points):
        return
    show_chart(charts.profile_timeline_chart(points), "tp_prof_timeline")
    end = snap.result
    # the sweep's fit only once the profile has its own split (not a second call every poll)
    sweep_fit = measurement.finished_result("tp", "fit") if end else None
    left, right = st.columns(2)
    with left:
        show_chart(charts.profile_split_chart(points, end, sweep_fit), "tp_prof_split")
    with right:
        if cuts:
            show_chart(charts.cut_chart(cuts), "tp_prof_cut")
    if end:
        takeaway(recipes.profile_verdict(points, cuts, end, sweep_fit), key="takeaway_profile")
    for cut in cuts:
        if cut["status"] != "ok":
            st.caption(plain(cut["message"]))
    traces = [p for p in points if p["status"] == "ok" and p.get("trace_gz_b64")]
    cols = st.columns(len(traces) + 1 if traces else 1)
    for col, p in zip(cols, traces, strict=False):
        col.download_button(
            f"Trace, batch {p['batch_size']} (JSON)",
            lambda p=p: measurement.trace_file(p),
            f"profile-batch{p['batch_size']}.json",
            "application/json",
            key=f"tp_prof_trace_{p['batch_size']}",
            icon=":material/download:",
            help="A Chrome trace: open it at ui.perfetto.dev or chrome://tracing.",
        )


with results:
    measurement.job_view("tp", draw)
    st.header("Inside one step: a small batch against a large one")
    small, large = min(8, max(1, largest // 2)), min(512, largest)  # 8 and 512 by default
    st.caption(
        f"Batch {small} and batch {large}, a few of the same training steps each under "
        "torch.profiler, with unprofiled steps before and after (the profiler slows every "
        "operator: its steps are never counted as throughput). Then the same step "
        "eager against the step with its fixed cost cut (torch.compile on a CPU, CUDA "
        "graphs on a GPU), in alternating blocks; compiling is timed apart."
    )
    measurement.run_button(
        "tp_prof", f"Profile batch {small} and {large}", "profile", cfg, {"batch_sizes": [small, large]}
    )
    measurement.job_view("tp_prof", draw_profile)
link.finish()
