"""Lesson 11's architecture study: the runs it trains, how it reads them, the engine and the
CLI contract."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bsdemo.architectures import ARCHITECTURES, DEFAULT_SECONDS, WARMUP_STEPS, analyse, run_config
from bsdemo.config import ConfigError, RunConfig
from bsdemo.jobkinds import assess
from bsdemo.limits import Limits
from bsdemo.presets import PRESETS
from bsdemo.recipes import architecture_verdict
from tests.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


def test_each_run_is_its_preset_for_the_same_seconds_with_the_lr_scaled_by_the_square_root():
    for name, arch in ARCHITECTURES.items():
        for batch in (8, 128):
            run = run_config(RunConfig(seed=5), name, batch, seconds=2.0)
            preset = PRESETS[arch.preset].settings
            assert (run.model, run.dataset, run.seed, run.time_limit_s) == (
                preset["model"],
                preset["dataset"],
                5,
                2.0,
            )
            assert run.lr == pytest.approx(preset.get("lr", RunConfig().lr) * math.sqrt(batch / 32))
            assert run.warmup_steps == (WARMUP_STEPS if name == "transformer" else 0)
            run.validated()


def _point(arch, batch, speed, quality, steps=100, memory=None):
    return {
        "architecture": arch,
        "batch_size": batch,
        "status": "completed",
        "steps": steps,
        "samples_per_sec": speed,
        "quality": quality,
        "peak_memory_bytes": memory or 1000 + 10 * batch,
    }


def test_the_measured_range_is_the_fast_batches_that_trained_as_well_as_the_best():
    points = [
        _point("cnn", 8, 1000, 0.90),
        _point("cnn", 32, 3000, 0.95),
        _point("cnn", 128, 5000, 0.945),
        _point("cnn", 512, 6000, 0.80, steps=12),
    ]
    s = analyse("cnn", points)
    assert s["range"] == [32, 128] and s["agreement"] == "agrees"  # 32–256
    assert s["knee"] == 128  # the first batch at ≥ 80 % of the best samples/s
    assert s["memory_per_sample_bytes"] == pytest.approx(10)
    assert "batch 512 the same seconds bought only 12 updates" in s["why"]
    assert "at batch 8" in s["why"]


def test_a_gan_reads_lower_frechet_distance_as_better_and_a_range_outside_the_rule_disagrees():
    points = [_point("gan", 8, 1000, 90.0), _point("gan", 16, 1500, 95.0), _point("gan", 512, 30000, 200.0)]
    s = analyse("gan", points)
    assert s["best_batch"] == 8 and s["good_batches"] == [8, 16]
    # neither 8 nor 16 reaches half the best samples/s: the best quality's batch stands alone
    assert s["range"] == [8, 8] and s["agreement"] == "disagrees"  # the rule says 32–128
    verdict = architecture_verdict([s], 2.5)
    assert "of 0 of 1 architectures meets" in verdict and "**GAN**: batch 8 (outside the rule" in verdict
    assert "Other processes" not in verdict
    loaded = architecture_verdict([s], 2.5, [{**p, "others_cpu_share": 0.5} for p in points])
    assert "Other processes used 50% of this machine's CPU time" in loaded


def test_no_range_is_read_from_models_that_did_not_learn():
    """A run learned if it closed half the gap from where it started to perfect; an architecture
    none of whose runs learned is not judged, and runs that did not learn never make a range."""
    flat = [
        _point("transformer", b, 1000 * b, q) | {"initial_quality": 0.1}
        for b, q in ((8, 0.32), (32, 0.39), (128, 0.32), (512, 0.25))
    ]
    s = analyse("transformer", flat)
    assert s["range"] is None and s["not_learned"] and s["best_batch"] == 32
    assert (
        "no run learned in its budget: the best, batch 32, reached test accuracy 39.0% from "
        "test accuracy 10.0% at its start, less than half the way to 100 %"
    ) in s["why"]
    cnn = analyse(
        "cnn",
        [
            _point("cnn", 32, 3000, 0.95) | {"initial_quality": 0.1},
            _point("cnn", 128, 5000, 0.94) | {"initial_quality": 0.1},
            _point("cnn", 512, 9000, 0.40) | {"initial_quality": 0.1},
        ],
    )
    assert cnn["range"] == [32, 128] and 512 not in cnn["good_batches"]
    verdict = architecture_verdict([cnn, s], 0.75)
    assert verdict.startswith(
        "With 0.75 s of training a run, the measured batch range of 1 of 1 "
        "architectures meets the rule of thumb's.\n\n"
    )
    assert "; 1 did not learn in this budget and is not judged:" in verdict
    assert "- **Transformer**: not judged (into the thousands, with warm-up): no run learned" in verdict
    gan = _point("gan", 32, 1000, 60.0) | {"initial_quality": 200.0, "frechet_reference": 1.3}
    assert analyse("gan", [gan])["range"] == [32, 32]  # 60 is past half way from 200 to 1.3
    assert analyse("gan", [gan | {"quality": 120.0}])["not_learned"]


def test_no_completed_run_gives_no_range():
    s = analyse("lstm", [{**_point("lstm", 8, 1, None), "status": "diverged"}])
    assert s["range"] is None and architecture_verdict([s], 1.0) is None


def test_the_job_is_checked_and_bounded_before_it_is_queued():
    cfg = RunConfig().validated()[0]
    options, cost = assess("architectures", cfg, {}, Limits(), 600.0)
    assert options["architectures"] == list(ARCHITECTURES) and options["seconds"] == DEFAULT_SECONDS
    assert cost.micro_batch == 512 and cost.steps > 0
    for bad, field in (
        ({"architectures": ["rnn"]}, "architectures"),
        ({"batch_sizes": [64, 8]}, "batch_sizes"),
        ({"seconds": 1e9}, "seconds"),
    ):
        with pytest.raises(ConfigError) as err:
            assess("architectures", cfg, bad, Limits(), 600.0)
        assert err.value.field == field


def test_the_sweep_trains_each_architecture_and_summarises_it():
    from bsdemo.engine.architectures import architecture_sweep

    records = list(architecture_sweep(RunConfig(), ["lstm", "gan"], [16, 64], seconds=0.5))
    points = [r for r in records if r["kind"] == "architecture_point"]
    assert [(p["architecture"], p["batch_size"]) for p in points] == [
        ("lstm", 16),
        ("lstm", 64),
        ("gan", 16),
        ("gan", 64),
    ]
    assert all(p["status"] == "completed" and p["steps"] > 0 and p["samples_per_sec"] > 0 for p in points)
    assert all(0 <= p["quality"] <= 1 for p in points[:2])  # the LSTM's test accuracy
    assert all(p["quality"] > p["frechet_reference"] for p in points[2:])  # not yet real digits
    summaries = [r for r in records if r["kind"] == "architecture_summary"]
    assert [s["architecture"] for s in summaries] == ["lstm", "gan"]
    assert records[-1]["kind"] == "architectures_end"


def test_bsdemo_architectures_json_has_a_line_per_run_then_the_summaries():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsdemo",
            "architectures",
            "--architectures",
            "cnn",
            "--batch-sizes",
            "16,64",
            "--seconds",
            "0.5",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["kind"] for r in lines] == [
        "architecture_point",
        "architecture_point",
        "architecture_summary",
        "architectures_end",
    ]
    assert lines[2]["rule"] == [32, 256] and lines[2]["agreement"] in ("agrees", "overlaps", "disagrees")


def test_a_cpu_time_budget_is_not_cut_short_by_time_the_thread_did_not_run():
    """With one torch thread the study's budget is the training thread's CPU time: time spent
    off the CPU (here a sleep before every step, as another process holding the core would
    take) makes the run longer on the wall clock, and leaves its training budget whole."""
    import time

    import torch

    from bsdemo.engine.train import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = run_config(RunConfig(), "lstm", 16, 30.0)
        end = [e for e in train(cfg, should_stop=lambda: time.sleep(0.003), cpu_budget_s=0.3)][-1]
    finally:
        torch.set_num_threads(threads)
    s = end.summary
    assert s["time_capped"] and "0.3 s of CPU time" in end.message
    assert s["run_time_s"] > 0.3 + s["steps"] * 0.003  # the sleeps were on the wall clock only
    assert s["steps"] * s["step_cpu_time_s"] <= 0.3 * 1.5  # the budget was CPU time spent training
