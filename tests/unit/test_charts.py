"""bsdemo.charts: pure data -> figure, checked without a browser."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import pytest

from bsdemo import charts
from bsdemo.charts import vision
from bsdemo.config import RunConfig
from bsdemo.runs import EVAL_FIELDS, STEP_FIELDS, JobSnapshot
from bsdemo.units import MIB
from tests.timeouts import scaled


def fake_snapshot(job_id=1, batch_size=32, accum=1, n=20, memory_source="accounted"):
    """A hand-built snapshot: charts are pure functions of it (no run needed to test drawing)."""
    cfg = vars(RunConfig(batch_size=batch_size, accumulation_steps=accum)).copy()
    steps = {f: [] for f in STEP_FIELDS}
    for i in range(1, n + 1):
        row = dict(
            step=i,
            epoch=i / 10,
            samples_seen=i * batch_size * accum,
            wall_time_s=i * 0.01,
            loss=2.0 / i,
            lr=0.05,
            step_time_s=0.01,
            samples_per_sec=3200.0 + i,
            memory_allocated_bytes=1000,
            memory_reserved_bytes=None,
            peak_memory_bytes=2 * 2**20,
            utilization_pct=None,
        )
        for f in STEP_FIELDS:
            steps[f].append(row.get(f))  # a field this run has not (a GAN's): None
    evals = {f: [] for f in EVAL_FIELDS}
    for i in (0, n):
        row = dict(
            step=i,
            epoch=i / 10,
            samples_seen=i * batch_size,
            wall_time_s=i * 0.01,
            train_loss=2.3 - i * 0.1,
            train_accuracy=0.5,
            test_loss=2.4 - i * 0.1,
            test_accuracy=0.5,
        )
        for f in EVAL_FIELDS:
            evals[f].append(row.get(f))
    return JobSnapshot(
        id=job_id,
        owner="o",
        status="completed",
        config=cfg,
        queue_position=None,
        start={"memory_source": memory_source},
        steps=steps,
        evals=evals,
        latest=None,
        end={
            "summary": {
                "steps": n,
                "samples_per_sec": 3210.0,
                "peak_memory_bytes": 2 * 2**20,
                "test_accuracy": 0.5,
                "device": "cpu",
            }
        },
        stride=1,
        submitted_at=0,
        started_at=0,
        finished_at=1,
        shared_device=False,
    )


def test_batch_colour_is_fixed_per_batch_and_ordered_by_log2():
    assert charts.batch_colour(256) == charts.batch_colour(256)
    colours = [charts.batch_colour(2**i) for i in range(0, 17, 4)]
    assert len(set(colours)) == len(colours)
    assert charts.batch_colour(1) != charts.batch_colour(2)


def test_loss_chart_has_step_and_eval_series_with_axis_titles():
    snap = fake_snapshot()
    chart = charts.loss_chart([snap], "samples")
    names = [t.name for t in chart.figure.data]
    assert len(names) == 3 and any("test" in n for n in names)
    assert list(chart.figure.data[0].x) == snap.steps["samples_seen"]
    assert chart.figure.layout.xaxis.title.text == "Samples seen"
    assert "nats" in chart.figure.layout.yaxis.title.text
    assert "test loss 2.4" in chart.alt
    assert len(chart.table) == 2 and chart.table[0]["test loss"] == 2.4


def test_runs_share_a_chart_each_in_its_batch_colour():
    a, b = fake_snapshot(1, 32), fake_snapshot(2, 64, accum=4)
    chart = charts.throughput_chart([a, b], "seconds")
    assert [t.line.color for t in chart.figure.data] == [charts.batch_colour(32), charts.batch_colour(256)]
    assert "batch 256 (64×4)" in chart.figure.data[1].name
    assert chart.figure.layout.xaxis.title.text == "Wall-clock time (s)"
    # two runs by the wall clock: the chart says each speed is its own conditions'
    assert "each run under its own load" in chart.figure.layout.title.subtitle.text


def test_runs_with_thread_cpu_times_are_drawn_by_that_clock():
    """A stored quiet run and a live loaded one: by the wall clock the loaded one looks 10×
    slower; by the thread's CPU time both read what the device did."""
    quiet, loaded = fake_snapshot(1, 32), fake_snapshot(2, 32)
    quiet.steps["cpu_time_s"] = [0.01] * 20  # 32 samples in 10 ms of CPU time
    loaded.steps["step_time_s"] = [0.1] * 20  # waited 10× as long on the wall clock...
    loaded.steps["samples_per_sec"] = [320.0] * 20
    loaded.steps["cpu_time_s"] = [0.01] * 20  # ...for the same CPU time
    chart = charts.throughput_chart([quiet, loaded])
    assert "CPU time" in chart.figure.layout.title.subtitle.text
    assert [round(t.y[0]) for t in chart.figure.data] == [3201, 3200]
    loaded.steps["cpu_time_s"] = [None] * 20  # one run without: both by the wall clock
    assert [round(t.y[0]) for t in charts.throughput_chart([quiet, loaded]).figure.data] == [3201, 320]


def test_memory_chart_is_in_mib_and_labels_its_source():
    chart = charts.memory_chart([fake_snapshot()])
    assert math.isclose(chart.figure.data[0].y[0], 2.0)
    assert "accounted" in chart.figure.layout.yaxis.title.text
    assert "accounted memory" in chart.alt


def test_utilization_only_when_measured():
    snap = fake_snapshot()
    assert not charts.has_utilization([snap])
    snap.steps["utilization_pct"][-1] = 87.0
    assert charts.has_utilization([snap])
    chart = charts.utilization_chart([snap])
    assert list(chart.figure.data[0].y) == [87.0]


def test_empty_inputs_give_empty_charts_with_alt_text():
    assert "no runs" in charts.loss_chart([]).alt
    assert charts.throughput_chart([]).figure.data == ()


def test_runs_table_rows():
    rows = charts.runs_table([fake_snapshot(1, 32), fake_snapshot(2, 16, accum=2)])
    assert [r["effective batch"] for r in rows] == [32, 32]
    assert rows[0]["peak memory (MiB)"] == 2.0 and rows[0]["samples/s"] == 3210.0


def test_lr_grid_marks_the_best_lr_per_batch_and_skips_diverged_cells():
    cells = [
        {"batch": 8, "lr": 0.1, "accuracy": 0.9, "diverged": False},
        {"batch": 8, "lr": 1.0, "accuracy": None, "diverged": True},
        {"batch": 64, "lr": 0.1, "accuracy": 0.5, "diverged": False},
        {"batch": 64, "lr": 1.0, "accuracy": 0.8, "diverged": False},
    ]
    assert charts.best_lr_per_batch(cells) == {8: 0.1, 64: 1.0}
    chart = charts.lr_grid_chart(cells)
    heat, linear, root = chart.figure.data
    assert heat.type == "heatmap" and list(heat.y) == ["8", "64"]
    assert heat.text[0][1] == "diverged"
    # the best lr's star beside its cell's number (rows: batches; columns: lr 0.1, 1)
    assert [list(row) for row in heat.text] == [["★ 90%", "diverged"], ["50%", "★ 80%"]]
    assert "batch 64: 1" in chart.alt
    # the rules from batch 8's best (0.1): linear 0.8 at batch 64 (nearest column 1), √ 0.283
    # (nearest 0.1 of the two columns); both within the grid, exact lrs in the hover and alt
    assert linear.name == "linear rule" and list(linear.x) == ["0.1", "1"]
    assert list(root.x) == ["0.1", "0.1"] and "square root rule at batch 64: lr 0.283" in root.hovertext[1]
    assert "linear rule batch 8: 0.1, batch 64: 0.8" in chart.alt
    past = charts.lr_grid_chart(
        [dict(c, batch=c["batch"] * 8) if c["batch"] == 64 else c for c in cells]
    )  # batches 8 and 512: linear says lr 6.4
    assert past.figure.data[1].marker.symbol[1] == "triangle-right-open"
    assert "(past the grid)" in past.figure.data[1].hovertext[1]


def test_a_grid_row_still_training_names_no_best_lr():
    """No star and no rule from a batch whose row has a cell queued or running."""
    cells = [
        {"batch": 8, "lr": 0.1, "accuracy": 0.9, "status": "completed"},
        {"batch": 8, "lr": 1.0, "accuracy": 0.7, "status": "completed"},
        {"batch": 64, "lr": 0.1, "accuracy": 0.5, "status": "completed"},
        {"batch": 64, "lr": 1.0, "accuracy": None, "status": "running"},
    ]
    assert charts.best_lr_per_batch(cells) == {8: 0.1}
    texts = charts.lr_grid_chart(cells).figure.data[0].text  # rows: batches 8, 64
    assert [t for row in texts for t in row if t.startswith("★")] == ["★ 90%"]
    assert not any(
        t.marker.symbol == "star" for t in charts.lr_grid_chart(cells).figure.data if t.type == "scatter"
    )  # no marker over a cell's number
    cells[-1].update(accuracy=0.8, status="completed")
    assert charts.best_lr_per_batch(cells) == {8: 0.1, 64: 1.0}


def test_comparison_table_marks_time_caps_and_divergence():
    snap = fake_snapshot()
    snap.end["summary"]["time_capped"] = True
    rows = charts.comparison_table([("capped", snap)])
    assert rows[0]["note"] == "time cap" and rows[0]["run"] == "capped"
    assert rows[0]["status"] == "time cap"  # not "cancelled": nobody stopped it


def test_export_as_json_and_csv():
    import csv
    import io
    import json

    from bsdemo import export

    runs = [fake_snapshot(1, 32, n=5), fake_snapshot(2, 64, accum=2, n=3)]
    data = json.loads(export.runs_json(runs))
    assert [r["run"] for r in data] == [1, 2] and data[1]["config"]["accumulation_steps"] == 2
    assert data[0]["steps"]["loss"] == runs[0].steps["loss"]
    rows = list(csv.DictReader(io.StringIO(export.runs_csv(runs))))
    assert len(rows) == 8 and rows[-1]["run"] == "2" and rows[-1]["batch_size"] == "64"
    assert float(rows[0]["loss"]) == runs[0].steps["loss"][0]


def test_charts_drawn_from_many_threads_of_a_cold_process():
    """A cold server's script threads drawing their first charts at once: plotly looks numpy and
    pandas up in sys.modules without importing them, so they must be whole before any thread
    draws (the load test once saw 'partially initialized module numpy' here)."""
    import subprocess
    import sys

    code = """
import sys, threading
import bsdemo.charts as charts
assert hasattr(sys.modules["numpy"], "ndarray") and hasattr(sys.modules["pandas"], "Series")
from tests.unit.test_charts import fake_snapshot
errors = []
def draw():
    try:
        for _ in range(3):
            charts.loss_chart([fake_snapshot()], "steps")
            charts.throughput_chart([fake_snapshot()], "samples")
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=draw) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
assert not errors, errors
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 0, done.stderr[-2000:]


# ----- the chart language -----
def test_neighbouring_powers_of_two_never_share_a_colour():
    colours = [charts.batch_colour(2**i) for i in range(17)]
    assert all(a != b for a, b in zip(colours, colours[1:], strict=False))
    assert set(colours) <= set(charts.BATCH_PALETTE)
    assert charts.batch_colour(3) in charts.BATCH_PALETTE  # not a power of two: the nearest


def test_runs_sharing_a_batch_differ_by_colour_marker_and_dash():
    a, b, c = fake_snapshot(1, 32), fake_snapshot(2, 32), fake_snapshot(3, 64)
    sa, sb, sc = charts.styles([a, b, c])
    assert sa.colour == charts.batch_colour(32) and sc.colour == charts.batch_colour(64)
    assert len({sa.colour, sb.colour, sc.colour}) == 3  # the second batch-32 run: a spare colour
    assert (sa.symbol, sa.dash) != (sb.symbol, sb.dash)
    assert (sa.symbol, sa.dash) == (sc.symbol, sc.dash)  # the first of its batch


def test_batches_that_share_a_palette_colour_get_two_colours():
    one, far = charts.styles([fake_snapshot(1, 1), fake_snapshot(2, 512)])
    assert charts.batch_colour(1) == charts.batch_colour(512) == one.colour != far.colour


def test_ema_is_debiased_and_keeps_gaps():
    assert charts.ema([2.0, 2.0, 2.0], 0.9) == pytest.approx([2.0, 2.0, 2.0])
    smoothed = charts.ema([0.0, 10.0, None, 0.0], 0.5)
    assert smoothed[0] == 0.0 and smoothed[2] is None
    assert 0 < smoothed[1] < 10 and 0 < smoothed[3] < smoothed[1]
    assert charts.ema([1.0, 5.0], 0.0) == [1.0, 5.0]


def test_a_spike_does_not_set_the_loss_range_and_is_marked():
    snap = fake_snapshot(n=100)
    snap.steps["loss"][50] = 1e4  # one spike, as batch 1 makes them
    chart = charts.loss_chart([snap], "steps")
    top = chart.figure.layout.yaxis.range[1]
    assert 2.3 <= top < 10  # the start is in view, the spike is not
    marks = [t for t in chart.figure.data if "above the chart" in (t.name or "")]
    assert len(marks) == 1 and list(marks[0].x) == [51]  # steps count from 1


def test_one_legend_entry_per_run_and_the_key_explained_once():
    chart = charts.loss_chart([fake_snapshot(1, 32), fake_snapshot(2, 64)], "steps", 0.6)
    legend = [t for t in chart.figure.data if t.showlegend is not False]
    assert len(legend) == 2
    assert "test loss" in chart.figure.layout.title.subtitle.text


def test_how_a_run_ended_is_marked_on_its_curve():
    snap = fake_snapshot(n=20)
    snap.status = "diverged"
    chart = charts.loss_chart([snap], "steps")
    marks = [t for t in chart.figure.data if t.mode == "markers+text"]
    assert len(marks) == 1 and marks[0].text == ("diverged",)
    capped = fake_snapshot(n=20)
    capped.status = "cancelled"
    capped.end["summary"]["time_capped"] = True
    chart = charts.labelled_loss_chart([("capped", capped)], "steps")
    assert [t.text for t in chart.figure.data if t.mode == "markers+text"] == [("time cap",)]


def test_log_x_leaves_out_step_zero_and_an_empty_chart_says_what_comes():
    chart = charts.loss_chart([fake_snapshot(n=10)], "steps", log=True)
    assert chart.figure.layout.xaxis.type == "log"
    assert all(x > 0 for t in chart.figure.data for x in t.x)
    blank = charts.loss_chart([], "steps")
    assert blank.figure.layout.xaxis.visible is False
    assert "Press Run" in blank.figure.layout.annotations[0].text


def test_lr_grid_axes_are_categories_and_missing_cells_say_why():
    cells = [
        {"batch": 8, "lr": 0.1, "accuracy": 0.9, "diverged": False, "status": "completed"},
        {
            "batch": 512,
            "lr": 0.1,
            "accuracy": None,
            "diverged": False,
            "status": "cancelled",
            "time_capped": True,
        },
    ]
    chart = charts.lr_grid_chart(
        cells + [{"batch": 8, "lr": 1.0, "accuracy": 0.5, "diverged": False, "status": "completed"}]
    )
    heat = chart.figure.data[0]
    assert chart.figure.layout.yaxis.type == "category"
    assert heat.text[1][0] == "time cap" and heat.text[1][1] == "not run"


def test_tables_for_people_format_numbers_and_drop_empty_columns():
    snap = fake_snapshot(1, 32)
    snap.end["summary"]["test_accuracy"] = 0.97012
    rows, columns = charts.for_people(charts.runs_table([snap]))
    assert rows[0]["test accuracy (%)"] == 97.0
    assert columns["test accuracy (%)"] == {"format": "%.1f", "label": "test acc. %"}
    assert rows[0]["samples/s"] == 3210 and columns["samples/s"]["format"] == "localized"
    assert "shared device" not in rows[0] and "micro-batch × accumulation" not in rows[0]
    assert charts.for_people([]) == ([], {})


def test_a_run_with_one_evaluation_never_shows_negative_epochs():
    snap = fake_snapshot(n=0)
    snap.status = "running"
    chart = charts.labelled_loss_chart([("mid-run", snap)], "epochs")
    assert chart.figure.layout.xaxis.rangemode == "nonnegative"


def test_memory_breakdown_draws_only_the_parts_there_are_in_colours_apart():
    """SGD on a CPU has no optimizer state and no allocator cache: no zero-height band and no
    legend entry for them; the bands drawn each have a colour of their own."""
    parts = {
        "parameters": 2 * MIB,
        "gradients": 2 * MIB,
        "optimizer_state": 0,
        "workspace": MIB // 4,
        "allocator_cache": None,
    }
    points = [
        {
            "status": "ok",
            "batch_size": b,
            "peak_memory_bytes": 5 * MIB + b * 1024,
            "memory_breakdown": {**parts, "activations": b * 1024},
            "message": "",
        }
        for b in (8, 64, 512)
    ]
    points.append(
        {
            "status": "oom",
            "batch_size": 4096,
            "peak_memory_bytes": None,
            "memory_breakdown": None,
            "simulated": True,
            "message": "Simulated OOM",
        }
    )
    fig = charts.memory_breakdown_chart(points, None, None, None).figure
    bands = [t for t in fig.data if t.stackgroup == "memory"]
    assert [t.name for t in bands] == [
        "Parameters",
        "Gradients",
        "Saved activations",
        "Workspace / temporaries",
    ]
    assert len({t.line.color for t in bands}) == len(bands)


def test_log_axes_label_every_tick_in_full():
    ticks = charts.style.log_ticks([1_100, 45_000, None])
    assert ticks["ticktext"] == ["1k", "2k", "5k", "10k", "20k", "50k"]
    assert ticks["tickvals"][0] <= 1_100 and ticks["tickvals"][-1] >= 45_000
    wide = charts.style.log_ticks([3, 2e6])  # over three decades: the powers of ten only
    assert wide["ticktext"] == ["1", "10", "100", "1k", "10k", "100k", "1M", "10M"]
    assert charts.style.log_ticks([]) == {}


def test_a_warm_up_spike_between_evaluations_is_drawn_inside_the_comparison():
    calm, jumpy = fake_snapshot(1, 32), fake_snapshot(2, 1024)
    jumpy.steps["loss"][3] = 52.1  # one step's loss jumps (an lr too large, no warm-up)
    fig = charts.labelled_loss_chart([("reference", calm), ("linear rule", jumpy)], "epochs").figure
    spikes = [t for t in fig.data if t.text and str(t.text[0]).startswith("spike")]
    assert len(spikes) == 1 and spikes[0].y[0] == 52.1
    assert fig.layout.yaxis.type == "log"  # the spike and the curves both in the plot
    assert not [t for t in fig.data if "above the chart" in (t.name or "")]
    calm_only = charts.labelled_loss_chart([("reference", calm)], "epochs").figure
    assert calm_only.layout.yaxis.type != "log"
    assert not [t for t in calm_only.data if t.text and str(t.text[0]).startswith("spike")]


def test_the_legend_gets_a_row_for_every_line_it_wraps_to():
    names = ["measured", "tr(Σ)/B: 1/B from the batch-1 variance", "× (N − B)/(N − 1), drawn from N = 1,438"]
    assert charts.style.legend_rows(names, 12) == 3  # each on a line of its own in half a page
    assert charts.style.legend_rows(["batch 32", "batch 256"], 12) == 1
    fig = go.Figure([go.Scatter(x=[1], y=[1], name=n) for n in names])
    charts.style.layout(fig, "t", "x", "y")
    before = fig.layout.height
    charts.style.fit_legend(fig)
    assert fig.layout.height - before >= 3 * charts.style.LEGEND_ROW_PX
    # the legend's top where the axis's own room ends: under the x title, not at the foot
    assert fig.layout.legend.yanchor == "top" and fig.layout.legend.yref == "container"
    assert fig.layout.legend.y * fig.layout.height == pytest.approx(fig.layout.height - before)


def test_fitting_a_legend_twice_changes_nothing():
    fig = charts.loss_chart([fake_snapshot(1, 32), fake_snapshot(2, 64)], "steps").figure
    once = charts.style.fit_legend(fig).to_plotly_json()["layout"]
    twice = charts.style.fit_legend(fig).to_plotly_json()["layout"]
    assert once == twice


def test_accumulation_chart_sets_each_gradient_against_its_difference_on_a_log_axis():
    per_layer = [
        {"layer": "net.0.weight", "module": "Linear", "max_abs_grad_diff": 3e-8, "grad_norm": 0.4},
        {"layer": "net.0.bias", "module": "Linear", "max_abs_grad_diff": 0.0, "grad_norm": 0.05},
        {"layer": "net.2.weight", "module": "Linear", "max_abs_grad_diff": 2e-8, "grad_norm": 0.3},
    ]
    r = {
        "per_layer": per_layer,
        "equivalent": True,
        "accumulation_steps": 4,
        "micro_batch": 32,
        "effective_batch_size": 128,
    }
    chart = charts.accumulation_chart(r)
    norm, diff = chart.figure.data
    assert list(norm.y) == [
        "linear layer 1 weights",
        "linear layer 1 biases",
        "linear layer 2 weights",
    ]  # names a person reads, in model order
    assert list(norm.x) == [0.4, 0.05, 0.3]
    assert diff.x[1] > 0 and diff.x[0] == 3e-8  # an exact zero still has a (tiny) bar
    assert chart.figure.layout.xaxis.type == "log"
    assert chart.table[1]["largest difference"] == 0.0  # the table keeps the measured value
    assert vision.distinguishable(norm.marker.color, diff.marker.color)
    broken = charts.accumulation_chart({**r, "equivalent": False}).figure.data
    assert broken[1].marker.color == charts.OOM_COLOUR != diff.marker.color
    assert vision.distinguishable(broken[0].marker.color, broken[1].marker.color)


@pytest.mark.parametrize(
    "subtitle", ["by the training thread's CPU time", "budget 2 MiB · each batch verified · by CPU time"]
)
def test_projected_a_subtitle_of_one_line_or_several_gets_room_above_the_plot(subtitle):
    """At a projector's type size the subtitle sits in a top margin grown for its lines, so it
    neither runs onto the plot nor over the y title (one line used to keep the margin it had)."""
    from bsdemo.charts import projector
    from bsdemo.charts.style import PROJECTOR_TEXT_PX

    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    fig.update_layout(
        title=dict(text="Throughput", subtitle=dict(text=subtitle)),
        margin=dict(t=60),
        height=320,
        yaxis_title="Samples per second",
    )
    before = fig.layout.height
    projected = projector(fig)
    lines = len(subtitle.split(" · "))
    assert projected.layout.title.subtitle.text.count("<br>") == lines - 1
    # the title, and a line and a half of the projector's type per subtitle line, clear of it
    assert projected.layout.margin.t >= 60 + 1.3 * (PROJECTOR_TEXT_PX + 6) + 1.5 * PROJECTOR_TEXT_PX * lines
    assert projected.layout.height > round(before * 1.35)


def test_a_run_live_mode_superseded_is_drawn_faint_and_named_so():
    import dataclasses

    old = dataclasses.replace(fake_snapshot(1, 32), status="cancelled", superseded_by=2)
    new = fake_snapshot(2, 64)
    for chart in (
        charts.loss_chart([old, new], smoothing=0.6),
        charts.throughput_chart([old, new], smoothing=0.6),
    ):
        data = chart.figure.to_plotly_json()["data"]
        faint = [t for t in data if t.get("legendgroup") == "1" and t.get("name")]
        full = [t for t in data if t.get("legendgroup") == "2" and t.get("name")]
        assert faint and all("superseded" in t["name"] for t in faint)
        assert all(t["opacity"] <= 0.35 for t in faint)
        assert not any("superseded" in t["name"] for t in full)
        assert max(t.get("opacity", 1.0) for t in full) == 1.0  # the live run at full strength
    assert charts.run_label(old).endswith(" · superseded")


def test_the_finders_chart_fits_its_prediction_to_the_probes_before_it():
    """Probes 1 and 2 predict, 3 verifies, 4 ran out of memory: the fit is probes 1-2's own
    line (probe 3 is not on it by construction), the verified batch is marked, the failure too."""

    def probe(n, b, peak, reason, status="ok"):
        return {
            "kind": "find_probe",
            "probe": n,
            "batch_size": b,
            "status": status,
            "peak_memory_bytes": peak,
            "samples_per_sec": 100.0,
            "reason": reason,
            "simulated": True,
            "message": "out of memory" if status == "oom" else "",
        }

    points = [
        probe(1, 8, 1.0 * MIB, "probe"),
        probe(2, 32, 2.0 * MIB, "probe"),
        probe(3, 64, 3.5 * MIB, "verify the prediction"),
        probe(4, 128, None, "bisect", "oom"),
    ]
    result = {"capacity_bytes": 4 * MIB, "margin": 0.1, "max_batch_size": 64}
    chart = charts.finder_chart(points, result)
    fit = next(t for t in chart.figure.data if t.name.startswith("fit through probe(s) 1, 2"))
    at = dict(zip(fit.x, fit.y, strict=True))
    assert at[8] == pytest.approx(1.0) and at[32] == pytest.approx(2.0)
    assert at[64] == pytest.approx(2 / 3 + 64 / 24)  # the line's, not probe 3's 3.5
    assert [t.name for t in chart.figure.data if "out of memory" in (t.name or "")]
    texts = [a.text for a in chart.figure.layout.annotations]
    assert any("largest that fits: 64 (verified)" in t for t in texts)
    assert any("10% kept free" in t for t in texts) and any("budget 4 MiB" in t for t in texts)
    assert "verified by a real step" in chart.alt and [r["probe"] for r in chart.table] == [1, 2, 3, 4]
