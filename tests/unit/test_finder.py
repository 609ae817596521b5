"""The batch-size finder: measured, never extrapolated, few probes, the effective batch kept."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bsdemo.config import RunConfig
from bsdemo.engine.finder import find_batch_size
from bsdemo.fits import linear_fit
from tests.timeouts import scaled

MIB = 2**20


def find(**kw):
    events = list(find_batch_size(RunConfig(), **kw))
    return events[:-1], events[-1]


@pytest.mark.parametrize("budget_mib", [1.4, 1.7, 2.0, 3.0, 4.5, 6.0, None])
def test_never_returns_a_batch_size_it_did_not_run(budget_mib):
    budget = int(budget_mib * MIB) if budget_mib else None
    probes, result = find(memory_budget_bytes=budget)
    ran = {p["batch_size"]: p for p in probes}
    assert result["tested_batch_sizes"] == sorted(ran)
    assert result["probes"] == len(probes) <= 5
    # the recommendation ran: as a probe, or among the sizes whose samples/s it compared
    timed = {r["batch_size"]: r for r in result["throughput"]}
    assert (
        result["batch_size"] in ran
        and ran[result["batch_size"]]["status"] == "ok"
        or result["batch_size"] in timed
        and result["recommended_because"] == "knee"
    )
    if result["recommended_because"] == "knee":
        assert result["batch_size"] < result["max_batch_size"]
        lo, hi = result["knee_range"]
        assert hi <= 2 * lo  # a knee is named only when the rounds agree on it
        if budget:
            assert timed[result["batch_size"]]["peak_memory_bytes"] <= 0.9 * budget
    else:
        assert result["batch_size"] == result["max_batch_size"]
    assert ran[result["max_batch_size"]]["status"] == "ok"
    if budget:  # what it returns leaves the margin free, by measurement
        assert ran[result["max_batch_size"]]["peak_memory_bytes"] <= 0.9 * budget
        bigger = [b for b, p in ran.items() if b > result["max_batch_size"]]
        assert all(ran[b]["status"] == "oom" or ran[b]["peak_memory_bytes"] > 0.9 * budget for b in bigger)


def test_prediction_matches_the_measured_peak_within_ten_percent():
    probes, result = find(memory_budget_bytes=3 * MIB)
    first_two = probes[:2]
    fit = linear_fit([p["batch_size"] for p in first_two], [p["peak_memory_bytes"] for p in first_two])
    chosen = next(p for p in probes if p["batch_size"] == result["max_batch_size"])
    assert fit.predict(chosen["batch_size"]) == pytest.approx(chosen["peak_memory_bytes"], rel=0.10)


def test_without_a_budget_on_the_cpu_the_whole_training_set_fits():
    _, result = find()
    assert result["max_batch_size"] == RunConfig().train_samples


def test_target_effective_batch_is_kept_exactly_with_accumulation():
    probes, result = find(
        memory_budget_bytes=3 * MIB, target_effective_batch=1000, reference_batch=32, reference_lr=0.05
    )
    assert result["batch_size"] * result["accumulation_steps"] == 1000
    assert result["batch_size"] <= result["max_batch_size"]
    assert result["batch_size"] in {p["batch_size"] for p in probes if p["status"] == "ok"}
    assert result["lr_linear"] == pytest.approx(0.05 * 1000 / 32)
    assert result["lr_sqrt"] == pytest.approx(0.05 * (1000 / 32) ** 0.5)


def test_budget_the_model_alone_fills_gives_no_batch_and_says_why():
    probes, result = find(memory_budget_bytes=int(1.2 * MIB))
    assert probes == [] and result["batch_size"] is None
    assert "model alone needs" in result["message"]


def test_cli_find_json_ends_with_the_documented_result():
    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "find", "--memory-budget", "2MiB", "--json"],
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    result = lines[-1]
    assert result["kind"] == "find_result"
    assert set(result) >= {
        "batch_size",
        "accumulation_steps",
        "probes",
        "tested_batch_sizes",
        "predicted_max",
        "margin",
    }
    assert [line["kind"] for line in lines[:-1]] == ["find_probe"] * result["probes"]


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--margin", "2"], "--margin"),
        (["--margin", "x"], "--margin"),
        (["--memory-budget", "-1GB"], "--memory-budget"),
        (["--target-effective-batch", "0"], "--target-effective-batch"),
        (["--max-batch", "big"], "--max-batch"),
    ],
)
def test_cli_find_bad_input_exits_2_with_one_line(args, flag):
    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "find", *args], capture_output=True, text=True, timeout=scaled(60)
    )
    assert out.returncode == 2 and flag in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_cli_find_on_a_cpu_defaults_to_the_pages_simulated_device():
    from bsdemo.config import RunConfig
    from bsdemo.recipes import simulated_device
    from bsdemo.recipes.measurements import FINDER_DEVICE_MARGIN
    from bsdemo.units import format_bytes

    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "find", "--json"],
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert out.returncode == 0, out.stderr
    device, about = simulated_device(RunConfig(), FINDER_DEVICE_MARGIN)
    assert f"a simulated device of {format_bytes(device)}" in out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["batch_size"] is not None and result["predicted_max"] <= 2 * about
