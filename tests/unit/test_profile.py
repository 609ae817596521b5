"""Where a step's time goes: the trace reader on traces with known answers, the profile job's
options, and a real profile of the lab's step on this CPU against a real sweep's fit."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from bsdemo import profiling
from bsdemo.config import ConfigError, RunConfig
from bsdemo.jobkinds import KINDS, assess
from bsdemo.limits import Limits
from bsdemo.recipes.profile import profile_lines, profile_verdict
from tests.timeouts import scaled


def op(name, ts, dur, tid=1, cat="cpu_op"):
    return {"name": name, "ph": "X", "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


def synthetic(b: int, steps: int = 3) -> dict:
    """Steps of a known shape at batch b (µs): 20 µs of the loop, forward `aten::linear` 10 + 0.5·b
    (with a nested call that must not count twice), a 7 µs gap, backward 4 + 1.5·b, an
    optimizer window holding `aten::add_` (5), 3 µs of the loop; and another thread's operator that
    must not count."""
    events, t = [], 1000.0
    for i in range(steps):
        start = t
        t += 20
        fwd = 10 + 0.5 * b
        events += [op("aten::linear", t, fwd), op("aten::addmm", t + 1, fwd - 2)]
        t += fwd + 7
        bwd = 4 + 1.5 * b
        events.append(op("autograd::engine::evaluate_function: AddmmBackward0", t, bwd))
        t += bwd
        events += [op("Optimizer.step#SGD.step", t, 5, cat="user_annotation"), op("aten::add_", t, 5)]
        t += 5 + 3
        events.append(op(f"{profiling.STEP_PREFIX}{i}", start, t - start, cat="user_annotation"))
        events.append(op("aten::mm", start + 2, 50, tid=2))  # another thread
    return {"traceEvents": events}


def test_a_synthetic_trace_gives_the_split_exactly():
    traces = {b: profiling.steps(synthetic(b)) for b in (8, 512)}
    p8 = traces[8][0]
    assert p8.index == 0 and [p.index for p in traces[8]] == [0, 1, 2]
    # the step runs from its first operator to its last: the 20 µs before and 3 µs after are
    # the loop's, between two steps (a step's own time leaves them out too)
    assert p8.dur == pytest.approx(14 + 7 + 16 + 5)
    assert p8.gaps == pytest.approx(7) and p8.busy == pytest.approx(14 + 16 + 5)
    assert p8.by_part() == pytest.approx({"gap": 7, "forward": 14, "backward": 16, "optimizer": 5})
    assert [s.part for s in p8.spans] == ["forward", "gap", "backward", "optimizer"]
    rows = {b: profiling.per_step_rows(ps) for b, ps in traces.items()}
    parted = profiling.split(rows)
    assert parted.t0 == pytest.approx(7 + 10 + 4 + 5)  # the gap, launch parts, the optimizer
    assert parted.t1 == pytest.approx(0.5 + 1.5)
    assert parted.fixed[profiling.GAP] == pytest.approx(7)
    assert parted.per_sample["aten::add_"] == 0 and parted.fixed["aten::add_"] == pytest.approx(5)
    for b in (8, 512):  # the split adds up to the step, exactly
        fixed, growing = parted.at(b)
        assert fixed + growing == pytest.approx(traces[b][0].dur)
    assert parted.fixed_share(8) == pytest.approx(26 / 42)
    assert parted.fixed_share(512) == pytest.approx(26 / (26 + 2 * 512))


def test_kernels_count_and_the_gpu_busy_share_is_their_union():
    trace = synthetic(8, steps=1)
    start = trace["traceEvents"][-2]["ts"]  # the step mark
    trace["traceEvents"] += [
        op("gemm", start + 30, 10, tid=7, cat="kernel"),
        op("relu", start + 35, 10, tid=8, cat="kernel"),  # overlaps: 5
        op("copy", start + 60, 4, tid=7, cat="gpu_memcpy"),
        op("late", start + 10_000, 4, tid=7, cat="kernel"),
    ]  # next step's
    step = profiling.steps(trace)[0]
    assert len(step.kernels) == 3 and step.kernel_busy == pytest.approx(15 + 4)


def test_the_typical_step_is_the_median_and_a_bad_trace_is_named():
    steps = [profiling.StepProfile(d, ()) for d in (5.0, 1.0, 9.0, 3.0)]
    assert profiling.typical(steps).dur == 3.0
    with pytest.raises(ValueError, match="traceEvents"):
        profiling.steps({"events": []})
    with pytest.raises(ValueError, match="lacks ts"):
        profiling.steps({"traceEvents": [{"name": "x", "ph": "X", "pid": 1, "tid": 1}]})
    with pytest.raises(ValueError, match="two batch sizes"):
        profiling.split({8: {"a": 1.0}})
    # time that shrinks with the batch is noise around a fixed cost; no fixed part: the origin
    assert profiling.split({8: {"a": 10.0}, 16: {"a": 8.0}}).fixed["a"] == pytest.approx(9.0)
    through = profiling.split({8: {"a": 1.0}, 16: {"a": 3.0}})
    assert through.fixed["a"] == 0 and through.per_sample["a"] > 0
    assert profiling.two_point_fit({8: 14.0, 512: 518.0}) == pytest.approx((6.0, 1.0))


def test_the_profile_job_checks_its_options():
    cfg = RunConfig(dataset="digits", model="mlp").validated()[0]

    def check(cfg, options):  # admission's check of a profile job's options (and its cost)
        return assess("profile", cfg, options, Limits(), 60.0)[0]

    kind = KINDS["profile"]
    assert kind.exclusive
    checked = check(cfg, {"batch_sizes": [8, 512]})
    assert checked == {"batch_sizes": [8, 512], "steps": 10, "cut": True}
    for bad in ([8], [512, 8], [8, 8], [1, 2, 4, 8, 16], [0, 8], ["8", 512], [True, 8], None):
        with pytest.raises(ConfigError, match="batch_sizes"):
            check(cfg, {"batch_sizes": bad})
    with pytest.raises(ConfigError, match="steps"):
        check(cfg, {"batch_sizes": [8, 512], "steps": 500})
    with pytest.raises(ConfigError, match="cut"):
        check(cfg, {"batch_sizes": [8, 512], "cut": "yes"})


@pytest.fixture(scope="module")
def real_profile():
    from bsdemo.engine.measure import set_threads
    from bsdemo.engine.profile import profile_steps

    set_threads(1)
    cfg = RunConfig(dataset="digits", model="mlp", seed=0)
    return cfg, list(profile_steps(cfg, [8, 512], cut=False))


def test_a_real_trace_is_a_chrome_trace_and_travels_with_its_point(real_profile):
    _, records = real_profile
    assert [r["kind"] for r in records] == ["profile_start", "profile_point", "profile_point", "profile_end"]
    for point in records[1:3]:
        assert point["status"] == "ok" and point["profiled_steps"] >= 3
        trace = json.loads(gzip.decompress(base64.b64decode(point["trace_gz_b64"])))
        events = profiling.check_trace(trace)  # every event: name, ph, ts, pid, tid
        assert any(e.get("cat") == "cpu_op" for e in events)
        assert sum(e["name"].startswith(profiling.STEP_PREFIX) for e in events) >= 3
        assert len(point["timeline"]) >= point["operators_per_step"] > 10
        assert point["kernels_per_step"] is None  # no GPU here
        # profiled steps are never a throughput: the unprofiled ones are timed beside them
        assert point["plain_step_s"]["n"] >= 20


def test_a_real_profile_s_split_agrees_with_a_real_sweep_s_fit(real_profile):
    """The profile's split against a real sweep of the same step on this CPU, as ratios of
    times measured in one process: the unprofiled steps' t0 (the split the page states) within
    a factor of 1.5 of the sweep's; the trace's growing part (t1) from 0.67 to 3 times the
    steps' and its fixed part from 0.75 to 3 times their t0 (a trace is timed by the wall
    clock, and the profiler's cost per operator call is fixed: bench/profile_bench.py measured
    1.0–1.5 and 1.1–1.5 quiet, up to 2.6 for t1 with two CPU hogs)."""
    from bsdemo.engine.sweep import sweep

    cfg, records = real_profile
    end = records[-1]
    split, plain = end["split"], end["plain_fit"]
    assert split["t1_us"] > 0 and split["t0_us"] > 0 and plain["t0_us"] > 0
    assert 1 / 1.5 <= end["t1_agreement"] <= 3.0, end
    assert 0.75 <= end["t0_agreement"] <= 3.0, end
    # the profile and the sweep are timed minutes apart: a burst of load on a 2-core machine can
    # move one sweep's t0 by a third (seen once: 1.53), so up to three sweeps are asked, and
    # the one nearest the profile's must agree within the factor
    ratios = []
    for _ in range(3):
        fit = [r for r in sweep(cfg, [8, 64, 512]) if r["kind"] == "sweep_end"][0]["fit"]
        ratios.append(plain["t0_us"] / (fit["t0_s"] * 1e6))
        if 1 / 1.5 <= ratios[-1] <= 1.5:
            break
    assert 1 / 1.5 <= ratios[-1] <= 1.5, (ratios, plain, fit)
    points = records[1:3]
    text = profile_verdict(points, [], end, fit)
    assert text.startswith("At batch 8 about") and "batch 512" in text
    assert "sweep's fitted t0" in text
    assert all(profile_lines(r) for r in records)


def test_the_closing_text_reads_the_overhead_cut_from_its_numbers():
    """Built records: the lead from the unprofiled steps' t0 + t1·B, the cut read as it ran —
    larger at the small batch, slower there, no change — and a technique that did not run."""

    def point(b, own_s):
        return {
            "kind": "profile_point",
            "batch_size": b,
            "status": "ok",
            "plain_own_s": {"median": own_s},
            "parts_us": {"gap": 50.0, "forward": 50.0},
            "shown_step_us": 100.0,
            "others_cpu_share": 0.0,
        }

    def cut(b, speedup, status="ok"):
        return {
            "kind": "cut_point",
            "batch_size": b,
            "technique": "compile",
            "status": status,
            "speedup": speedup,
            "prepare_s": 1.0,
            "message": "torch.compile did not run here: RuntimeError: no compiler",
        }

    points = [point(8, 500e-6), point(512, 3500e-6)]
    end = {
        "technique": "compile",
        "plain_fit": {"t0_us": 450.0, "t1_us": 6.0},
        "split": {"t0_us": 600.0, "t1_us": 6.2, "fixed_us": {profiling.GAP: 300.0}},
        "t0_agreement": 1.33,
        "t1_agreement": 1.03,
        "profiler_cost_us": [[8, 150], [512, 200]],
        "cut_fit": {"eager": [400.0, 6.0], "cut": [120.0, 6.1]},
    }
    text = profile_verdict(points, [cut(8, 1.8), cut(512, 1.05)], end)
    assert text.startswith("At batch 8 about 90% of a step is fixed cost") and "512, 13%." in text
    assert "1.80× at batch 8" in text and "largest where the fixed cost" in text
    assert "t0 went from 0.400 ms eager to 0.120 ms with torch.compile" in text
    assert "made the small batch slower" in profile_verdict(points, [cut(8, 0.7), cut(512, 1.0)], end)
    assert "about the same at both" in profile_verdict(points, [cut(8, 1.0), cut(512, 1.0)], end)
    assert "did not run here" in profile_verdict(points, [cut(8, 0, "unavailable")], end)
    assert "agrees with the unprofiled steps' (t1 ratio 1.03)" in text
    assert "gaps (Python between operators) (50%)" in text


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--batch-sizes", "512,8"], "--batch-sizes"),
        (["--batch-sizes", "8"], "--batch-sizes"),
        (["--batch-sizes", "1,2,4,8,16"], "--batch-sizes"),
        (["--steps", "1"], "--steps"),
        (["--trace-dir", "/dev/null/x"], "--trace-dir"),
        (["--model", "gan"], "--model"),
    ],
)
def test_bsdemo_profile_s_bad_flags_exit_2_in_one_line_before_torch(argv, flag):
    import subprocess
    import sys

    code = (
        "import sys; from bsdemo.cli import main; code = main(sys.argv[1:]); "
        "print('torch' in sys.modules); raise SystemExit(code)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "profile", *argv], capture_output=True, text=True, timeout=scaled(60)
    )
    assert out.returncode == 2 and out.stdout.strip() == "False", out
    assert out.stderr.count("\n") == 1 and flag in out.stderr and "Traceback" not in out.stderr
