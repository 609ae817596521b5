"""Training dynamics on the CPU: the accumulation check and the three regimes, engine and CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.accumulation import accumulation_check
from bsdemo.engine.regimes import run_regime
from bsdemo.recipes import regime_configs
from tests.timeouts import scaled


def test_accumulation_matches_one_big_batch_to_float32_rounding():
    r = accumulation_check(RunConfig(), 32, 4, steps=5)
    assert r["equivalent"]
    assert r["rel_grad_diff"] < 1e-6 and r["max_abs_param_diff"] < 1e-6
    assert r["effective_batch_size"] == 128 and len(r["per_layer"]) == 8
    # memory stays at the micro-batch's level (accounted: exact, whatever the load)
    assert r["accumulated_peak_memory_bytes"] < r["big_peak_memory_bytes"]
    # both speeds are measured; which is faster is a benchmark's to say (bench/dynamics_bench.py):
    # on a shared machine one of the two can be starved (32,605 vs 593 samples/s was seen)
    assert r["accumulated_samples_per_sec"] > 0 and r["big_samples_per_sec"] > 0


@pytest.mark.parametrize(
    "kw,lowest",
    [
        ({"unscaled_loss": True}, 1.0),  # gradients k times too large: relative difference k - 1
        ({"variable_length": True}, 1e-3),
    ],
)
def test_each_pitfall_makes_the_difference_jump(kw, lowest):
    r = accumulation_check(RunConfig(), 32, 4, steps=3, **kw)
    assert not r["equivalent"] and r["rel_grad_diff"] > lowest


def test_unscaled_loss_gives_exactly_k_minus_one():
    r = accumulation_check(RunConfig(), 16, 5, steps=1, unscaled_loss=True)
    assert r["rel_grad_diff"] == pytest.approx(4.0, rel=1e-4)


def test_batchnorm_breaks_the_equivalence():
    r = accumulation_check(RunConfig(norm="batch"), 32, 4, steps=3)
    assert not r["equivalent"] and r["rel_grad_diff"] > 0.01


def test_micro_batches_larger_than_the_data_are_a_clear_error():
    with pytest.raises(ConfigError, match="micro-batch"):
        accumulation_check(RunConfig(), 1000, 4)


def test_regimes_update_counts_are_ceil_n_over_b_times_epochs():
    configs = regime_configs(RunConfig(), epochs=2)
    n = RunConfig().train_samples
    assert [c.batch_size for _, c in configs] == [1, n, 32]
    for name, cfg in configs[1:]:  # batch 1 is covered by the CLI test's 1 epoch
        result = run_regime(name, cfg)
        assert result["weight_updates"] == math.ceil(n / cfg.batch_size) * 2
        assert result["test_accuracy"] is not None


def test_regimes_with_a_time_cap_stop_and_say_so():
    name, cfg = regime_configs(RunConfig(), epochs=50, time_limit_s=0.3)[0]
    result = run_regime(name, cfg)
    assert result["time_capped"] and result["status"] == "cancelled"
    assert result["weight_updates"] < 50 * RunConfig().train_samples


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "bsdemo", *args], capture_output=True, text=True, timeout=scaled(120)
    )


def test_cli_accum_check_json():
    out = cli("accum-check", "--micro-batch", "16", "--accum", "4", "--steps", "3", "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["kind"] == "accum_check" and r["equivalent"] is True
    assert set(r) >= {"max_abs_grad_diff", "rel_grad_diff", "max_abs_param_diff", "steps", "equivalent"}
    unscaled = json.loads(cli("accum-check", "--unscaled-loss", "--json").stdout)
    assert unscaled["equivalent"] is False


def test_cli_regimes_json_ends_with_one_result_per_regime():
    out = cli("regimes", "--epochs", "1", "--json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    results = [e for e in lines if e["kind"] == "regime_result"]
    assert [r["name"] for r in results] == ["SGD (batch 1)", "full batch", "mini-batch"]
    assert [r["weight_updates"] for r in results] == [1438, 1, 45]
    for key in ("batch_size", "wall_time_s", "peak_memory_bytes", "final_train_accuracy", "test_accuracy"):
        assert key in results[0]
    assert any(e.get("regime") == "mini-batch" and e["kind"] == "step" for e in lines)


@pytest.mark.parametrize(
    "args,flag",
    [
        (["accum-check", "--accum", "0"], "--accum"),
        (["accum-check", "--micro-batch", "many"], "--micro-batch"),
        (["accum-check", "--micro-batch", "1000"], "--micro-batch"),
        (["regimes", "--epochs", "0"], "--epochs"),
        (["regimes", "--time-limit", "nan"], "--time-limit"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(args, flag):
    out = cli(*args)
    assert out.returncode == 2 and flag in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
