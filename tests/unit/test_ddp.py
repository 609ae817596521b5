"""Data parallelism with a real torch.distributed (gloo) process group: equivalence to one
process, the timing split, the CLI contract, and no process left behind when stopped."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from bsdemo.config import RunConfig
from bsdemo.jobkinds import JobStopped
from tests.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


def test_bsdemo_ddp_check_matches_one_process_with_the_global_batch():
    out = subprocess.run([sys.executable, "-m", "bsdemo", "ddp-check", "--processes", "2",
                          "--steps", "3", "--width", "64", "--depth", "1", "--batch-size", "16",
                          "--json"], capture_output=True, text=True, timeout=scaled(240),
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["kind"] == "ddp_check" and r["processes"] == 2 and r["global_batch_size"] == 32
    assert r["equivalent"] and r["max_abs_param_diff"] <= 1e-5  # float32 rounding only
    assert r["max_abs_param_diff"] > 0 or r["steps"] == 3  # real numbers, not a copy
    assert r["compute_s"] > 0 and r["allreduce_s"] > 0
    assert r["scaling_efficiency"] == pytest.approx(
        r["single_process_step_s"] / (r["compute_s"] + r["allreduce_s"]) / 2)


def test_a_global_batch_past_the_training_set_is_refused_before_any_process_starts():
    out = subprocess.run([sys.executable, "-m", "bsdemo", "ddp-check", "--batch-size", "1024"],
                         capture_output=True, text=True, timeout=scaled(120), cwd=ROOT)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "--batch-size" in out.stderr and "719" in out.stderr


def test_a_stopped_check_leaves_no_process_behind():
    from bsdemo.engine.ddp import ddp_check

    before = {p.pid for p in multiprocessing.active_children()}  # e.g. a scheduler's workers
    with pytest.raises(JobStopped):
        ddp_check(RunConfig(width=32, depth=1), processes=2, steps=1000,
                  should_stop=lambda: True)
    left = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert left == [] and not any(p.name.startswith("bsdemo-ddp") for p in
                                  multiprocessing.active_children())
