"""Lesson 10's measurements: the pieces checkpointing recomputes, bf16 autocast and checkpointing
on the CPU against plain fp32 (memory, gradients, the loss after a budget), the largest batch
under a budget, and `bsdemo fit-batch --json`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bsdemo.config import RunConfig
from tests.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "settings",
    [
        {"model": "mlp"},
        {"model": "cnn", "width": 8, "depth": 2},
        {"dataset": "arithmetic", "model": "transformer", "width": 32, "depth": 2},
    ],
)
def test_the_segments_compose_to_the_model(settings):
    from bsdemo.engine.fitbatch import Stepper

    stepper = Stepper(RunConfig(**settings))
    x = stepper.run.data.x_train[:16]
    h = stepper.stem(x)
    for block in stepper.blocks:
        h = block(h)
    assert len(stepper.blocks) >= 2
    assert torch.allclose(stepper.head(h), stepper.model(x), atol=1e-6)


def test_checkpointing_gives_the_same_gradients_and_holds_strictly_less():
    """A deep MLP, where activations dominate: the checkpointed step's accounted memory is
    below the plain step's at every batch, and its gradients are the plain ones."""
    from bsdemo.engine.fitbatch import Stepper

    stepper = Stepper(RunConfig(width=512, depth=6))
    x, y = stepper.run.data.x_train[:256], stepper.run.data.y_train[:256]
    grads = {}
    for technique in ("fp32", "checkpointing"):
        stepper.model.zero_grad()
        torch.nn.functional.cross_entropy(stepper._forward(x, technique), y).backward()
        grads[technique] = [p.grad.clone() for p in stepper.params]
    assert all(
        torch.allclose(a, b, atol=1e-6) for a, b in zip(grads["fp32"], grads["checkpointing"], strict=True)
    )
    for batch in (64, 512):
        plain = stepper.step(batch, "fp32")[0] - stepper.fixed
        kept = stepper.step(batch, "checkpointing")[0] - stepper.fixed
        assert 0 < kept < plain
    # at 512 the saving is most of the activations: 6 blocks kept as inputs, one block live
    assert kept < 0.6 * plain


def test_bf16_autocast_runs_on_the_cpu_and_saves_fewer_bytes_per_sample():
    from bsdemo.engine.fitbatch import Stepper

    stepper = Stepper(RunConfig(width=256, depth=3))
    fp32 = [stepper.step(b, "fp32")[0] for b in (64, 512)]
    bf16 = [stepper.step(b, "bf16")[0] for b in (64, 512)]
    per_sample = [(m[1] - m[0]) / 448 for m in (fp32, bf16)]
    assert per_sample[1] < 0.6 * per_sample[0]  # activations in two bytes, not four
    loss = stepper.step(64, "bf16")[2]
    assert 1.5 < loss < 3.5  # a real cross-entropy of an untrained 10-class model


def test_accumulation_reaches_the_loss_of_the_whole_batch_and_bf16_close_to_it():
    from bsdemo.engine.fitbatch import loss_after

    cfg = RunConfig(width=64, depth=2, lr=0.1)
    fp32 = loss_after(cfg, "fp32", steps=20, batch=64)
    assert loss_after(cfg, "accumulation", steps=20, batch=64, accumulation=4) == pytest.approx(
        fp32, rel=1e-4
    )
    assert loss_after(cfg, "bf16", steps=20, batch=64) == pytest.approx(fp32, rel=0.05)
    assert fp32 < 2.2  # it trained


def test_each_technique_fits_the_largest_batch_its_step_verified_under_the_budget():
    from bsdemo.engine.fitbatch import fit_batch

    budget = 3 * 2**20
    events = list(
        fit_batch(
            RunConfig(width=128, depth=3),
            budget,
            budget_steps=5,
            techniques=["fp32", "checkpointing", "accumulation"],
        )
    )
    results = {e["technique"]: e for e in events if e["kind"] == "fit_batch_result"}
    assert events[-1]["kind"] == "fit_batch_end" and set(results) == {"fp32", "checkpointing", "accumulation"}
    for r in results.values():
        assert 0 < r["peak_memory_bytes"] <= budget and r["samples_per_sec"] > 0
        # timed by the thread's own CPU time where one torch thread does the work
        assert r["clock"] == ("thread CPU time" if torch.get_num_threads() == 1 else "wall clock")
    assert results["checkpointing"]["max_batch_size"] > results["fp32"]["max_batch_size"]
    acc = results["accumulation"]
    assert acc["max_batch_size"] == results["fp32"]["max_batch_size"]
    assert acc["effective_batch_size"] == 4 * acc["max_batch_size"]


def test_bsdemo_fit_batch_json_has_a_result_per_technique():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsdemo",
            "fit-batch",
            "--memory-budget",
            "2MiB",
            "--techniques",
            "fp32,bf16",
            "--width",
            "64",
            "--depth",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(240),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e["kind"] for e in lines] == ["fit_batch_result"] * 2 + ["fit_batch_end"]
    for r in lines[:2]:
        assert {
            "technique",
            "max_batch_size",
            "samples_per_sec",
            "peak_memory_bytes",
            "loss_after",
            "loss_vs_fp32",
        } <= set(r)
    assert [r["technique"] for r in lines[:2]] == ["fp32", "bf16"]
    small = subprocess.run(
        [sys.executable, "-m", "bsdemo", "fit-batch", "--memory-budget", "1KiB"],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        cwd=ROOT,
    )
    assert small.returncode == 2 and small.stdout == "" and "--memory-budget" in small.stderr


def _result(technique, batch, per_sample, speed, loss_vs=0.0, k=1):
    return {
        "kind": "fit_batch_result",
        "technique": technique,
        "max_batch_size": batch,
        "effective_batch_size": batch * k,
        "accumulation_steps": k,
        "samples_per_sec": speed,
        "peak_memory_bytes": 8 * 2**20,
        "predicted_max": batch,
        "fixed_bytes": 1_200_000,
        "bytes_per_sample": per_sample,
        "loss_after": 2.0 + loss_vs,
        "loss_vs_fp32": loss_vs,
        "budget_steps": 100,
        "budget_batch": 64,
    }


def test_the_verdict_and_prediction_come_from_the_measurement():
    from bsdemo.recipes.fitbatch import fit_prediction, fit_verdict

    rows = [
        _result("fp32", 2000, 3376, 19000),
        _result("bf16", 4000, 1712, 1500),
        _result("checkpointing", 3000, 2352, 17000),
        _result("bf16+checkpointing", 5000, 1300, 1400, loss_vs=0.02),
        _result("accumulation", 2000, 3376, 19000, k=4),
    ]
    text = fit_verdict(rows, 8 * 2**20, "cpu")
    assert "plain fp32 fits batch 2,000 (3,376 bytes of activations a sample" in text
    assert ("bf16 autocast fits 4,000 (2.0× fp32's). It ran at 1,500 samples/s (0.08× fp32's)") in text
    assert "bf16 with checkpointing fits 5,000" in text and "mostly bf16's arithmetic" in text
    # what the speed ratio measured, never a guess about the hardware
    assert "on this device mixed precision bought memory with time" in text
    assert "half-precision arithmetic" not in text and "tensor cores" not in text
    assert "the recomputed forward passes cost 12% more time a sample" in text
    assert "effective batch of 8,000 (4 micro-batches of 2,000)" in text
    assert "bf16+checkpointing by +0.020" in text
    assert fit_prediction(rows) == (2, "bf16 4,000, checkpointing 3,000, bf16+checkpointing 5,000")
    assert "real" not in text  # no real peaks measured (a GPU, where the peak is the allocator's)
    same = [_result("fp32", 2000, 3376, 19000), _result("bf16", 4000, 1712, 25000)]
    assert "none of them changed the result here" in fit_verdict(same, 8 * 2**20, "cpu")
    assert fit_prediction(same) is None  # the question needs all three
    # checkpointing does fp32's work and recomputes: faster beyond the noise is no reading
    fast = [_result("fp32", 2000, 3376, 19000), _result("checkpointing", 3000, 2352, 76000)]
    text = fit_verdict(fast, 8 * 2**20, "cpu")
    assert "too noisy to read" in text and "4.00× as fast" in text and "76,000" not in text
    # bf16 fast on this CPU, bf16 + checkpointing slow: the recomputation is to blame, not bf16
    quick = [
        _result("fp32", 2000, 3376, 19000),
        _result("bf16", 4000, 1712, 40000),
        _result("bf16+checkpointing", 5000, 1300, 9000),
    ]
    text = fit_verdict(quick, 8 * 2**20, "cpu")
    assert "mostly bf16" not in text and "bf16 alone was not slower here" in text
    assert "on this device it was faster as well" in text


def test_on_the_cpu_a_saving_is_claimed_only_where_the_real_peak_is_lower():
    """The budget is applied to the accounting; each technique's real peak (the allocator's,
    at fp32's largest batch) decides whether the page may call a saving real."""
    from bsdemo.recipes.fitbatch import fit_verdict

    def real(row, peak):
        return row | {"real_peak_bytes": peak, "real_batch": 2000}

    rows = [
        real(_result("fp32", 2000, 3376, 19000), 10 * 2**20),
        real(_result("bf16", 4000, 1712, 1500), 8 * 2**20),
        real(_result("checkpointing", 3000, 2352, 17000), 10 * 2**20 + 4096),
        real(_result("accumulation", 2000, 3376, 19000, k=4), 12 * 2**20),
    ]
    text = fit_verdict(rows, 8 * 2**20, "cpu")
    assert (
        "bf16 autocast fits 4,000 (2.0× fp32's) by the accounting; at batch 2,000 the "
        "allocator's real peak was 8.00 MiB against fp32's 10.0 MiB (20% less): a real saving"
    ) in text
    assert (
        "Gradient checkpointing fits 3,000 (1.5× fp32's) by the accounting, but not in real "
        "memory: at batch 2,000 the allocator's real peak was 10.0 MiB against fp32's 10.0 MiB, "
        "no lower"
    ) in text
    assert (
        "the allocator's real peak 12.0 MiB against fp32's 10.0 MiB for one batch of 2,000: "
        "2.00 MiB more while the micro-batches' gradients are summed"
    ) in text
    # the budget is the accounting's: real peaks over it are said, in the text and the chart
    assert (
        "the allocator's real peaks at batch 2,000 ran over it (fp32 10.0 MiB, checkpointing "
        "10.0 MiB, accumulation 12.0 MiB)"
    ) in text
    assert "at the memory of one micro-batch and one more gradient" in text
    from bsdemo.charts import fit_chart

    subtitle = fit_chart(rows, 8 * 2**20).figure.layout.title.subtitle.text
    assert "by the accounting" in subtitle and "real peaks over it: 3 of 4" in subtitle
    assert "real peaks under it" in fit_chart(rows, 16 * 2**20).figure.layout.title.subtitle.text


def test_the_real_peak_is_the_allocators_and_accumulation_adds_one_gradient_whatever_k():
    """Stepper.allocator_peak on the CPU: bf16 holds less than fp32 at one batch, a larger batch
    more, and summing micro-batches' gradients costs about one gradient more for any k."""
    import torch

    from bsdemo.engine.fitbatch import Stepper

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        stepper = Stepper(RunConfig(width=128, depth=2))
        stepper.step(8, "fp32")
        fp32, bigger = stepper.allocator_peak(256, "fp32"), stepper.allocator_peak(512, "fp32")
        bf16 = stepper.allocator_peak(256, "bf16")
        two, eight = (stepper.allocator_peak(256, "fp32", k) for k in (2, 8))
    finally:
        torch.set_num_threads(threads)
    assert fp32 > stepper.fixed - stepper.param_bytes  # the step allocated something
    assert bigger > fp32 > bf16
    assert two == eight and 0.8 * stepper.param_bytes <= two - fp32 <= 1.2 * stepper.param_bytes


def test_the_chart_draws_each_technique_and_accumulations_micro_batch():
    from bsdemo.charts.fitbatch import fit_chart

    rows = [_result("fp32", 2000, 3376, 19000), _result("accumulation", 2000, 3376, 19000, k=4)]
    chart = fit_chart(rows, 8 * 2**20)
    bars, micro = chart.figure.data
    assert list(bars.x) == [2000, 8000] and list(micro.x) == [2000]
    assert chart.table[1]["effective"] == 8000 and "accumulation 8,000" in chart.alt
