"""Lesson 8's gradient-noise measurement: the estimators on problems with known answers, the
engine against the finite-population law, the page's texts, and `bsdemo noise --json`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bsdemo import recipes
from bsdemo.config import ConfigError, RunConfig
from bsdemo.jobkinds import assess
from bsdemo.limits import Limits
from tests.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


def test_the_two_batch_estimator_recovers_a_known_trace_and_signal():
    from bsdemo.engine.noise import two_batch

    trace, signal, n = 37.0, 0.4, 1438
    expected = {b: signal + trace * (n - b) / (b * (n - 1)) for b in (16, 512)}  # E|g_B|^2
    got_trace, got_signal = two_batch(expected[16], expected[512], 16, 512, n)
    assert got_trace == pytest.approx(trace) and got_signal == pytest.approx(signal)


def test_mean_of_draws_without_replacement_follows_the_finite_population_law():
    """Per-sample 'gradients' with a known covariance: the variance of a B-sample mean drawn
    without replacement is tr(S)/B · (N − B)/(N − 1), and the fitted slope is then steeper
    than −1 only by that factor."""
    from bsdemo.engine.noise import slope

    rng = np.random.default_rng(0)
    n = 400
    population = rng.normal(size=(n, 5)) * np.array([1, 2, 3, 0.5, 0.1]) + 0.3
    mean = population.mean(0)
    trace = ((population - mean) ** 2).sum(1).mean()  # population variance (divide by N)
    sizes, measured = [1, 4, 16, 64], []
    for b in sizes:
        draws = [population[rng.permutation(n)[:b]].mean(0) for _ in range(4000)]
        measured.append(np.mean([((d - mean) ** 2).sum() for d in draws]))
        assert measured[-1] == pytest.approx(trace / b * (n - b) / (n - 1), rel=0.06)
    assert -1.1 < slope(sizes, measured) < -1.0
    assert slope([1, 10, 100], [5.0, 0.5, 0.05]) == pytest.approx(-1.0)


def test_on_the_digits_mlp_the_variance_falls_as_one_over_b_and_the_result_has_its_fields():
    from bsdemo.engine.noise import noise_measure

    events = list(noise_measure(RunConfig(), [1, 16, 256], draws=24))
    points, result = events[:-1], events[-1]
    assert [p["batch_size"] for p in points] == [1, 16, 256] and result["kind"] == "noise_result"
    for key in ("variance_slope", "b_simple", "b_simple_two_batch", "batch_sizes", "variances"):
        assert key in result
    n, trace = result["train_samples"], result["trace_sigma"]
    for b, v in zip(result["batch_sizes"][1:], result["variances"][1:], strict=True):
        assert v == pytest.approx(trace / b * (n - b) / (n - 1), rel=0.5)  # 24 draws: noisy
    assert -1.3 < result["variance_slope"] < -0.8
    assert result["cosines"][0] < result["cosines"][-1] <= 1.0
    lo, hi = result["b_simple_range"]
    assert lo <= result["b_simple"] <= hi and result["b_simple"] > 1


@pytest.mark.parametrize("options, field", [
    ({"batch_sizes": [4]}, "batch_sizes"), ({"batch_sizes": [8, 4]}, "batch_sizes"),
    ({"draws": 1}, "draws"), ({"after_steps": -1}, "after_steps"), ({"seed": 1}, "seed")])
def test_a_bad_measurement_is_refused_naming_its_option(options, field):
    with pytest.raises(ConfigError) as err:
        assess("noise", RunConfig().validated()[0], options, Limits(), 60.0)
    assert err.value.field == field


def result(slope_, direct=90.0, two=80.0, sizes=(1, 16, 256), n=1438):
    return {"variance_slope": slope_, "batch_sizes": list(sizes), "train_samples": n,
            "variances": [10.0, 10.0 / 16, 10.0 / 256], "cosines": [0.1, 0.4, 0.9],
            "draws": 32, "b_simple": direct, "b_simple_range": [70.0, 110.0],
            "b_simple_two_batch": two, "b_simple_two_batch_range": [50.0, 120.0],
            "two_batch_sizes": [16, 512]}


def test_the_verdict_and_the_prediction_say_what_was_measured():
    text = recipes.noise_verdict(result(-1.04))
    assert "fell as 1/B: a log-log slope of -1.04" in text.replace("−", "-")
    assert "is 90 measured directly (16–84 %: 70–110) and 80 from batches 16 and 512" in text
    assert "within 11% of each other" in text and "*Predicted*" in text
    assert "only 82% of tr(Σ)/B" in text  # batch 256 of 1,438 drawn without replacement
    assert "not the −1 of 1/B" in recipes.noise_verdict(result(-0.7))
    assert "came out negative" in recipes.noise_verdict(result(-1.0, two=-5.0))
    assert recipes.noise_prediction(result(-1.0))[0] == 0  # 4× the batch: ÷ 4
    assert recipes.noise_prediction(result(-0.5))[0] == 1  # ÷ 2
    assert recipes.noise_prediction(result(-0.1))[0] == 2
    assert recipes.noise_verdict(None) is None and recipes.noise_prediction(None) is None


def test_cli_noise_ends_with_the_documented_result():
    out = subprocess.run([sys.executable, "-m", "bsdemo", "noise", "--batch-sizes", "1,16,128",
                          "--draws", "8", "--json"], capture_output=True, text=True,
                         timeout=scaled(180), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e["kind"] for e in lines] == ["noise_point"] * 3 + ["noise_result"]
    end = lines[-1]
    assert {"variance_slope", "b_simple", "b_simple_two_batch", "batch_sizes",
            "variances"} <= set(end)
    assert end["batch_sizes"] == [1, 16, 128] and len(end["variances"]) == 3


def test_the_two_parameter_paths_start_together_and_the_full_batch_is_gradient_descent():
    from bsdemo import toy

    result = toy.paths(steps=50, seed=3)
    problem = toy.toy(3)
    assert all(tuple(p[0]) == toy.START for p in result["paths"].values())
    full = result["paths"][toy.N]
    losses = [float(problem.loss(np.array(w), np.array(b))) for w, b in full]
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False))  # GD: every step lower
    assert result["best_loss"] <= min(result["final_loss"].values())  # the minimum is the least
    walked = {b: np.abs(np.diff(p, axis=0)).sum() for b, p in result["paths"].items()}
    assert walked[1] > walked[toy.N]  # noise zig-zags the smallest batch


def test_the_paths_text_quotes_the_paths():
    from bsdemo import charts, toy

    chart = charts.paths_chart(toy.paths(steps=100))
    text = recipes.paths_verdict(chart.table, 100)
    first, last = chart.table[0], chart.table[-1]
    assert first["path"] == "batch 1" and last["path"] == "full batch"
    assert f"batch 1 walked {first['distance walked']:g}" in text
    assert f"the full batch's {last['distance walked']:g}" in text
