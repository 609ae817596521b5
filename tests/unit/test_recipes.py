"""bsdemo.recipes: the comparison lessons' runs and the verdicts, on constructed results."""

from __future__ import annotations

from bsdemo import recipes
from bsdemo.config import RunConfig


def end(t0, t1, r2=0.99, constrained=False, cross=None, knee=64):
    return {"fit": {"t0_s": t0, "t1_s_per_sample": t1, "r2_time": r2,
                    "t0_constrained": constrained},
            "crossover_batch_size": cross, "knee_batch_size": knee}


def test_a_fixed_overhead_is_claimed_only_when_the_fit_found_one():
    text = recipes.throughput_verdict(end(3e-4, 3e-5, cross=10), [], "probe")
    assert "0.3 ms" in text and "Below batch 10" in text and "R² 0.99" in text
    held = recipes.throughput_verdict(end(0.0, 3e-5, constrained=True), [], "probe")
    assert "no fixed per-step overhead" in held and "ms of" not in held
    assert "-" not in held.split("µs")[0]  # never a negative overhead


def test_the_load_a_sweep_ran_under_is_said():
    busy = [{"others_cpu_share": 0.5}, {"others_cpu_share": 0.3}]
    assert "about 40% of the CPU busy" in recipes.throughput_verdict(end(1e-4, 1e-5), busy, None)
    quiet = [{"others_cpu_share": 0.01}, {"others_cpu_share": None}]
    assert "busy" not in recipes.throughput_verdict(end(1e-4, 1e-5), quiet, None)
    assert recipes.contention([{}]) is None


def test_the_grid_verdict_needs_a_rise_and_says_so_for_a_tie():
    assert recipes.best_lr_verdict({8: 0.1}) is None
    assert "rises with the batch" in recipes.best_lr_verdict({8: 0.1, 64: 0.3})
    assert "does not rise" in recipes.best_lr_verdict({8: 0.3, 64: 0.1})


def test_regimes_match_the_cli_and_clamp_to_the_training_set():
    runs = recipes.regime_configs(RunConfig(accumulation_steps=4, max_steps=7), 2, mini_batch=10**6)
    n = RunConfig().train_samples
    assert [c.batch_size for _, c in runs] == [1, n, n]
    assert all(c.accumulation_steps == 1 and c.max_steps is None and c.epochs == 2
               for _, c in runs)
    assert [recipes.regime_label(name, c) for name, c in runs][1] == f"full batch ({n})"
