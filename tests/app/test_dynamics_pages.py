"""The training-dynamics pages through AppTest, with real short runs on the CPU."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from bsdemo.lessons import BY_SLUG
from bsdemo.plaintext import unescape
from bsdemo.units import read_number
from tests.app.helpers import closing, open_page, run_until


def group_done(at: AppTest) -> bool:
    return not any(" runs done" in i.value for i in at.info)


def test_regimes_page_trains_the_three_and_tabulates_them():
    at = open_page("pages/regimes.py")
    at.number_input(key="reg_epochs").set_value(2).run()
    # the counts below are of finished runs: a cap a loaded one-core machine could hit is raised
    at.number_input(key="reg_cap").set_value(200).run()  # the default limits allow 600 / 3
    at.radio(key="predict_regimes").set_value("the full batch does").run()  # predict first
    at.button(key="reg_run").click().run()
    run_until(at, lambda a: group_done(a) and "weight updates" in closing(a))
    table = at.dataframe[0].value
    assert list(table["weight updates"]) == [2 * 1438, 2, 2 * 45]
    assert len(at.get("plotly_chart")) == 1  # against epochs; updates and seconds on a click
    at.get("button_group")[0].set_value("steps").run()
    assert len(at.get("plotly_chart")) == 1
    shown = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]
    assert shown["xaxis"]["type"] == "log" and shown["xaxis"]["title"]["text"] == "Optimizer steps"
    # the prediction beside what the runs showed, and kept for this tab
    said = unescape(at.warning[0].value)
    assert said.startswith(
        "You predicted “the full batch does”; your runs show “the SGD run "
        "(the smallest batch) does”: SGD (batch 1) made 2,876"
    )
    assert at.session_state["predictions"] == {"regimes": "the full batch does"}
    # under the result, the lesson's finding (its Why folded under it) …
    assert any(BY_SLUG["regimes"].goal in e.label for e in at.expander)
    # … and the prediction stands as made: the radio is locked
    at.run()
    radio = at.radio(key="predict_regimes")
    assert radio.disabled and radio.value == "the full batch does"
    assert at.session_state["predictions_locked"] == {"regimes": True}


def test_regimes_page_flags_the_full_batch_over_a_budget():
    at = open_page("pages/regimes.py")
    at.number_input(key="reg_epochs").set_value(1).run()
    at.select_slider(key="reg_budget").set_value(4 * 2**20).run()
    at.button(key="reg_run").click().run()
    run_until(at, lambda a: group_done(a) and bool(a.error))
    assert "full batch" in at.error[0].value and "would not fit" in at.error[0].value


def test_lr_scaling_page_compares_the_rules_and_draws_the_grid():
    at = open_page("pages/lr_scaling.py")
    at.number_input(key="lr_epochs").set_value(2).run()
    at.button(key="lr_run").click().run()
    run_until(at, lambda a: group_done(a) and len(a.dataframe) == 1 and len(a.dataframe[0].value) == 5)
    runs = list(at.dataframe[0].value["run"])
    assert runs[2].startswith("linear rule") and "lr 0.08" in runs[2]  # 0.01 × 8
    at.number_input(key="lr_grid_epochs").set_value(1).run()
    at.button(key="grid_run").click().run()
    # while cells train: no verdict, and the page says how many are left
    assert not any("Best lr per batch" in m.value for m in at.markdown)
    assert any("cells still training" in c.value for c in at.caption)
    run_until(
        at, lambda a: group_done(a) and any("Best lr per batch" in m.value for m in a.markdown), timeout=180
    )
    spec = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert spec["data"][0]["type"] == "heatmap" and len(spec["data"][0]["z"]) == 4


def test_accumulation_page_shows_equivalence_and_a_pitfall():
    at = open_page("pages/accumulation.py")
    at.button(key="acc_run").click().run()
    run_until(at, lambda a: bool(a.success) or bool(a.error))
    assert at.success[0].value.startswith("Equivalent: ")
    # no prediction given: the runs' answer is said, with the numbers, as an invitation
    said = [c.value for c in at.caption if c.value.startswith("Your runs say")]
    assert len(said) == 1 and "4 × 32 trained" in said[0] and "one batch of 128" in said[0]
    # the main chart: each parameter's gradient against its difference, in the model's words
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    norm, diff = spec["data"]
    assert norm["y"][0] == "linear layer 1 weights" and spec["layout"]["xaxis"]["type"] == "log"
    assert max(diff["x"]) < 1e-3 * min(norm["x"])  # float32 rounding: powers of ten apart
    # the result goes out as CSV and JSON (with the page's settings), the chart as HTML
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Results (CSV)", "Results (JSON)", "Chart (HTML)"]
    at.toggle(key="acc_unscaled").set_value(True).run()
    at.button(key="acc_run").click().run()
    run_until(at, lambda a: bool(a.error) and a.error[0].value.startswith("Not equivalent: "))
    assert "k − 1 = 3" in " ".join(m.value for m in at.markdown)


def test_norms_page_trains_the_grid_and_says_what_it_showed():
    at = open_page("pages/norms.py", {"batches": "2,8,32", "epochs": "1"})
    at.radio(key="predict_norms").set_value("BatchNorm").run()
    at.button(key="nrm_run").click().run()
    run_until(at, lambda a: "BatchNorm reached" in closing(a) or bool(a.error), timeout=240)
    assert not at.error
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t["name"] for t in spec["data"]]
    assert names[:2] == ["no normalisation", "BatchNorm"] and "LayerNorm" in names
    table = at.dataframe[0].value  # a row per normalisation (BatchNorm: three), a column a batch
    assert len(table) == 6 and list(table.columns)[1:] == ["batch 2", "batch 8", "batch 32"]
    verdict = closing(at)
    assert "At batch 2 BatchNorm reached" in verdict and "none of their predictions changed" in (verdict)
    judged = [m.value for m in [*at.success, *at.warning] if "You predicted" in m.value]
    assert len(judged) == 1


def test_noise_page_measures_the_variance_and_both_noise_scales():
    at = open_page("pages/noise.py", {"draws": "8", "batches": "1,8,64,512"})
    at.radio(key="predict_noise").set_value("about 4× smaller").run()
    at.button(key="noi_run").click().run()
    run_until(at, lambda a: "The gradient's variance fell" in closing(a) or bool(a.error), timeout=180)
    assert not at.error
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert titles == [
        "Gradient variance against batch size",
        "How well a mini-batch points the way",
        "SGD paths on the whole loss surface",
    ]  # the last drawn on every visit
    tiles = {m.label: m.value for m in at.metric}
    assert read_number(tiles["Variance slope (log-log)"]) < -0.5
    assert float(tiles["B_simple, direct"]) > 1
    judged = [m.value for m in [*at.success, *at.warning] if "You predicted" in m.value]
    assert len(judged) == 1


def test_sharpness_page_trains_both_to_the_target_and_measures_each_minimum():
    at = open_page("pages/sharpness.py", {"target": "0.05", "noise": "1"})
    at.radio(key="predict_sharpness").set_value("the large batch's").run()
    at.button(key="shp_run").click().run()
    run_until(at, lambda a: "trained to a training loss of" in closing(a) or bool(a.error), timeout=240)
    assert not at.error
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert titles == [
        "Training loss until the target",
        "Sharpness during training",
        "The loss between the two solutions",
    ]
    table = at.dataframe[0].value
    assert list(table["run"]) == ["batch 16", "full batch (1,438)", "full batch + small-batch noise"]
    assert (table["top eigenvalue"] > 0).all() and (table["train loss"] <= 0.05 + 1e-9).all()
    verdict = closing(at)
    assert "trained to a training loss of 0.05" in verdict and "- **Added small-batch noise**" in (verdict)
    judged = [
        m.value
        for m in [*at.success, *at.warning, *at.caption]
        if "runs" in m.value and "top Hessian eigenvalue" in m.value
    ]
    assert len(judged) == 1


def test_noise_page_trains_to_the_target_at_each_batch_and_marks_the_critical_batch():
    at = open_page("pages/noise.py", {"target": "0.3", "draws": "4", "batches": "1,8,64,512"})
    at.button(key="noi_run").click().run()  # the noise measured first, at the same start
    run_until(at, lambda a: "The gradient's variance fell" in closing(a) or bool(a.error), timeout=180)
    at.button(key="noc_run").click().run()
    run_until(
        at,
        lambda a: any("steps to a training loss of 0.3" in m.value for m in a.markdown) or bool(a.error),
        timeout=240,
    )
    assert not at.error
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert titles == [
        "Gradient variance against batch size",
        "How well a mini-batch points the way",
        "Steps to the target loss against batch size",
        "SGD paths on the whole loss surface",
    ]
    tiles = {m.label: m.value for m in at.metric}
    # one value for one quantity: the study shows the measurement above's B_simple
    assert tiles["B_simple at initialisation"] == tiles["B_simple, direct"]
    assert float(tiles["B_simple at initialisation"]) > 1
    assert tiles["Critical batch"] != "–" or any("No critical batch" in m.value for m in at.markdown)
