"""The measurement pages through AppTest, each with a real short sweep or search on the CPU."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from bsdemo.plaintext import unescape
from bsdemo.units import read_number
from tests.app.helpers import closing, open_page, run_until


def sweep_done(at: AppTest) -> bool:
    return not any("Measuring" in i.value or "Waiting" in i.value for i in at.info) and bool(
        at.get("plotly_chart")
    )


def test_throughput_page_sweeps_and_draws_the_fit():
    at = open_page("pages/throughput.py")
    at.select_slider(key="tp_largest").set_value(256).run()
    at.button(key="tp_run").click().run()
    run_until(at, lambda a: sweep_done(a) and len(a.metric) == 4)
    tiles = {m.label: m.value for m in at.metric}
    assert int(tiles["Throughput knee"]) in (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert tiles["Share of peak FLOP/s"].endswith("%")
    charts = {
        json.loads(c.proto.spec)["layout"]["title"]["text"]: json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
    }
    assert len(charts) == 4
    assert len(charts["Throughput against batch size"]["data"][0]["x"]) == 9  # batch 1 … 256
    step = charts["Step time: fixed overhead + per-sample work"]
    assert any("fit t(B)" in (t.get("name") or "") for t in step["data"])
    assert "fixed overhead" in " ".join(m.value for m in at.markdown)


def test_memory_page_shows_the_oom_and_the_recovery():
    at = open_page("pages/memory.py")
    at.select_slider(key="mem_largest").set_value(2048).run()
    at.radio(key="predict_memory").set_value("it stays about the same").run()
    at.button(key="mem_run").click().run()
    run_until(at, lambda a: sweep_done(a) and len(a.metric) == 4)
    judged = [m.value for m in [*at.success, *at.warning] if "You predicted" in m.value]
    assert len(judged) == 1 and "batch 256 peaked at" in judged[0]  # 512 is the largest that ran
    assert "out of memory (simulated)" in at.error[0].value
    tiles = {m.label: m.value for m in at.metric}
    assert tiles["Largest batch that ran"] == "512"
    assert 512 <= int(tiles["Predicted largest batch"]) < 1024
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t.get("name") or "" for t in spec["data"]]
    assert "Saved activations" in names and any(n.startswith("out of memory") for n in names)
    at.button(key="mem_break").click().run()
    run_until(at, lambda a: bool(a.success))
    assert "recovered" in at.success[0].value and "1024" in at.error[-1].value


def test_finder_page_recommends_a_tested_batch():
    at = open_page("pages/finder.py")
    at.select_slider(key="find_budget").set_value(3 * 2**20).run()
    at.number_input(key="find_target").set_value(1000).run()
    at.radio(key="predict_finder").set_value("9 or more").run()
    at.button(key="find_run").click().run()
    run_until(at, lambda a: bool(a.success) or bool(a.error))
    text = at.success[0].value
    assert unescape(at.success[1].value).startswith("You predicted “9 or more”, and your runs agree")
    assert "Use batch 250 × 4 accumulation steps" in text  # the takeaway; how, under "More"
    assert any("real memory probes" in m.value for m in at.markdown)
    probes = at.dataframe[0].value
    assert 250 in list(probes["batch size"]) and len(probes) <= 5
    assert "linear rule" in " ".join(m.value for m in at.markdown)


def test_the_finders_default_on_a_cpu_has_something_to_find():
    """The host's gigabytes fit any batch of these models: the default budget is a simulated
    device sized to the model, so the answer is a measured size well below the full batch."""
    at = open_page("pages/finder.py")
    assert any("simulated device" in c.value for c in at.caption)
    at.button(key="find_run").click().run()
    run_until(at, lambda a: bool(a.success) or bool(a.error))
    batch = int(at.success[0].value.split("Use batch ")[1].split(".")[0].split()[0])
    probed = list(at.dataframe[0].value["batch size"])
    timed = list(at.dataframe[1].value["batch size"])  # the recommendation's samples/s
    assert 32 <= batch < 1438 // 2 and batch in probed + timed


def test_fit_batch_page_measures_each_technique_under_the_budget():
    at = open_page("pages/fit_batch.py")
    at.radio(key="predict_fit_batch").set_value("both together").run()
    at.button(key="fit_run").click().run()
    run_until(at, lambda a: "plain fp32 fits batch" in closing(a) or bool(a.error), timeout=300)
    assert not at.error
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["title"]["text"] == "The largest batch that fits, by technique"
    table = at.dataframe[0].value
    assert list(table["technique"]) == [
        "fp32",
        "bf16",
        "checkpointing",
        "bf16+checkpointing",
        "accumulation",
    ]  # fp16 needs CUDA
    assert (table["batch"] > 0).all()
    verdict = closing(at)
    assert "plain fp32 fits batch" in verdict and "Accumulation reaches an effective batch" in (verdict)
    judged = [m.value for m in [*at.success, *at.warning] if "You predicted" in m.value]
    assert len(judged) == 1


def test_fit_batch_page_runs_a_process_group_and_a_pipeline():
    """Lesson 10 past one device: real gloo processes under the scheduler, then two stages."""
    at = open_page("pages/fit_batch.py")
    at.select_slider(key="fit_ddp_batch").set_value(16).run()
    at.selectbox(key="fit_ddp_steps").set_value(3).run()
    at.button(key="ddp_run").click().run()
    read = ("scaling efficiency of", "too noisy to read")  # a loaded machine may say the latter
    run_until(at, lambda a: any(w in closing(a) for w in read) or bool(a.error), timeout=300)
    assert not at.error
    tiles = {m.label: m.value for m in at.metric}
    assert read_number(tiles["Largest parameter difference"]) < 1e-5
    verdict = closing(at)
    if "too noisy to read" in verdict:  # a breach measured twice: no figure, no claim
        assert tiles["Scaling efficiency"] == "too noisy" and "×" in verdict
    else:
        assert tiles["Scaling efficiency"].endswith("%")
    assert "2 processes × batch 16 = batch 32: the same parameters as one process" in verdict
    assert "up to float32" in verdict
    cluster = [t for t in at.dataframe if "predicted all-reduce ms" in t.value.columns]
    assert cluster and (cluster[0].value["predicted all-reduce ms"] > 0).all()

    at.select_slider(key="fit_pipe_batch").set_value(64).run()
    at.button(key="pipe_run").click().run()
    run_until(at, lambda a: "Each stage held at most" in closing(a) or bool(a.error), timeout=300)
    assert not at.error
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert any(t.startswith("A pipelined step: the stages idle") for t in titles)
    assert "Memory per process" in titles


def test_finder_page_measures_each_architecture_against_the_rule_of_thumb():
    at = open_page("pages/finder.py")
    at.selectbox(key="find_arch_batches").set_value("4,16,64,256").run()
    at.selectbox(key="find_arch_seconds").set_value(1.5).run()
    at.button(key="arch_run").click().run()
    # "of N of 4 architectures meets", or "of N of M architectures (of 4: ... not judged) meets"
    run_until(
        at, lambda a: "architectures meets the rule of thumb" in closing(a) or bool(a.error), timeout=600
    )
    assert not at.error
    table = next(t.value for t in at.dataframe if "rule of thumb" in t.value.columns)
    assert list(table["architecture"]) == ["CNN", "Transformer", "LSTM (an RNN)", "GAN"]
    assert set(table["agreement"]) <= {"agrees", "overlaps", "disagrees", "not judged: did not learn"}
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert {
        "Samples/s against the batch",
        "Peak memory against the batch",
        "Test accuracy at the end of the budget",
        "GAN: Fréchet distance at the end of the budget",
    } <= set(titles)


def test_throughput_page_profiles_a_small_and_a_large_batch():
    """The profile below the sweep: both steps' timelines, the split beside the sweep's fit, the
    overhead cut, the closing text from the numbers, and a trace to download per batch."""
    at = open_page("pages/throughput.py")
    at.select_slider(key="tp_largest").set_value(256).run()
    at.button(key="tp_run").click().run()
    run_until(at, lambda a: sweep_done(a) and len(a.metric) == 4)
    at.button(key="tp_prof_run").click().run()
    run_until(at, lambda a: any("At batch 8 about" in m.value for m in a.info))
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert "Where one training step's time goes" in titles
    assert "The step split: fixed and growing" in titles
    # the overhead cut's chart, titled by what its own speed-ups showed (recipes.cut_title)
    cut = next(
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "samples/s" not in json.loads(c.proto.spec)["layout"]["title"]["text"]
        and any(t.get("name") == "eager" for t in json.loads(c.proto.spec)["data"])
    )
    from bsdemo.recipes.profile import cut_effect

    effects = {cut_effect(float(x.rstrip("×"))) for x in cut["data"][1]["text"]}  # "0.81×"
    title = cut["layout"]["title"]["text"]
    assert title.startswith("Cutting the fixed cost") == (effects == {"faster"}), (title, effects)
    split = next(
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if json.loads(c.proto.spec)["layout"]["title"]["text"].startswith("The step")
    )
    assert any(t.get("name") == "the sweep's fit t0 + t1·B" for t in split["data"])
    text = " ".join(m.value for m in at.markdown)
    assert "batch 256" in text and "sweep's fitted t0" in text and "torch.compile" in text
    labels = [b.label for b in at.get("download_button")]
    assert "Trace, batch 8 (JSON)" in labels and "Trace, batch 256 (JSON)" in labels
