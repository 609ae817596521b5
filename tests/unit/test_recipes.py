"""bsdemo.recipes: the comparison lessons' runs and the verdicts, on constructed results."""

from __future__ import annotations

import pytest

from bsdemo import recipes
from bsdemo.config import RunConfig


def end(
    t0, t1, r2=0.99, constrained=False, cross=None, knee=64, cross_range=None, knee_range=None, clock=None
):
    return {
        "fit": {"t0_s": t0, "t1_s_per_sample": t1, "r2_time": r2, "t0_constrained": constrained},
        "crossover_batch_size": cross,
        "knee_batch_size": knee,
        "crossover_range": cross_range or ((cross * 0.9, cross * 1.1) if cross else None),
        "knee_range": knee_range,
        "clock": clock,
    }


def test_a_fixed_overhead_is_claimed_only_when_the_fit_found_one():
    text = recipes.throughput_verdict(end(3e-4, 3e-5, cross=10), [], "probe")
    assert "0.300 ms" in text and "equal at batch **10**" in text and "R² 0.99" in text
    assert "(68 % range 9–11)" in text
    held = recipes.throughput_verdict(end(0.0, 3e-5, constrained=True), [], "probe")
    assert "no fixed per-step overhead" in held and "ms of" not in held
    assert "-" not in held.split("µs")[0]  # never a negative overhead


def test_the_load_a_sweep_ran_under_is_said():
    busy = [{"others_cpu_share": 0.5}, {"others_cpu_share": 0.3}]
    assert "about 40% of the CPU busy" in recipes.throughput_verdict(end(1e-4, 1e-5), busy, None)
    quiet = [{"others_cpu_share": 0.01}, {"others_cpu_share": None}]
    assert "busy" not in recipes.throughput_verdict(end(1e-4, 1e-5), quiet, None)
    assert recipes.contention([{}]) is None


def test_a_knee_or_crossover_the_rounds_cannot_fix_is_not_named():
    text = recipes.throughput_verdict(
        end(3e-4, 3e-5, knee=None, cross_range=(4, 40), knee_range=(64, 512)), [], None
    )
    assert "not clear from these rounds (somewhere in batch 4–40)" in text
    assert "between batch 64 and 512" in text and "within 10% of your best" not in text


def test_the_clock_is_said_and_busy_rates_are_not_blamed_on_the_device():
    busy = [{"others_cpu_share": 0.6}]
    text = recipes.throughput_verdict(end(1e-4, 1e-5, clock="thread CPU time"), busy, None)
    assert "its own thread's CPU time" in text and "60% of the CPU busy" in text
    assert "lower and noisier" not in text


def test_the_grid_verdict_describes_the_best_lr_as_it_is_against_the_rules():
    assert recipes.best_lr_verdict({8: 0.1}) is None
    lrs = (0.01, 0.03, 0.1, 0.3, 1.0)
    # the seeds: up from 8 to 32, then flat to 512 — not "rises with the batch"
    text = recipes.best_lr_verdict({8: 0.1, 32: 0.3, 128: 0.3, 512: 0.3}, lrs)
    assert (
        "In your grid the best learning rate is 0.1 at batch 8, rises to 0.3 at batch 32 "
        "and stays there up to batch 512."
    ) in text
    assert text.startswith(
        "From batch 8 to 512 the best learning rate changed 3×: closest to the square-root rule.\n\n"
    )
    assert (
        "For 64× the batch the square-root rule predicts 8× and the linear rule 64× (drawn on the grid)."
    ) in text
    assert "tolerates" not in text and "rises with the batch" not in text
    assert "one way only" not in text and "true best" not in text
    text = recipes.best_lr_verdict({8: 0.3, 64: 0.1}, lrs)
    assert "is 0.3 at batch 8, falls to 0.1 at batch 64" in text and "one way only" in text
    assert "closest to the square-root rule" in recipes.best_lr_verdict({8: 0.03, 128: 0.1, 512: 0.3}, lrs)
    text = recipes.best_lr_verdict({8: 0.01, 64: 0.1, 512: 1.0}, lrs)
    assert "closest to the linear rule" in text
    assert "At batch 512 the best is the grid's largest lr (1): the true best may lie above it." in text
    assert "At batch 8 the best is the grid's smallest lr (0.01)" in text
    assert "closest to the linear rule" in recipes.best_lr_verdict({8: 0.01, 64: 0.1}, lrs)


def test_regimes_match_the_cli_and_clamp_to_the_training_set():
    runs = recipes.regime_configs(RunConfig(accumulation_steps=4, max_steps=7), 2, mini_batch=10**6)
    n = RunConfig().train_samples
    assert [c.batch_size for _, c in runs] == [1, n, n]
    assert all(c.accumulation_steps == 1 and c.max_steps is None and c.epochs == 2 for _, c in runs)
    assert [recipes.regime_label(name, c) for name, c in runs][1] == f"full batch ({n})"


def row(run, acc, status="completed", note="", batch=32, updates=100, wall=1.0):
    return {
        "run": run,
        "test accuracy": acc,
        "status": status,
        "note": note,
        "batch": batch,
        "weight updates": updates,
        "wall time (s)": wall,
    }


def test_a_capped_regime_is_named_and_not_ranked():
    rows = [
        row("SGD (batch 1)", 0.95, status="cancelled", note="time cap", updates=4000, wall=20.0),
        row("full batch (1437)", 0.11, updates=5, wall=0.2),
        row("mini-batch (32)", 0.93, updates=225, wall=0.6),
    ]
    text = recipes.regimes_verdict(rows)
    assert "SGD (batch 1) hit its time cap" in text
    assert "mini-batch (32) reached the best test accuracy" in text
    assert "SGD (batch 1) reached" not in text
    assert recipes.regimes_verdict([row("a", None, status="running")]) is None


def test_regimes_with_equal_accuracy_tie_rather_than_rank():
    rows = [row("SGD (batch 1)", 0.931), row("full batch", 0.2), row("mini-batch", 0.933)]
    assert "SGD (batch 1) and mini-batch tied on test accuracy (93.3%)." in recipes.regimes_verdict(rows)
    same = [row(name, acc, updates=100) for name, acc in (("a", 0.5), ("b", 0.6))]
    assert recipes.regimes_verdict(same).startswith("Every run made 100 weight updates; b reached")


def test_the_lr_verdict_speaks_from_the_runs():
    rows = [
        row("ref", 0.97, batch=16),
        row("same", 0.84, batch=128),
        row("linear", 0.972, batch=128),
        row("sqrt", 0.95, batch=128),
        row("warm", 0.968, batch=128),
    ]
    text = recipes.lr_verdict(rows)
    assert "8× larger" in text
    assert "The linear rule came within a point of the reference (+0.2 points)" in text
    assert "the square-root rule fell 2.0 points short of the reference (95.0%)" in text
    assert "nothing blew up or spiked here" in text and "\u22120.4 points" in text
    rows[2] = row("linear", 0.982, batch=128)  # better by more than a point: said so
    assert "The linear rule beat the reference by 1.2 points (98.2%)" in recipes.lr_verdict(rows)
    rows[2] = row("linear", None, status="diverged", batch=128)
    assert "the warm-up prevented it" in recipes.lr_verdict(rows)
    rows[4] = row("warm", None, status="diverged", batch=128)
    assert "blew up with and without warm-up" in recipes.lr_verdict(rows)
    assert recipes.lr_verdict(rows[:4]) is None


def test_a_loss_spike_warm_up_prevented_is_named_with_its_size():
    rows = [
        row("ref", 0.97, batch=16),
        row("same", 0.6, batch=512),
        row("linear", 0.25, batch=512) | {"first loss": 2.3, "peak loss": 52.1},
        row("sqrt", 0.8, batch=512),
        row("warm", 0.85, batch=512) | {"first loss": 2.3, "peak loss": 5.9},
    ]
    text = recipes.lr_verdict(rows)
    assert "jumped to 52.1, 23× its first step's" in text and "peak to 5.90 (2.6×)" in text
    assert "60.0 points of test accuracy ahead" in text and "what warm-up prevents" in text
    rows[4] |= {"peak loss": 11.5}  # lowered, but still over the 5× mark: not "prevented"
    text = recipes.lr_verdict(rows)
    assert "cut its peak to 11.5 (5.0×)" in text and "what warm-up prevents" not in text
    assert "still a spike by this page's 5× mark, but 5× smaller." in text
    rows[4] |= {"peak loss": 60.0}  # the ramp did not lower the spike: not credited
    assert "too short to help" in recipes.lr_verdict(rows)
    rows[2] |= {"peak loss": 3.0}  # no spike at all
    assert "nothing to prevent" in recipes.lr_verdict(rows)
    assert "Warm-up* preset" in recipes.lr_verdict(rows)
    assert set(recipes.LR_PRESETS) >= {"Warm-up (Adam, k = 32)"}
    assert "square-root rule, with no warm-up" not in text  # 80 % is behind the warm-up's 85 %


def test_the_lr_verdict_says_when_the_square_root_rule_was_simply_better():
    rows = [
        row("ref", 0.98, batch=16),
        row("same", 0.975, batch=512),
        row("linear", 0.25, batch=512) | {"first loss": 2.3, "peak loss": 52.1},
        row("sqrt", 0.981, batch=512),
        row("warm", 0.958, batch=512) | {"first loss": 2.3, "peak loss": 4.1},
    ]
    text = recipes.lr_verdict(rows)
    assert "what warm-up prevents" in text
    assert (
        "The square-root rule, with no warm-up, ended ahead of both (98.1%): at this batch "
        "its smaller learning rate was simply the better choice."
    ) in text
    # the warm-up preset's own ramp: 5 epochs of the large batch (15 steps at batch 512)
    warm = recipes.lr_variants(RunConfig(epochs=20), 16, 0.002, 32, warmup_epochs=5)[4][1]
    assert warm.warmup_steps == 5 * 3 and warm.batch_size == 512


def test_a_flat_grid_row_is_not_a_rise():
    text = recipes.best_lr_verdict({8: 0.1, 64: 0.1, 512: 0.1})
    assert "the best learning rate is 0.1 from batch 8 to 512." in text
    assert "changed 1×" in text and "closest to no change" in text


def test_the_lab_verdict_compares_batches_that_trained_alike():
    from tests.unit.test_charts import fake_snapshot

    assert recipes.lab_verdict([]) is None
    small, large = fake_snapshot(1, 32), fake_snapshot(2, 1024)
    like = {"torch_threads": 1, "others_busy_share": 0.05}
    small.end["summary"].update(steps=450, epochs=10.0, wall_time_s=2.0, test_accuracy=0.96, **like)
    large.end["summary"].update(
        steps=20, epochs=10.0, wall_time_s=0.5, test_accuracy=0.47, samples_per_sec=9630.0, **like
    )
    text = recipes.lab_verdict([small, large])
    # the headline: updates, speed and the accuracy change the student came to see
    assert text.startswith(
        "Batch 1024: 2 updates an epoch against batch 32's 45, 3.0× the "
        "samples per second, test accuracy 96.0% → 47.0%.\n\nRun #2 at batch "
        "1024: it trained 10 epochs"
    )
    assert "compared by wall clock" in text
    # a quiet stored run against a loaded live one: their wall-clock speeds are not compared
    large.end["summary"]["others_busy_share"] = 0.9
    apart = recipes.lab_verdict([small, large])
    assert "3.0×" not in apart and "not compared" in apart
    # the training thread's CPU time is comparable whatever the load
    small.end["summary"]["cpu_samples_per_sec"] = 4000.0
    large.end["summary"]["cpu_samples_per_sec"] = 20000.0
    cpu = recipes.lab_verdict([small, large])
    assert "5.0× the samples per second" in cpu and "compared by thread CPU time" in cpu
    assert "47.0% against 96.0%" in text
    large.status = "cancelled"
    large.end["summary"]["time_capped"] = True
    capped = recipes.lab_verdict([small, large])
    assert "hit its time cap" in capped and "against 96.0%" not in capped


def test_accumulation_is_equivalent_only_if_the_parameters_still_agree():
    r = {
        "rel_grad_diff": 1.7e-7,
        "max_abs_param_diff": 1e-8,
        "steps": 5,
        "equivalent": True,
        "drift_grew": False,
        "accumulation_steps": 4,
        "micro_batch": 32,
        "effective_batch_size": 128,
    }
    level, text = recipes.accumulation_verdict(r)
    assert level == "success" and text.startswith(
        "Equivalent: 4 micro-batches of 32 gave one batch of 128's gradient, to float32 rounding "
        "(1.7 × 10⁻⁷).\n\n"
    )
    level, text = recipes.accumulation_verdict(r | {"max_abs_param_diff": 2e-4, "drift_grew": True})
    assert level == "warning" and "rounding grew" in text and "— equivalent" not in text
    assert recipes.accumulation_verdict(r | {"equivalent": False})[1].startswith(
        "Not equivalent: 4 micro-batches of 32 did not give the gradient of one batch of 128."
    )
    assert (
        recipes.layer_rows([{"layer": "net.1.weight", "max_abs_grad_diff": 0.0, "grad_norm": 1.0}])[0][
            "parameter"
        ]
        == "layer 1 weights"
    )
    # with the module's type: each kind numbered in order, not by module index
    rows = recipes.layer_rows(
        [
            {"layer": f"net.{i}.{leaf}", "module": module, "max_abs_grad_diff": 0.0, "grad_norm": 1.0}
            for i, module in ((1, "Linear"), (2, "BatchNorm1d"), (4, "Linear"))
            for leaf in ("weight", "bias")
        ]
    )
    assert [r["parameter"] for r in rows] == [
        "linear layer 1 weights",
        "linear layer 1 biases",
        "BatchNorm 1 weights",
        "BatchNorm 1 biases",
        "linear layer 2 weights",
        "linear layer 2 biases",
    ]


def test_a_knee_at_the_largest_batch_is_not_called_saturation():
    points = [{"batch_size": b, "status": "ok", "samples_per_sec": 100.0 * b**0.5} for b in (1, 2, 4)]
    text = recipes.throughput_verdict(end(1e-4, 1e-5, knee=4), points, None)
    assert text.startswith(
        "Samples/s rose 2.0× from batch 1 to batch 4, still rising at the largest batch.\n\n"
    )
    assert "still rising at the largest batch that ran (4)" in text
    knee = recipes.throughput_verdict(end(1e-4, 1e-5, knee=2), points, None)
    assert knee.startswith(
        "Samples/s rose 2.0× from batch 1 to batch 4, within 10% of the best from batch 2."
    )
    assert "from batch 2." in knee.partition("\n\n")[2]


def test_the_memory_verdict_says_what_the_line_is_worth_on_a_cpu():
    parts = {"parameters": 2**20, "gradients": 2**20, "optimizer_state": 0}
    points = [
        {"batch_size": 1, "status": "ok", "memory_breakdown": parts, "memory_source": "accounted"},
        {"batch_size": 1024, "status": "oom", "simulated": True},
    ]
    end = {
        "fit": {"m0_bytes": 2.1 * 2**20, "m_bytes_per_sample": 4400, "r2_memory": 1.0},
        "max_batch_size_fits": 512,
        "predicted_max_batch_size": 679,
    }
    text = recipes.memory_verdict(end, points)
    assert "2.10 MiB that did not depend on the batch" in text and "2.00 MiB of it" in text
    assert "by construction" in text and "batch 1024 ran out of memory (simulated)" in text
    assert "predicts batch 679" in text
    assert recipes.memory_verdict({"fit": {"m0_bytes": None}}, []) is None


def test_the_runs_answer_the_predict_first_questions():
    import dataclasses

    from bsdemo.lessons import BY_SLUG
    from tests.unit.test_charts import fake_snapshot

    def lab_run(job_id, batch, steps, epochs=10.0):
        snap = fake_snapshot(job_id, batch_size=batch)
        return dataclasses.replace(snap, end={"summary": {"steps": steps, "epochs": epochs}})

    index, numbers = recipes.lab_prediction([lab_run(1, 32, 450), lab_run(2, 256, 60)])
    assert BY_SLUG["training_lab"].answers[index] == "about 8× fewer"
    assert "batch 32 made 45 updates per epoch, batch 256 made 6" in numbers
    assert recipes.lab_prediction([lab_run(1, 32, 450)]) is None  # one batch size: no answer

    def point(b, t):
        return {"batch_size": b, "status": "ok", "step_time_s": t}

    answers = BY_SLUG["throughput"].answers
    assert answers[recipes.throughput_prediction([point(1, 5e-4), point(64, 1e-3)])[0]] == (
        "longer, but far less than 64 times"
    )
    assert answers[recipes.throughput_prediction([point(1, 5e-4), point(64, 6e-4)])[0]] == ("about the same")
    assert answers[recipes.throughput_prediction([point(1, 1e-4), point(64, 6e-3)])[0]] == (
        "about 64 times as long"
    )
    assert recipes.throughput_prediction([point(1, 5e-4)]) is None  # batch 64 not measured

    rows = [
        row("SGD (batch 1)", 0.9, updates=7190),
        row("full batch (1438)", 0.1, updates=5),
        row("mini-batch (32)", 0.93, updates=225),
    ]
    index, numbers = recipes.regimes_prediction(rows)
    assert index == 0 and "SGD (batch 1) made 7,190" in numbers
    assert recipes.regimes_prediction(rows[:2] + [row("m", None, status="running")]) is None

    lr_rows = [
        row("ref", 0.978, batch=16),
        row("same", 0.841, batch=128),
        row("linear", 0.97),
        row("sqrt", 0.95),
        row("warm", 0.97),
    ]
    index, numbers = recipes.lr_prediction(lr_rows)
    assert BY_SLUG["lr_scaling"].answers[index] == "clearly worse (more than a point)"
    assert "(\u221213.7 points)" in numbers  # a real minus sign
    lr_rows[1] = row("same", 0.975, batch=128)
    assert recipes.lr_prediction(lr_rows)[0] == 0  # within a point: about the same
    lr_rows[1] = row("same", None, status="diverged", batch=128)
    assert recipes.lr_prediction(lr_rows)[0] == 1  # a blow-up is worse


def test_memory_prediction_judges_the_largest_doubling_that_ran():
    points = [
        {"batch_size": b, "status": "ok", "peak_memory_bytes": 1_000_000 + 1000 * b} for b in (1, 2, 4, 8)
    ] + [{"batch_size": 16, "status": "oom", "peak_memory_bytes": None}]
    index, numbers = recipes.memory_prediction(points)
    assert index == 2 and "batch 4 peaked at" in numbers and "batch 8" in numbers  # × 1.004
    grown = [{"batch_size": b, "status": "ok", "peak_memory_bytes": 100 + 1000 * b} for b in (512, 1024)]
    assert recipes.memory_prediction(grown)[0] == 0  # × 1.9997: it doubles
    halfway = [
        {"batch_size": b, "status": "ok", "peak_memory_bytes": 1000 + 1000 * b // 256} for b in (256, 512)
    ]
    assert recipes.memory_prediction(halfway)[0] == 1  # 2000 -> 3000: × 1.5
    assert recipes.memory_prediction(points[:1]) is None  # no pair measured yet


def test_accumulation_and_finder_predictions_quote_the_measured_numbers():
    check = {
        "accumulation_steps": 4,
        "micro_batch": 32,
        "big_samples_per_sec": 10_000.0,
        "accumulated_samples_per_sec": 6_000.0,
        "big_peak_memory_bytes": 4 * 2**20,
        "accumulated_peak_memory_bytes": 2**20,
    }
    index, numbers = recipes.accumulation_prediction(check)
    assert index == 2 and "4 × 32 trained 6,000 samples/s" in numbers and "× 0.60" in numbers
    assert recipes.accumulation_prediction(check | {"accumulated_samples_per_sec": 9_500.0})[0] == 1
    assert recipes.accumulation_prediction(None) is None
    index, numbers = recipes.finder_prediction({"max_batch_size": 3000, "probes": 4})
    assert index == 2 and "takes 13 trials" in numbers and "took 4 real runs" in numbers
    assert recipes.finder_prediction({"max_batch_size": 4, "probes": 2})[0] == 1  # 1,2,4,8: 4
    assert recipes.finder_prediction({"max_batch_size": None, "probes": 3}) is None


@pytest.mark.parametrize(
    "accumulated, said",
    [
        (28_000, "ran 1.40× the samples/s of one batch: on this device batch 128 was no more"),
        (19_000, "ran about as fast as one batch (0.95×)"),
        (10_000, "ran 0.50× the samples/s of one batch, the same samples in smaller pieces"),
        (None, "this run did not time it."),
    ],
)
def test_accumulation_why_says_what_this_run_measured_its_speed_cost_to_be(accumulated, said):
    r = {
        "accumulation_steps": 4,
        "micro_batch": 32,
        "effective_batch_size": 128,
        "unscaled_loss": False,
        "norm": "none",
        "variable_length": False,
        "big_samples_per_sec": 20_000,
        "accumulated_samples_per_sec": accumulated,
    }
    why = recipes.accumulation_why(r)
    assert why.startswith("Accumulation saves memory") and said in why
    pitfall = recipes.accumulation_why({**r, "unscaled_loss": True})
    assert pitfall.startswith("Without the 1/k") and "k − 1 = 3" in pitfall
    assert "saves memory" not in pitfall  # a broken check is about the pitfall, not speed
