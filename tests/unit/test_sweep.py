"""Sweeps on the CPU: measured points, simulated OOM with recovery, fits, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.sweep import sweep
from bsdemo.engine.train import train
from tests.timeouts import scaled

MIB = 2**20


def final_points(events):
    """Each batch size's last record: a later round's point replaces its first."""
    points = {}
    for e in events:
        if e["kind"] == "sweep_point":
            assert e.get("replaces", False) == (e["batch_size"] in points)
            points[e["batch_size"]] = e
    return list(points.values())


def run_sweep(sizes, **kw):
    events = list(sweep(RunConfig(), sizes, warmup_steps=1, timed_steps=3, **kw))
    return events[0], final_points(events[1:-1]), events[-1]


def test_points_are_measured_and_memory_is_linear():
    start, points, end = run_sweep([1, 4, 16, 64, 256])
    assert start["kind"] == "sweep_start" and start["exclusive"]
    assert [p["status"] for p in points] == ["ok"] * 5
    for p in points:
        assert p["samples_per_sec"] == pytest.approx(p["batch_size"] / p["step_time_s"])
        assert p["memory_source"] == "accounted" and not p["simulated"]
    peaks = [p["peak_memory_bytes"] for p in points]
    assert peaks == sorted(peaks)
    assert end["fit"]["r2_memory"] > 0.999  # accounted memory is exactly linear in B
    assert end["fit"]["m_bytes_per_sample"] > 0 and end["fit"]["t0_s"] is not None
    assert end["max_batch_size_fits"] == 256 and end["first_oom_batch_size"] is None
    # the knee is named only where the rounds agree on it (a busy machine may leave it
    # unclear); its range always spans measured sizes
    sizes = [p["batch_size"] for p in points]
    assert end["knee_batch_size"] in [*sizes, None]
    assert end["knee_range"] is None or min(sizes) <= end["knee_range"][0] <= max(sizes)


def test_budget_stops_at_the_first_oom_and_marks_the_rest_not_tried():
    _, points, end = run_sweep([16, 128, 512, 1024], memory_budget_bytes=3 * MIB)
    assert [p["status"] for p in points] == ["ok", "ok", "oom", "not_tried"]
    oom = points[2]
    assert oom["simulated"] and "Simulated out of memory" in oom["message"]
    assert "budget is 3.00 MiB" in oom["message"]
    assert "not tried" in points[3]["message"].lower()
    assert end["first_oom_batch_size"] == 512 and end["max_batch_size_fits"] == 128
    # the prediction from the fit lies between the last size that ran and the first that failed
    assert 128 <= end["predicted_max_batch_size"] < 512


def test_continue_after_oom_tries_every_size():
    _, points, _ = run_sweep([16, 512, 1024], memory_budget_bytes=3 * MIB, continue_after_oom=True)
    assert [p["status"] for p in points] == ["ok", "oom", "oom"]


def test_twenty_ooms_in_a_row_leave_the_engine_healthy():
    baseline = list(train(RunConfig(epochs=1, seed=5)))[-1].summary["final_train_loss"]
    for _ in range(20):
        end = list(
            train(
                RunConfig(batch_size=1024, epochs=None, max_steps=2),
                evaluations=False,
                memory_budget_bytes=2 * MIB,
            )
        )[-1]
        assert end.status == "oom" and end.summary["simulated"]
    again = list(train(RunConfig(epochs=1, seed=5)))[-1]
    assert again.status == "completed" and again.summary["final_train_loss"] == baseline


def test_budget_smaller_than_the_model_is_a_clear_error():
    with pytest.raises(ConfigError, match="the model alone"):
        list(sweep(RunConfig(), [1, 2], memory_budget_bytes=1024))


def test_sizes_beyond_the_training_set_are_not_tried():
    _, points, _ = run_sweep([512, 4096])
    assert points[1]["status"] == "not_tried" and "training samples" in points[1]["message"]


def test_generated_datasets_grow_to_hold_the_largest_batch():
    events = list(
        sweep(RunConfig(dataset="moons", width=16, samples=100), [8, 2048], warmup_steps=0, timed_steps=1)
    )
    assert [e["status"] for e in final_points(events[1:-1])] == ["ok", "ok"]


def test_every_point_is_timed_in_rounds_by_the_stable_clock():
    import torch

    from bsdemo.engine.measure import THREAD_CLOCK, WALL_CLOCK

    events = list(sweep(RunConfig(), [1, 16, 256], warmup_steps=1, timed_steps=6, rounds=3))
    first = [e for e in events if e["kind"] == "sweep_point" and not e.get("replaces")]
    assert [p["batch_size"] for p in first] == [1, 16, 256]  # streamed as round 1 ends
    points, end = final_points(events[1:-1]), events[-1]
    clock = THREAD_CLOCK if torch.get_num_threads() == 1 else WALL_CLOCK
    for p in points:
        t = p["timing"]
        assert t["clock"] == clock and 3 <= t["rounds"] <= 6
        assert len(t["round_step_time_s"]) == t["rounds"] and t["steps"] >= 6
        s = t["step_time_s"]
        assert s["q1"] <= s["median"] <= s["q3"] and s["median"] == p["step_time_s"]
        rate = t["samples_per_sec"]  # the rate's quartiles are the step time's, swapped
        assert rate["q1"] == pytest.approx(p["batch_size"] / s["q3"])
        assert p["samples_per_sec"] == pytest.approx(p["batch_size"] / p["step_time_s"])
        assert t["wall_samples_per_sec"] > 0
    assert end["clock"] == clock
    fit = end["fit"]
    assert fit["t0_s"] >= 0 and fit["t1_s_per_sample"] >= 0
    lo, hi = fit["t0_range_s"]
    assert lo <= hi
    if end["knee_batch_size"] is not None:  # named only where its range is one doubling
        assert end["knee_range"][1] <= 2 * end["knee_range"][0]


def test_stop_in_a_later_round_keeps_the_points_measured():
    stop = []
    events = []
    for e in sweep(
        RunConfig(),
        [1, 4],
        warmup_steps=1,
        timed_steps=3,
        rounds=3,
        min_timed_s=0.0,
        should_stop=lambda: bool(stop),
    ):
        events.append(e)
        if e["kind"] == "sweep_point" and e["batch_size"] == 4:
            stop.append(True)  # round 1 is over: Stop comes before round 2
    points = final_points(events[1:-1])
    assert [p["status"] for p in points] == ["ok", "ok"]
    assert [p["timing"]["rounds"] for p in points] == [1, 1]
    assert events[-1]["kind"] == "sweep_end" and events[-1]["fit"]["t0_s"] is not None


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "bsdemo", *args], capture_output=True, text=True, timeout=scaled(120)
    )


def test_cli_sweep_json_lines():
    out = cli(
        "sweep", "--batch-sizes", "8,64,1024", "--memory-budget", "3MiB", "--timed-steps", "2", "--json"
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    points, end = final_points(lines[:-1]), lines[-1]
    assert {p["kind"] for p in lines[:-1]} == {"sweep_point"} and len(points) == 3
    for key in (
        "batch_size",
        "status",
        "samples_per_sec",
        "step_time_s",
        "peak_memory_bytes",
        "memory_source",
        "simulated",
    ):
        assert key in points[0]
    assert [p["status"] for p in points] == ["ok", "ok", "oom"]
    assert end["kind"] == "sweep_end"
    assert set(end["fit"]) >= {"t0_s", "t1_s_per_sample", "m0_bytes", "m_bytes_per_sample", "r2_memory"}
    assert end["max_batch_size_fits"] == 64 and "knee_batch_size" in end


def test_cli_sweep_table():
    out = cli("sweep", "--batch-sizes", "1,32", "--timed-steps", "2")
    assert out.returncode == 0, out.stderr
    assert "samples/s" in out.stdout and "M(B) =" in out.stdout and "t(B) =" in out.stdout


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--batch-sizes", ""], "--batch-sizes"),
        (["--batch-sizes", "8,8"], "--batch-sizes"),
        (["--batch-sizes", "0,1"], "--batch-sizes"),
        (["--batch-sizes", "1,1000000000"], "--batch-sizes"),
        (["--batch-sizes", "-2"], "--batch-sizes"),
        (["--memory-budget", "lots"], "--memory-budget"),
        (["--memory-budget", "1KiB"], "--memory-budget"),
        (["--timed-steps", "0"], "--timed-steps"),
    ],
)
def test_cli_sweep_bad_input_exits_2_with_one_line(args, flag):
    out = cli("sweep", *args)
    assert out.returncode == 2, out.stdout
    assert len(out.stderr.strip().splitlines()) == 1 and flag in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_flops_are_counted_and_shares_of_peak_rise_with_batch():
    start, points, end = run_sweep([1, 64, 1024])
    cfg = RunConfig()
    dense = 2 * (64 * cfg.width + (cfg.depth - 1) * cfg.width**2 + cfg.width * 10)  # forward
    assert 2 * dense < start["flops_per_sample"] <= 3 * dense  # forward + backward
    assert start["peak_flops"] > 0 and "measured" in start["peak_source"]
    shares = [p["share_of_peak"] for p in points]
    # measured, and positive; their size against each other and against 100% depends on what
    # else ran during the sweep and during the peak probe, so no test holds them to it
    assert all(s is not None and 0 < s <= 1.0 for s in shares)  # never above the peak
    assert end["peak_flops"] >= start["peak_flops"]  # raised if a point beat a low probe


def test_each_point_times_a_minimum_duration_unless_told_not_to():
    """Two timed steps of ~0.3 ms are noise; with a 50 ms minimum the point times many more."""
    exact = list(sweep(RunConfig(), [1], warmup_steps=1, timed_steps=2, min_timed_s=0, rounds=1))[1]
    long = list(sweep(RunConfig(), [1], warmup_steps=1, timed_steps=2, min_timed_s=0.05, rounds=1))[1]
    assert exact["status"] == long["status"] == "ok"
    assert exact["message"].startswith("2 timed steps in 1 round(s) after 1 warm-up")
    timed = long["timing"]["steps"]
    # more steps than asked; not "count × median ≈ 0.05 s": under load a few preempted steps
    # make up much of the minimum, and the median leaves them out
    assert timed > 2


def test_no_share_of_peak_exceeds_100_percent_when_the_peak_was_read_low(monkeypatch):
    """A peak probe taken under load (or fp32 datasheet figures against faster math) reads low:
    the best rate achieved then becomes the peak, and the sweep says so."""
    import bsdemo.engine.sweep as sweep_module

    monkeypatch.setattr(sweep_module, "device_peak_flops", lambda info, tf32=None: (1.0, "a tiny probe"))
    events = list(sweep(RunConfig(), [1, 8, 64], timed_steps=2, min_timed_s=0.0))
    points = [e for e in events if e["kind"] == "sweep_point"]
    assert all(0 < p["share_of_peak"] <= 1.0 for p in points)
    assert "raised to the best rate measured here" in events[-1]["peak_source"]
    assert all(p["others_cpu_share"] is None or 0 <= p["others_cpu_share"] <= 1 for p in points)


def test_the_peak_follows_the_math_mode_torch_lets_a_model_use(monkeypatch):
    import torch

    from bsdemo.engine import flops

    h200 = {"type": "cuda", "name": "NVIDIA H200"}
    fp32, source = flops.device_peak_flops(h200, [])
    assert fp32 == 67.0e12 and "fp32" in source
    tf32, source = flops.device_peak_flops(h200, ["convolutions"])
    assert tf32 == 494.7e12 and "TF32" in source and "convolutions" in source
    # no tensor cores (T4): TF32 cannot happen, the fp32 peak stays
    assert flops.device_peak_flops({"type": "cuda", "name": "Tesla T4"}, ["matmuls"])[0] == 8.1e12
    # the flags as this torch sets them: cuDNN convolutions in TF32, matmuls in full fp32
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    assert "matmuls" not in flops.tf32_ops("mlp")
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")  # a user lowering it turns matmuls to TF32
        assert "matmuls" in flops.tf32_ops("mlp")
    finally:
        torch.set_float32_matmul_precision(previous)
    assert "convolutions" in flops.tf32_ops("cnn") and "convolutions" not in flops.tf32_ops("mlp")


def test_a_point_is_timed_by_the_devices_own_clock_only_where_every_round_has_the_same_one():
    """The stable clock (thread CPU time on a one-thread CPU, CUDA event time on a GPU) times a
    point only when all its rounds carry it; a round without it puts the point on the wall
    clock, never a mix of clocks in one median."""
    from bsdemo.engine.sweep import _Block, _measured_point
    from bsdemo.timing import DEVICE_CLOCK, WALL_CLOCK

    def block(own, clock):
        return _Block(
            "ok",
            wall=[0.004, 0.005, 0.006],
            own=own,
            own_clock=clock,
            summary={"memory_source": "cuda allocator"},
        )

    events = [block([0.001, 0.002, 0.003], DEVICE_CLOCK) for _ in range(3)]
    point = _measured_point(64, events, 1)
    assert point["timing"]["clock"] == DEVICE_CLOCK
    assert point["step_time_s"] == pytest.approx(0.002)
    assert point["timing"]["wall_step_time_s"]["median"] == pytest.approx(0.005)
    mixed = _measured_point(64, events[:2] + [block([], None)], 1)
    assert mixed["timing"]["clock"] == WALL_CLOCK and mixed["step_time_s"] == pytest.approx(0.005)
