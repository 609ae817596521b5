"""The scheduler with real spawned worker processes, on the CPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from bsdemo.config import ConfigError, RunConfig
from bsdemo.runs import STEP_FIELDS
from bsdemo.scheduler import ActiveRunError
from tests.timeouts import scaled, wait_for

LONG = RunConfig(batch_size=1, epochs=5)  # ~7000 steps/epoch at batch 1: long enough to interrupt


def test_run_completes_with_points_and_summary(scheduler):
    job = scheduler.submit(RunConfig(epochs=3), owner="alice")
    snap = scheduler.wait(job, timeout=scaled(60))
    assert snap.status == "completed", snap.end
    assert snap.start["memory_source"] == "accounted"
    assert len(snap.steps["step"]) == snap.end["summary"]["steps"] == snap.latest["step"]
    assert set(snap.steps) == set(STEP_FIELDS)
    assert snap.evals["test_accuracy"][-1] == snap.end["summary"]["test_accuracy"]
    assert scheduler.device_info["type"] == "cpu"


def test_one_active_run_per_session_and_fifo_queue(scheduler):
    first = scheduler.submit(LONG, owner="bob")
    waiting = scheduler.submit(RunConfig(epochs=1), owner="bob")  # one running + one waiting
    with pytest.raises(ActiveRunError, match="limit here is 2"):  # a comparison supersedes none
        scheduler.submit_group([RunConfig(), RunConfig(seed=1)], owner="bob")
    scheduler.cancel(waiting)
    second = scheduler.submit(RunConfig(epochs=1), owner="carol")
    third = scheduler.submit(RunConfig(epochs=1, seed=2), owner="dave")  # not carol's: its own
    assert scheduler.snapshot(second).queue_position == 1
    assert scheduler.snapshot(third).queue_position == 2
    scheduler.cancel(third)  # a queued job is cancelled at once
    assert scheduler.snapshot(third).status == "cancelled"
    wait_for(lambda: scheduler.snapshot(first).latest)
    scheduler.cancel(first)  # a running one between steps
    assert scheduler.wait(first).status == "cancelled"
    assert scheduler.wait(second).status == "completed"
    assert scheduler.active_job("bob") is None
    scheduler.wait(scheduler.submit(RunConfig(epochs=1), owner="bob"))  # free to run again


def test_invalid_config_is_rejected_at_submit(scheduler):
    with pytest.raises(ConfigError, match="batch_size"):
        scheduler.submit(RunConfig(batch_size=0), owner="erin")
    assert scheduler.active_job("erin") is None


def test_engine_failure_becomes_a_failed_job_and_the_worker_goes_on(scheduler):
    job = scheduler.submit(RunConfig(device="cuda"), owner="frank")  # no CUDA on the test machine
    snap = scheduler.wait(job)
    if snap.status == "completed":
        pytest.skip("this machine has CUDA")
    assert snap.status == "failed" and "device" in snap.end["message"]
    assert scheduler.wait(scheduler.submit(RunConfig(epochs=1), owner="frank")).status == "completed"


def test_killed_worker_fails_its_job_and_is_replaced(scheduler):
    job = scheduler.submit(LONG, owner="grace")
    wait_for(lambda: scheduler.snapshot(job).latest)
    pid = scheduler.worker_pids()[0]
    os.kill(pid, signal.SIGKILL)
    snap = scheduler.wait(job, timeout=scaled(30))
    assert snap.status == "failed" and "stopped unexpectedly" in snap.end["message"]
    assert scheduler.worker_pids()[0] != pid
    after = scheduler.wait(scheduler.submit(RunConfig(epochs=1), owner="grace"), timeout=scaled(60))
    assert after.status == "completed"


def test_long_run_buffers_stay_bounded(scheduler):
    job = scheduler.submit(RunConfig(batch_size=8, epochs=8), owner="heidi")  # 1440 steps
    snap = scheduler.wait(job, timeout=scaled(120))
    assert snap.status == "completed"
    assert snap.end["summary"]["steps"] == 1440
    assert len(snap.steps["step"]) < 1000 and snap.stride >= 2
    assert snap.latest["step"] == 1440


def test_server_side_modules_never_import_torch():
    code = (
        "import sys, bsdemo.scheduler, bsdemo.charts, bsdemo.config, bsdemo.events, bsdemo.cli, "
        "bsdemo.ui.lab, bsdemo.ui.sidebar\n"
        "from bsdemo.scheduler import Scheduler\nfrom bsdemo.config import RunConfig\n"
        "s = Scheduler(workers=1)\nsnap = s.wait(s.submit(RunConfig(epochs=1), 'x'), 120)\n"
        "assert snap.status == 'completed', snap.end\n"
        "print('torch' in sys.modules)\ns.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(180))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_sweep_and_find_jobs_stream_their_points(scheduler):
    job = scheduler.submit(
        RunConfig(),
        owner="ivan",
        kind="sweep",
        options={"batch_sizes": [8, 64, 512], "memory_budget_bytes": 3 * 2**20, "timed_steps": 2},
    )
    snap = scheduler.wait(job, timeout=scaled(60))
    assert snap.status == "completed" and snap.kind == "sweep"
    assert [p["status"] for p in snap.points] == ["ok", "ok", "oom"]
    assert snap.result["kind"] == "sweep_end" and snap.result["max_batch_size_fits"] == 64
    job = scheduler.submit(RunConfig(), owner="ivan", kind="find", options={"memory_budget_bytes": 3 * 2**20})
    snap = scheduler.wait(job, timeout=scaled(60))
    assert snap.status == "completed" and snap.result["kind"] == "find_result"
    # it recommends a size it ran: a memory probe, or one whose samples/s it timed in rounds
    ran = [p["batch_size"] for p in snap.points] + [t["batch_size"] for t in snap.result["throughput"]]
    assert snap.result["batch_size"] in ran


def test_a_norms_grid_streams_its_cells_and_stops_between_steps(scheduler):
    job = scheduler.submit(
        RunConfig(epochs=1),
        owner="nora",
        kind="norms",
        options={"batch_sizes": [16, 64], "norms": ["batch", "layer"]},
    )
    snap = scheduler.wait(job, timeout=scaled(90))
    assert snap.status == "completed" and snap.result["kind"] == "norms_end"
    assert [(p["norm"], p["batch_size"]) for p in snap.points] == [
        ("batch", 16),
        ("batch", 64),
        ("layer", 16),
        ("layer", 64),
    ]
    long = scheduler.submit(RunConfig(epochs=50), owner="nora", kind="norms", options={"batch_sizes": [2]})
    wait_for(lambda: scheduler.snapshot(long).status == "running", timeout=60)
    assert scheduler.cancel(long, "nora")
    snap = scheduler.wait(long, timeout=scaled(60))
    assert snap.status == "cancelled" and not snap.points  # stopped inside the first cell


def test_unknown_job_kind_is_rejected(scheduler):
    with pytest.raises(ConfigError, match="kind"):
        scheduler.submit(RunConfig(), owner="judy", kind="dance")


def test_live_mode_replaces_only_a_kind_declared_live(scheduler):
    # a noise measurement is not a run Live mode may stop for a changed setting
    with pytest.raises(ConfigError, match="Live mode"):
        scheduler.submit(
            RunConfig(),
            owner="judy",
            kind="noise",
            supersede=True,
            options={"batch_sizes": [1, 4], "draws": 2},
        )
    assert scheduler.waiting_job("judy", "noise") is None  # refused: nothing was queued


def test_sweeps_run_alone_on_the_device():
    from bsdemo.scheduler import Scheduler

    sched = Scheduler(workers=2, threads_per_worker=1)
    try:
        wait_for(lambda: sched.workers_ready() == 2, timeout=60)
        first = sched.submit(RunConfig(batch_size=2, epochs=3), owner="a")
        wait_for(lambda: sched.snapshot(first).latest)
        sweep_job = sched.submit(
            RunConfig(), owner="b", kind="sweep", options={"batch_sizes": [4, 16], "timed_steps": 2}
        )
        behind = sched.submit(RunConfig(epochs=1), owner="c")
        time.sleep(0.5)  # a free worker exists, but the sweep waits for the device to be idle
        assert sched.snapshot(sweep_job).status == "queued"
        assert sched.snapshot(behind).queue_position == 2  # FIFO: it waits behind the sweep
        sched.cancel(first)
        swept = sched.wait(sweep_job, timeout=scaled(60))
        after = sched.wait(behind, timeout=scaled(60))
        assert swept.status == after.status == "completed" and not swept.shared_device
        # nothing shared the device with the sweep: it started after the first job ended, and
        # the job behind it started only after it ended
        assert swept.started_at >= sched.snapshot(first).finished_at
        assert after.started_at >= swept.finished_at
    finally:
        sched.close()


def test_twenty_ooms_in_the_worker_leave_it_healthy(scheduler):
    before = scheduler.wait(scheduler.submit(RunConfig(epochs=1, seed=5), owner="kim"), timeout=scaled(60))
    sizes = list(range(600, 620))  # every one over a 3 MiB budget for the digits MLP
    job = scheduler.submit(
        RunConfig(),
        owner="kim",
        kind="sweep",
        options={
            "batch_sizes": sizes,
            "memory_budget_bytes": 3 * 2**20,
            "warmup_steps": 0,
            "timed_steps": 1,
            "continue_after_oom": True,
        },
    )
    snap = scheduler.wait(job, timeout=scaled(60))
    assert [p["status"] for p in snap.points] == ["oom"] * 20
    after = scheduler.wait(scheduler.submit(RunConfig(epochs=1, seed=5), owner="kim"), timeout=scaled(60))
    assert after.status == "completed"
    # the same run trained by the same worker before the OOMs: same process, same thread count,
    # so the same bits (a run in this test process could use another thread count, and float
    # sums in another order differ in the last places)
    assert after.end["summary"]["final_train_loss"] == before.end["summary"]["final_train_loss"]


def test_a_comparison_queues_its_runs_together(scheduler):
    ids = scheduler.submit_group([RunConfig(batch_size=b, epochs=1) for b in (8, 64, 512)], owner="lee")
    behind = scheduler.submit(RunConfig(epochs=1), owner="lee")  # the group counts as one
    with pytest.raises(ActiveRunError):  # no room for another comparison
        scheduler.submit_group([RunConfig(), RunConfig(seed=1)], owner="lee")
    # a newer single run supersedes the waiting one; the comparison's queued runs stay
    newer = scheduler.submit(RunConfig(epochs=1, seed=1), owner="lee")
    assert scheduler.snapshot(behind).status == "cancelled"
    assert scheduler.wait(newer, timeout=scaled(60)).status == "completed"
    snaps = [scheduler.wait(j, timeout=scaled(60)) for j in ids]
    assert [s.status for s in snaps] == ["completed"] * 3
    assert [s.end["summary"]["steps"] for s in snaps] == [180, 23, 3]
    assert scheduler.active_job("lee") is None


def test_server_limits_reject_oversize_runs_and_cap_wall_time():
    from bsdemo.limits import Limits
    from bsdemo.scheduler import Scheduler

    sched = Scheduler(
        workers=1, limits=Limits(max_batch_size=256, max_steps=1000, max_wall_s=0.1, submits_per_minute=3)
    )
    try:
        with pytest.raises(ConfigError, match="at most 256 on this server"):
            sched.submit(RunConfig(batch_size=512), owner="m")
        with pytest.raises(ConfigError, match="at most 1,000 optimizer steps"):
            sched.submit(RunConfig(batch_size=1, epochs=1), owner="m")
        job = sched.submit(RunConfig(batch_size=8, epochs=5), owner="m")
        snap = sched.wait(job, timeout=scaled(60))
        assert snap.config["time_limit_s"] == 0.1
        assert snap.status == "cancelled" and "time cap of 0.1 s" in snap.end["message"]
        sched.wait(sched.submit(RunConfig(epochs=1), owner="m"), timeout=scaled(60))
        sched.wait(sched.submit(RunConfig(epochs=1), owner="m"), timeout=scaled(60))
        with pytest.raises(ActiveRunError, match="in the last minute"):
            sched.submit(RunConfig(epochs=1), owner="m")  # the fourth within a minute
    finally:
        sched.close()


def test_live_changes_replace_a_run_and_count_against_their_own_larger_limit():
    """A run that replaces the browser's own (Live mode's change of a setting) adds nothing to
    the queue: past submits_per_minute it is still admitted, up to live_changes_per_minute; a
    run that would add one is refused by the smaller limit all along."""
    from bsdemo.limits import Limits
    from bsdemo.scheduler import Scheduler
    from bsdemo.scheduler.admission import SharingLimits

    sched = Scheduler(workers=1, limits=Limits(submits_per_minute=2, live_changes_per_minute=4, turns=1))
    try:
        long = dict(batch_size=1, epochs=200)
        ids = [sched.submit(RunConfig(**long, seed=0), owner="drag")]
        for seed in range(1, 5):  # four changes after the first run: none adds a run
            ids.append(sched.submit(RunConfig(**long, seed=seed), owner="drag", supersede=True))
        assert len(set(ids)) == 5
        assert len(admission_active(sched, "drag")) == 1  # one run going, none waiting
        with pytest.raises(ActiveRunError, match="4 changes") as refused:
            sched.submit(RunConfig(**long, seed=9), owner="drag", supersede=True)
        assert "live_changes_per_minute" in str(refused.value)
        # a run that adds one counts against the smaller limit, whatever changes came before
        sharing = SharingLimits(sched.limits)
        for _ in range(2):
            sharing.admit([], "other", None, 1)
        with pytest.raises(ActiveRunError, match="2 runs started .*submits_per_minute"):
            sharing.admit([], "other", None, 1)
        sharing.admit([], "other", None, 1, replaces=True)  # a change still may
    finally:
        sched.close()


def admission_active(sched, owner: str) -> list:
    from bsdemo.scheduler import admission

    with sched._lock:
        return admission.active_units(sched._jobs.values(), owner)


def test_unattended_runs_are_cancelled_after_the_grace_period():
    from bsdemo.limits import Limits
    from bsdemo.scheduler import Scheduler

    sched = Scheduler(workers=1, limits=Limits(unattended_grace_s=1.0, turns=1))
    try:
        wait_for(lambda: sched.workers_ready(), timeout=60)
        kept = sched.submit(RunConfig(batch_size=1, epochs=20), owner="watched")
        left = sched.submit(RunConfig(epochs=1), owner="gone")  # queued behind, never polled
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:  # a page polling: heartbeats keep "watched" alive
            sched.heartbeat("watched")
            time.sleep(0.2)
        # the reaper runs on its own clock; "watched" stays polled meanwhile
        wait_for(lambda: sched.heartbeat("watched") or sched.snapshot(left).done)
        assert sched.snapshot(left).status == "cancelled"
        assert "nobody watched" in sched.snapshot(left).end["message"]
        assert sched.snapshot(kept).status == "running"
        sched.cancel(kept)
    finally:
        sched.close()


def test_limits_load_from_a_toml_file_and_the_environment(tmp_path):
    from bsdemo.limits import Limits

    path = tmp_path / "limits.toml"
    path.write_text("[limits]\nmax_steps = 5000\nunattended_grace_s = 30\n")
    lim = Limits.load({"BSDEMO_LIMITS": str(path), "BSDEMO_MAX_BATCH_SIZE": "1024"})
    assert (lim.max_steps, lim.unattended_grace_s, lim.max_batch_size) == (5000, 30.0, 1024)
    with pytest.raises(ConfigError, match="max_steps"):
        Limits.load({"BSDEMO_MAX_STEPS": "-3"})
    with pytest.raises(ConfigError, match="limits"):
        path.write_text("[limits]\nwarp = 9\n")
        Limits.load({"BSDEMO_LIMITS": str(path)})
    with pytest.raises(ConfigError, match="BSDEMO_LIMITS"):
        Limits.load({"BSDEMO_LIMITS": str(tmp_path / "missing.toml")})


def test_a_finished_run_is_served_from_the_store_and_can_be_run_fresh(tmp_path):
    from bsdemo.scheduler import Scheduler
    from bsdemo.store import RunStore

    sched = Scheduler(workers=1, store=RunStore(tmp_path / "runs.sqlite3"))
    try:
        wait_for(lambda: sched.workers_ready(), timeout=60)
        first = sched.wait(sched.submit(RunConfig(epochs=2), owner="n"), timeout=scaled(60))
        assert first.status == "completed" and first.stored_at is None
        again = sched.snapshot(sched.submit(RunConfig(epochs=2), owner="n"))
        assert again.status == "completed" and again.stored_at is not None  # at once
        assert again.steps["loss"] == first.steps["loss"]
        assert again.end["summary"]["test_accuracy"] == first.end["summary"]["test_accuracy"]
        fresh = sched.wait(sched.submit(RunConfig(epochs=2), owner="n", fresh=True), timeout=scaled(60))
        assert fresh.stored_at is None and fresh.status == "completed"
        assert sched.flush_store() and sched.store.count() == 2
    finally:
        sched.close()


def test_memory_admission_waits_with_reason_and_estimate_then_starts():
    """Two workers share a 40 MB device: a run that would not fit beside the running one waits
    (first in line, with its reason and an estimated start), the runs behind it wait too (FIFO),
    and it starts as soon as the memory is free — alone, since nothing else fits beside it."""
    from bsdemo.footprint import predict
    from bsdemo.limits import Limits
    from bsdemo.scheduler import Scheduler

    small, big = LONG, RunConfig(batch_size=1024, width=1024, epochs=2)
    assert predict(small).device + predict(big).device > 38 * 10**6 > predict(big).device
    sched = Scheduler(
        workers=2, threads_per_worker=1, limits=Limits(device_memory=40 * 10**6, memory_margin=0.05)
    )
    try:
        wait_for(lambda: sched.workers_ready() == 2, timeout=60)
        assert sched.usable_memory() == 38 * 10**6
        first = sched.submit(small, owner="a")
        wait_for(lambda: sched.snapshot(first).latest)
        beside = sched.submit(RunConfig(epochs=1), owner="d")  # 3.8 MB: fits beside the first
        assert sched.wait(beside, timeout=scaled(60)).status == "completed"
        assert sched.snapshot(beside).shared_device
        waiting = sched.submit(big, owner="b")
        behind = sched.submit(RunConfig(epochs=1), owner="c")  # would fit, but may not overtake
        time.sleep(0.5)
        snap, after = sched.snapshot(waiting), sched.snapshot(behind)
        assert (snap.status, snap.queue_position, after.queue_position) == ("queued", 1, 2)
        assert "waiting for memory" in snap.wait_reason and "MiB" in snap.wait_reason
        assert snap.predicted_bytes == predict(big).device
        assert snap.estimated_wait_s is not None and not snap.wait_is_bound  # from progress
        assert after.wait_reason == "1 run(s) ahead of it in the queue"
        load = sched.load()
        assert (load["running"], load["queued"], load["workers"]) == (1, 2, 2)
        assert load["held_memory_bytes"] == predict(small).device
        assert load["usable_memory_bytes"] == 38 * 10**6
        assert after.estimated_wait_s >= snap.estimated_wait_s
        sched.cancel(first)
        done = sched.wait(waiting, timeout=scaled(60))
        assert done.status == "completed" and not done.shared_device
        assert sched.wait(behind, timeout=scaled(60)).started_at >= done.finished_at
    finally:
        sched.close()


def test_a_run_too_big_for_the_device_runs_alone_with_a_notice():
    from bsdemo.limits import Limits
    from bsdemo.scheduler import Scheduler

    sched = Scheduler(workers=2, threads_per_worker=1, limits=Limits(device_memory=2**20))
    try:
        wait_for(lambda: sched.workers_ready() == 2, timeout=60)
        snap = sched.wait(sched.submit(RunConfig(epochs=1), owner="a"), timeout=scaled(60))
        assert snap.status == "completed" and not snap.shared_device
        assert "runs alone" in snap.notice and "may run out of memory" in snap.notice
    finally:
        sched.close()


def test_memory_limits_load_and_reject_bad_values():
    from bsdemo.limits import Limits

    lim = Limits.load({"BSDEMO_DEVICE_MEMORY": "8GiB", "BSDEMO_MEMORY_MARGIN": "0.2", "BSDEMO_WORKERS": "3"})
    assert (lim.device_memory, lim.memory_margin, lim.workers) == (8 * 2**30, 0.2, 3)
    with pytest.raises(ConfigError, match="memory_margin"):
        Limits.load({"BSDEMO_MEMORY_MARGIN": "1.5"})
    with pytest.raises(ConfigError, match="device_memory"):
        Limits.load({"BSDEMO_DEVICE_MEMORY": "lots"})
    with pytest.raises(ConfigError, match="workers"):
        Limits.load({"BSDEMO_WORKERS": "65"})


def test_killing_one_worker_loses_no_other_job():
    """Two workers, a run at a time each: SIGKILL the one running A; B (running beside it) and
    C (queued) still finish. (Runs that take turns on the killed worker: test_turns.py.)"""
    from bsdemo.limits import Limits
    from bsdemo.scheduler import Scheduler

    sched = Scheduler(workers=2, threads_per_worker=1, limits=Limits(turns=1))
    try:
        wait_for(lambda: sched.workers_ready() == 2, timeout=60)
        a = sched.submit(LONG, owner="a")
        b = sched.submit(RunConfig(batch_size=4, epochs=3), owner="b")
        wait_for(lambda: sched.snapshot(a).latest and sched.snapshot(b).latest)
        c = sched.submit(RunConfig(epochs=1), owner="c")
        victim = sched.worker_pids()[sched._jobs[a].worker]
        os.kill(victim, signal.SIGKILL)
        assert sched.wait(a, timeout=scaled(30)).status == "failed"
        assert sched.wait(b, timeout=scaled(120)).status == "completed"
        assert sched.wait(c, timeout=scaled(120)).status == "completed"
        assert victim not in sched.worker_pids() and sched.restarts == 1
    finally:
        sched.close()
