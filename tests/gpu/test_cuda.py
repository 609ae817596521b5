"""The CUDA-only paths, as tests: skipped where torch sees no CUDA device (CI, a laptop), run on
a GPU by bench/gpu_check.py (`pytest -m gpu tests/gpu`) beside its timed checks.

Each asserts what only a real CUDA device can show: the allocator's own peak, CUDA events as the
step's clock, a real out-of-memory under an allocator cap (and memory back after it), and fp16
with a gradient scaler among the ways to fit a bigger batch."""

from __future__ import annotations

import dataclasses

import pytest

from bsdemo.config import RunConfig

pytestmark = pytest.mark.gpu

BUDGET = 64 * 2**20  # an allocator cap small enough that a large batch runs out of memory


@pytest.fixture
def torch():
    import torch

    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return torch


def test_a_run_on_cuda_measures_memory_by_the_allocator_and_time_by_cuda_events(torch):
    from bsdemo.engine.train import train

    events = list(train(RunConfig(device="cuda", epochs=None, max_steps=5)))
    assert events[0].kind == "start" and events[0].memory_source == "cuda allocator"
    assert events[-1].status == "completed" and not events[-1].summary.get("simulated")
    steps = [e for e in events if e.kind == "step"]
    assert len(steps) == 5
    for step in steps:
        assert step.peak_memory_bytes > 0 and step.device_time_s > 0
        assert step.memory_reserved_bytes >= step.memory_allocated_bytes


def test_a_sweep_on_cuda_is_timed_by_cuda_events_within_the_wall_clock(torch):
    from bsdemo.engine.sweep import sweep

    events = list(sweep(RunConfig(device="cuda"), [8, 64, 512], warmup_steps=2, timed_steps=5))
    end = events[-1]
    assert end["clock"] == "CUDA event time"
    points = [p for p in events[1:-1] if p["status"] == "ok"]
    assert {p["batch_size"] for p in points} == {8, 64, 512}
    for p in points:  # the GPU's timeline never longer than the synchronised step around it
        timing = p["timing"]
        assert timing["step_time_s"]["median"] <= 1.05 * timing["wall_step_time_s"]["median"]


def test_an_allocator_cap_gives_a_real_out_of_memory_and_memory_comes_back(torch):
    from bsdemo.engine.train import train

    cfg = RunConfig(
        dataset="synthetic",
        model="mlp",
        width=2048,
        depth=4,
        device="cuda",
        epochs=None,
        max_steps=1,
        samples=40_000,
    )
    baseline = torch.cuda.memory_allocated()
    for _ in range(3):
        end = list(
            train(dataclasses.replace(cfg, batch_size=32768), evaluations=False, memory_budget_bytes=BUDGET)
        )[-1]
        assert end.status == "oom" and not end.summary.get("simulated")
        assert torch.cuda.memory_allocated() <= baseline + 2**20
    after = list(train(dataclasses.replace(cfg, batch_size=64, max_steps=5), evaluations=False))[-1]
    assert after.status == "completed"


def test_fp16_with_a_gradient_scaler_is_a_way_to_fit_a_bigger_batch_on_cuda(torch):
    from bsdemo.engine.fitbatch import fit_batch

    cnn = RunConfig(dataset="digits", model="cnn", width=32, depth=3, device="cuda")
    rows = [
        r
        for r in fit_batch(cnn, memory_budget_bytes=BUDGET, max_batch=4096, budget_steps=20)
        if r["kind"] == "fit_batch_result"
    ]
    by = {r["technique"]: r for r in rows}
    assert "fp16" in by and "fp32" in by  # fp16's scaler: CUDA's only (bf16 elsewhere)
    assert by["fp16"]["max_batch_size"] and by["fp16"]["max_batch_size"] > 0
