"""Memory and out-of-memory: what fills memory, how it grows with the batch, and what happens past it."""

import streamlit as st

from bsdemo import charts, recipes
from bsdemo.presets import SCENARIOS
from bsdemo.ui import measurement
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink
from bsdemo.ui.widgets import downloads, show_chart, takeaway
from bsdemo.units import GIB, MIB, fixed, format_bytes, powers_of_two

lesson = lesson_header("memory")
link = PageLink("memory")

controls, results = link.areas()  # folded settings; projected: results first
with controls:
    cfg = measurement.workload("mem", link)
    budget = measurement.budget_widget(
        "mem", link, allow_none=False, default=4 * MIB if measurement.budget_options()[0] < GIB else 8 * GIB
    )
    choices = measurement.largest_batches()
    largest = link.choice(
        st,
        "Largest batch size in the sweep",
        choices,
        min(4096, choices[-1]),
        key="mem_largest",
        widget="select_slider",
    )
    link.scenarios(SCENARIOS["memory"])
with results:
    predict("memory")  # above the run button, in either order of the areas
    measurement.run_button(
        "mem",
        "Measure memory",
        "sweep",
        cfg,
        {
            "batch_sizes": powers_of_two(largest),
            "memory_budget_bytes": budget,
            "warmup_steps": 1,
            "timed_steps": 2,
            "min_timed_s": 0,
            "rounds": 1,
        },
    )  # memory, not time


def draw(snap) -> None:
    points, end = snap.points, snap.result
    main = charts.memory_breakdown_chart(
        points, end and end["fit"], budget, end and end["predicted_max_batch_size"]
    )
    show_chart(main, "mem_chart", main=True)
    if end:  # the takeaway, shown above the main chart (BASE_CSS)
        takeaway(recipes.memory_verdict(end, points))
    st.toggle("Show data tables", key="show_tables")  # under the chart: it reaches the screen
    oom = next((p for p in points if p["status"] == "oom"), None)
    if oom:
        st.error(
            f"**Batch {oom['batch_size']}: out of memory"
            f"{' (simulated)' if oom['simulated'] else ''}.** {oom['message']}",
            icon=":material/error:",
        )
    if end:
        fit = end["fit"]
        cols = st.columns(4)
        cols[0].metric("Fixed part M0 (fit)", format_bytes(fit["m0_bytes"]) if fit["m0_bytes"] else "–")
        cols[1].metric(
            "Per sample m (fit)",
            format_bytes(fit["m_bytes_per_sample"]) if fit["m_bytes_per_sample"] else "–",
            help=f"R² {fixed(fit['r2_memory'] or 0, 4)}",
        )
        cols[2].metric("Largest batch that ran", end["max_batch_size_fits"] or "–")
        cols[3].metric(
            "Predicted largest batch",
            end["predicted_max_batch_size"] or "–",
            help=lesson.text("help_predicted"),
        )
        st.session_state["mem_over"] = oom["batch_size"] if oom else None
        st.session_state["mem_safe"] = end["max_batch_size_fits"]
        prediction_check("memory", recipes.memory_prediction(points), done=True)
        downloads("memory", "mem_dl", points, main)


with results:
    measurement.job_view("mem", draw)

over, safe = st.session_state.get("mem_over"), st.session_state.get("mem_safe")
if over and safe:
    st.header(lesson.text("break_title"))
    st.markdown(lesson.text("break_it", over=over, safe=safe))
    measurement.run_button(
        "memdemo",
        f"Run batch {over}, then {safe}",
        "sweep",
        cfg,
        {
            "batch_sizes": [over, safe],
            "memory_budget_bytes": budget,
            "warmup_steps": 0,
            "timed_steps": 1,
            "min_timed_s": 0,
            "rounds": 1,
            "continue_after_oom": True,
        },
        key="mem_break",
    )

    def draw_demo(snap) -> None:
        for p in snap.points:
            if p["status"] == "oom":
                st.error(f"Batch {p['batch_size']}: {p['message']}", icon=":material/error:")
            elif p["status"] == "ok":
                st.success(
                    lesson.text(
                        "recovered",
                        batch=p["batch_size"],
                        rate=fixed(p["samples_per_sec"], 0),
                        peak=format_bytes(p["peak_memory_bytes"]),
                    )
                )

    measurement.job_view("memdemo", draw_demo)

link.finish()
