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


@pytest.mark.parametrize(
    "options, field",
    [
        ({"batch_sizes": [4]}, "batch_sizes"),
        ({"batch_sizes": [8, 4]}, "batch_sizes"),
        ({"draws": 1}, "draws"),
        ({"after_steps": -1}, "after_steps"),
        ({"seed": 1}, "seed"),
    ],
)
def test_a_bad_measurement_is_refused_naming_its_option(options, field):
    with pytest.raises(ConfigError) as err:
        assess("noise", RunConfig().validated()[0], options, Limits(), 60.0)
    assert err.value.field == field


def result(slope_, direct=90.0, two=80.0, sizes=(1, 16, 256), n=1438):
    return {
        "variance_slope": slope_,
        "batch_sizes": list(sizes),
        "train_samples": n,
        "variances": [10.0, 10.0 / 16, 10.0 / 256],
        "cosines": [0.1, 0.4, 0.9],
        "draws": 32,
        "b_simple": direct,
        "b_simple_range": [70.0, 110.0],
        "b_simple_two_batch": two,
        "b_simple_two_batch_range": [50.0, 120.0],
        "two_batch_sizes": [16, 512],
    }


def test_the_verdict_and_the_prediction_say_what_was_measured():
    text = recipes.noise_verdict(result(-1.04))
    assert "fell as 1/B: a log-log slope of -1.04" in text.replace("−", "-")
    assert (
        "is 90 measured directly (its likely range, about ±1 standard error, from the "
        "draws resampled: 70–110) and 80 from batches 16 and 512"
    ) in text
    assert "within 11% of each other" in text and "*Predicted*" in text
    assert "only 82% of tr(Σ)/B" in text  # batch 256 of 1,438 drawn without replacement
    assert "not the −1 of 1/B" in recipes.noise_verdict(result(-0.7))
    assert "came out negative" in recipes.noise_verdict(result(-1.0, two=-5.0))
    assert recipes.noise_prediction(result(-1.0))[0] == 0  # 4× the batch: ÷ 4
    assert recipes.noise_prediction(result(-0.5))[0] == 1  # ÷ 2
    assert recipes.noise_prediction(result(-0.1))[0] == 2
    assert recipes.noise_verdict(None) is None and recipes.noise_prediction(None) is None


def test_cli_noise_ends_with_the_documented_result():
    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "noise", "--batch-sizes", "1,16,128", "--draws", "8", "--json"],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e["kind"] for e in lines] == ["noise_point"] * 3 + ["noise_result"]
    end = lines[-1]
    assert {"variance_slope", "b_simple", "b_simple_two_batch", "batch_sizes", "variances"} <= set(end)
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
    ratio = first["distance walked"] / last["distance walked"]
    assert text.startswith(f"In the same 100 steps batch 1 walked {ratio:.1f}× as far as the full batch")
    assert (
        f"It walked {first['distance walked']:g} through (w, b), the full batch "
        f"{last['distance walked']:g}" in text
    )


def test_the_critical_batch_is_read_where_the_steps_are_twice_the_fewest():
    from bsdemo.engine.critical import critical_from_steps

    s_min, b_crit = 50, 40.0
    sizes = [2**k for k in range(11)]
    steps = [s_min * (1 + b_crit / b) for b in sizes]  # McCandlish et al.'s S(B), exactly
    got_min, got_crit = critical_from_steps(sizes, steps)
    assert got_min == pytest.approx(steps[-1])  # the fewest measured, at the largest batch
    assert got_crit == pytest.approx(b_crit, rel=0.15)  # interpolated between 32 and 64
    assert critical_from_steps([1, 4, 16], [None, None, None]) == (None, None)
    assert critical_from_steps([1, 4, 16], [100, 90, 80])[1] is None  # never twice the fewest
    # a batch that never reached the target is left out, not read as zero steps
    assert critical_from_steps([1, 4, 16, 64], [800, 200, None, 90])[1] == pytest.approx(
        4 * (64 / 4) ** ((np.log(200) - np.log(180)) / (np.log(200) - np.log(90)))
    )


def test_simple_noise_scale_over_every_sample_is_the_exact_population_value():
    """With as many draws as samples (drawn without replacement) the batch-1 estimate of
    tr(S) is exact: compare with per-sample gradients taken one by one."""
    import torch

    from bsdemo.engine.critical import simple_noise_scale

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    x, y = torch.randn(40, 5), torch.randint(0, 3, (40,))

    def grad(xs, ys):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(xs), ys).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    full = grad(x, y)
    per_sample = torch.stack([grad(x[i : i + 1], y[i : i + 1]) for i in range(40)])
    exact = float((per_sample - full).pow(2).sum(1).mean() / full.pow(2).sum())
    assert simple_noise_scale(model, x, y, draws=40, seed=0) == pytest.approx(exact, rel=1e-4)


def test_the_critical_verdict_names_the_regimes_and_the_two_batches():
    result = {
        "batch_sizes": [1, 4, 16, 64, 256, 1438],
        "steps": [2685, 440, 187, 94, 58, 76],
        "lrs": [0.035, 0.071, 0.14, 0.28, 0.57, 0.8],
        "statuses": ["completed"] * 6,
        "s_min": 58.0,
        "b_crit": 41.9,
        "b_simple": 82.4,
        "rule": "sqrt",
        "reference_batch": 32,
        "reference_lr": 0.2,
        "lr_cap": 0.8,
        "target_loss": 0.1,
        "train_samples": 1438,
        "max_steps": 20000,
    }
    text = recipes.critical_verdict(result)
    assert "went from 2,685 at batch 1 to 76 at batch 1,438, fewest (58) at batch 256" in text
    assert "1→4: 4× the batch, 6.1× fewer steps (perfect scaling or better)" in text
    assert "64→256: 4× the batch, 1.6× fewer steps (diminishing returns)" in text
    assert "256→1,438: 5.62× the batch, 1.3× more steps (no gain)" in text
    assert "batch ≈ 42: the **critical batch**" in text and "is 82, 2.0× the critical" in text
    failed = dict(
        result,
        steps=[2685, None, None, None, None, None],
        statuses=["completed"] + ["diverged"] * 5,
        b_crit=None,
        s_min=2685.0,
    )
    text = recipes.critical_verdict(failed)
    assert "Fewer than two batch sizes reached" in text and "batch 4 diverged (lr 0.071)" in text


def test_bsdemo_critical_batch_json_ends_with_the_result():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsdemo",
            "critical-batch",
            "--batch-sizes",
            "8,64,4096",
            "--target-loss",
            "0.5",
            "--width",
            "32",
            "--depth",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e["kind"] for e in lines] == ["critical_point"] * 3 + ["critical_result"]
    end = lines[-1]
    assert end["batch_sizes"] == [8, 64, end["train_samples"]]  # 4096: the full batch
    assert all(s and s > 0 for s in end["steps"]) and end["b_simple"] > 0
    assert end["lrs"][0] == pytest.approx(0.2 * (8 / 32) ** 0.5)  # the sqrt rule from 32 at 0.2
    assert end["lrs"][-1] == 0.8  # capped
    # S_min is the fewest steps measured
    assert end["s_min"] == min(end["steps"])


def test_the_critical_study_runs_as_a_job(scheduler):
    from bsdemo.config import RunConfig as Config

    job = scheduler.submit(
        Config(width=32, depth=1).validated()[0],
        owner="cat",
        kind="critical",
        options={"batch_sizes": [16, 256], "target_loss": 0.5},
    )
    snap = scheduler.wait(job, timeout=scaled(120))
    assert snap.status == "completed", snap.end
    assert [p["batch_size"] for p in snap.points] == [16, 256]
    assert snap.result["kind"] == "critical_result"
    with pytest.raises(ConfigError) as err:
        scheduler.submit(Config().validated()[0], owner="cat", kind="critical", options={"rule": "cubic"})
    assert err.value.field == "rule"


def test_the_critical_study_takes_the_noise_measurements_b_simple_only_from_the_same_start():
    start = {
        "dataset": "digits",
        "model": "mlp",
        "norm": "none",
        "width": 64,
        "depth": 2,
        "seed": 0,
        "samples": 4000,
        "noise": 0.1,
        "optimizer": "adam",
        "lr": 0.001,
    }
    critical = {**start, "optimizer": "sgd", "lr": 0.2}  # how it trains does not matter
    result = {"b_simple": 84.0}
    assert recipes.shared_b_simple(start, {"after_steps": 0}, result, critical) == 84.0
    # trained first, another seed, another width: another point, so no shared value
    assert recipes.shared_b_simple(start, {"after_steps": 100}, result, critical) is None
    assert recipes.shared_b_simple({**start, "seed": 1}, {}, result, critical) is None
    assert recipes.shared_b_simple({**start, "width": 128}, {}, result, critical) is None
    assert recipes.shared_b_simple(start, {}, None, critical) is None
