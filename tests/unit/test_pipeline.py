"""Model parallelism: two stage processes of a real gloo group under a GPipe schedule — the
same parameters as one process, each stage's memory, and the bubble drawn from stage times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bsdemo.config import ConfigError, RunConfig
from tests.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


def test_bsdemo_pipeline_check_matches_one_process_and_splits_the_memory():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsdemo",
            "pipeline-check",
            "--width",
            "128",
            "--depth",
            "4",
            "--batch-size",
            "64",
            "--micro-batches",
            "4",
            "--steps",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(240),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["kind"] == "pipeline_check" and r["stages"] == 2 and r["micro_batches"] == 4
    assert r["equivalent"] and r["max_abs_param_diff"] <= 1e-5
    # each stage holds part of the parameters, and less activation memory than the whole model
    assert sum(r["stage_parameter_bytes"]) == r["single_parameter_bytes"]
    assert all(0 < b < r["single_parameter_bytes"] for b in r["stage_parameter_bytes"])
    assert all(0 < b < r["single_activation_bytes"] for b in r["stage_activation_bytes"])
    assert r["transfer_s"] > 0 and r["transfer_bytes"] == 16 * 128 * 4
    assert 0 < r["bubble"] < 1 and r["ideal_bubble"] == pytest.approx(1 / 5)
    blocks = r["schedule"]
    assert len(blocks) == 2 * 2 * 4  # two stages x forward and backward x micro-batches
    assert max(b["end"] for b in blocks) == pytest.approx(r["schedule_step_s"])


def test_the_gpipe_schedule_of_equal_stages_idles_as_the_formula_says():
    from bsdemo.engine.pipeline import gpipe_schedule

    for micro in (1, 2, 4, 8):
        s = gpipe_schedule([1.0, 1.0], [2.0, 2.0], 0.0, micro)
        assert s["bubble"] == pytest.approx(1 / (micro + 1)) == pytest.approx(s["ideal_bubble"])
        assert s["step_s"] == pytest.approx(3.0 * (micro + 1))
    slow = gpipe_schedule([1.0, 3.0], [1.0, 3.0], 0.5, 4)  # an unbalanced cut idles more
    assert slow["bubble"] > gpipe_schedule([2.0, 2.0], [2.0, 2.0], 0.5, 4)["bubble"]
    for stage in (0, 1):  # a stage never works on two micro-batches at once
        spans = sorted((b["start"], b["end"]) for b in slow["blocks"] if b["stage"] == stage)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(spans, spans[1:], strict=False))


@pytest.mark.parametrize(
    "cfg,micro,field",
    [
        (RunConfig(model="cnn"), 4, "model"),
        (RunConfig(depth=1), 4, "depth"),
        (RunConfig(batch_size=30), 4, "batch_size"),
    ],
)
def test_a_model_the_pipeline_cannot_cut_is_refused(cfg, micro, field):
    from bsdemo.jobkinds import check_pipeline

    with pytest.raises(ConfigError) as info:
        check_pipeline(cfg, micro)
    assert info.value.field == field


def test_the_pipeline_job_runs_under_the_scheduler(scheduler):
    job = scheduler.submit(
        RunConfig(width=64, depth=2, batch_size=32),
        owner="pia",
        kind="pipeline",
        options={"micro_batches": 2, "steps": 2},
    )
    snap = scheduler.wait(job, timeout=scaled(180))
    assert snap.status == "completed", snap.end
    assert snap.result["kind"] == "pipeline_check" and snap.result["equivalent"]
