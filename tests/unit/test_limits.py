"""Every limit holds for every job kind, at the scheduler: batch (micro and effective), steps, the
whole job's wall time, the queue, per browser and per address; every kind stops; only the
owner's heartbeat keeps a run attended; workers have an OS memory ceiling."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import pytest

from bsdemo.config import ConfigError, RunConfig
from bsdemo.jobkinds import KINDS, assess
from bsdemo.limits import Limits
from bsdemo.scheduler import ActiveRunError, Scheduler
from bsdemo.store import RunStore
from tests.timeouts import scaled, wait_for

# a check that takes minutes: 300 optimizer steps of 1024 micro-batches of 1
LONG_CHECK = {"micro_batch": 1, "accum": 1024, "steps": 300}


def ready(sched: Scheduler) -> Scheduler:
    wait_for(lambda: sched.workers_ready() == len(sched.worker_pids()), timeout=60)
    return sched


# ----- the cost bound of every kind, against the limits (no worker needed) -----
SMALL = Limits(max_batch_size=256, max_effective_batch_size=1024, max_steps=5000, max_wall_s=60)


@pytest.mark.parametrize(
    "kind,cfg,options,limit",
    [
        ("train", RunConfig(batch_size=512), {}, "max_batch_size"),
        ("train", RunConfig(batch_size=64, accumulation_steps=32), {}, "max_effective_batch_size"),
        ("train", RunConfig(batch_size=1, epochs=5), {}, "max_steps"),
        ("sweep", RunConfig(), {"batch_sizes": [8, 512]}, "max_batch_size"),
        ("sweep", RunConfig(), {"batch_sizes": [1, 2, 4]}, "max_steps"),  # 2,000-step points
        ("profile", RunConfig(), {"batch_sizes": [8, 512]}, "max_batch_size"),
        ("accum_check", RunConfig(), {"micro_batch": 128, "accum": 4}, "max_batch_size"),
        ("accum_check", RunConfig(), {"micro_batch": 1, "accum": 200, "steps": 100}, "max_steps"),
        ("find", RunConfig(), {"target_effective_batch": 4096}, "max_effective_batch_size"),
        # the single process that checks the group trains the global batch: 2 x 200 in one pass
        ("ddp", RunConfig(batch_size=200), {"processes": 2}, "max_batch_size"),
    ],
)
def test_every_kind_is_held_to_the_same_limits(kind, cfg, options, limit):
    cfg, _ = cfg.validated()
    with pytest.raises(ConfigError, match=limit):
        assess(kind, cfg, options, SMALL, 10.0)


def test_within_the_limits_each_kind_passes_and_the_finder_stops_at_the_server_ceiling():
    cfg, _ = RunConfig().validated()
    _, cost = assess(
        "sweep", cfg, {"batch_sizes": [1, 2, 4], "min_timed_s": 0, "timed_steps": 2}, SMALL, 60.0
    )
    # per point: 3 warm-up, then up to 2 × 3 rounds of 1 warm-up + room for 1 timed step (3)
    assert (cost.micro_batch, cost.steps, cost.wall_s) == (4, 3 * (3 + 2 * 3 * (1 + 3)), 60.0)
    options, cost = assess("find", cfg, {}, SMALL, 60.0)
    assert options["max_batch"] == 256 and cost.micro_batch == 256  # never searches past it
    options, _ = assess("sweep", cfg, {"batch_sizes": [8], "memory_budget_bytes": 1.5 * 2**20}, SMALL, 60.0)
    assert options["memory_budget_bytes"] == 1572864  # the pages' budgets may be whole floats
    _, cost = assess("accum_check", cfg, {"micro_batch": 32, "accum": 8}, SMALL, 60.0)
    assert cost.micro_batch == 256  # the one batch of k·b is a forward pass of its own
    _, cost = assess(
        "norms", RunConfig(epochs=1).validated()[0], {"batch_sizes": [2, 64]}, SMALL, 60.0
    )  # at 10 epochs, 4 x 7,190 steps at batch 2: over max_steps
    assert cost.micro_batch == 64
    _, cost = assess("profile", cfg, {"batch_sizes": [8, 256]}, SMALL, 60.0)
    # per size: two unprofiled blocks and the profiled one (3 warm-up + steps + 1 each), the
    # cut's compiling step, both models' warm-ups and 4 × 2 blocks of 20 steps
    assert (cost.micro_batch, cost.steps) == (256, 2 * ((2 * 24 + 14) + (1 + 6 + 160)))
    assert set(KINDS) == {
        "train",
        "sweep",
        "profile",
        "find",
        "accum_check",
        "norms",
        "noise",
        "sharpness",
        "critical",
        "fit_batch",
        "ddp",
        "pipeline",
        "architectures",
    }


@pytest.mark.parametrize(
    "kind,options,field",
    [
        ("sweep", {"batch_sizes": [8, 8]}, "batch_sizes"),
        ("sweep", {"batch_sizes": [8], "timed_steps": 10**9}, "timed_steps"),
        ("sweep", {"batch_sizes": [8], "min_timed_s": float("inf")}, "min_timed_s"),
        ("sweep", {"batch_sizes": [8], "rm_rf": True}, "rm_rf"),
        ("profile", {"batch_sizes": [8, 512], "trace_dir": "/tmp"}, "trace_dir"),
        ("find", {"margin": 2.0}, "margin"),
        ("accum_check", {"micro_batch": 1000, "accum": 1000}, "micro_batch"),
        ("accum_check", {"unscaled_loss": "yes"}, "unscaled_loss"),
        ("train", {"batch_sizes": [1]}, "batch_sizes"),
        ("dance", {}, "kind"),
    ],
)
def test_options_are_checked_before_a_worker_sees_them(kind, options, field):
    cfg, _ = RunConfig().validated()
    with pytest.raises(ConfigError, match=field):
        assess(kind, cfg, options, Limits(), 60.0)


# ----- with real workers -----
def test_a_comparison_is_one_job_for_the_time_and_step_limits():
    sched = Scheduler(workers=1, limits=Limits(max_wall_s=10, max_steps=2000))
    try:
        with pytest.raises(ConfigError, match="max_wall_s"):
            sched.submit_group([RunConfig(epochs=1, time_limit_s=5)] * 3, owner="a")
        with pytest.raises(ConfigError, match="max_steps"):  # 4 x 540 planned steps
            sched.submit_group([RunConfig(batch_size=8, epochs=3)] * 4, owner="a")
        ids = sched.submit_group([RunConfig(epochs=1)] * 4, owner="a")
        caps = [sched.snapshot(j).config["time_limit_s"] for j in ids]
        assert caps == [2.5] * 4  # uncapped runs share what the whole job may take
        for j in ids:
            sched.cancel(j)
    finally:
        sched.close()


def test_a_sweeps_time_cap_is_for_the_whole_sweep():
    sched = ready(Scheduler(workers=1, limits=Limits(max_wall_s=1.0)))
    try:
        sizes = [2**i for i in range(11)]  # 11 points of at least 0.4 s each: far over 1 s
        job = sched.submit(
            RunConfig(), owner="a", kind="sweep", options={"batch_sizes": sizes, "min_timed_s": 0.4}
        )
        snap = sched.wait(job, timeout=scaled(120))
        assert snap.status == "cancelled" and "time cap of 1 s" in snap.end["message"]
        assert snap.result is not None  # what it measured until then is kept and shown
        statuses = [p["status"] for p in snap.points]
        assert statuses[-1] == "not_tried" and len(statuses) == len(sizes)
    finally:
        sched.close()


def test_stop_and_the_reaper_end_every_kind_between_steps():
    sched = ready(Scheduler(workers=1, limits=Limits(unattended_grace_s=1.0)))
    try:
        for kind, options in (
            ("accum_check", LONG_CHECK),
            ("sweep", {"batch_sizes": [1, 2], "min_timed_s": 60}),
            ("find", {}),
        ):
            job = sched.submit(RunConfig(), owner="me", kind=kind, options=options)
            wait_for(lambda j=job: sched.snapshot(j).status != "queued")
            assert sched.cancel(job, owner="someone else") is False  # not theirs to stop
            assert sched.cancel(job, owner="me") is True
            snap = sched.wait(job, timeout=scaled(60))
            assert snap.status == "cancelled", (kind, snap.end)
        # nobody polls this one: the reaper cancels a check just as it cancels training
        job = sched.submit(RunConfig(), owner="gone", kind="accum_check", options=LONG_CHECK)
        wait_for(lambda: sched.snapshot(job).done, timeout=60)
        snap = sched.snapshot(job)
        assert snap.status == "cancelled" and "nobody watched" in snap.end["message"]
    finally:
        sched.close()


def test_only_the_owners_heartbeat_keeps_a_run_attended():
    sched = ready(Scheduler(workers=1, limits=Limits(unattended_grace_s=1.0)))
    try:
        job = sched.submit(RunConfig(batch_size=1, epochs=20), owner="owner")
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:  # a stranger's tab, open on the copied link
            sched.snapshot(job)
            sched.heartbeat("stranger")
            time.sleep(0.1)
        # looking (snapshot) does not attend it; wait() would, being the owner's own call
        snap = wait_for(lambda: (s := sched.snapshot(job)).done and s, timeout=30)
        assert snap.status == "cancelled" and "nobody watched" in snap.end["message"]
    finally:
        sched.close()


def test_the_queue_has_a_cap_and_so_has_each_address():
    sched = ready(Scheduler(workers=1, limits=Limits(max_queued=4, max_active_per_address=2)))
    try:
        # each browser its own seed: identical settings would ride one run (scheduler.joined)
        def long(seed):
            return RunConfig(batch_size=1, epochs=20, seed=seed)

        sched.submit(long(1), owner="a", address="10.0.0.1")
        sched.submit(long(2), owner="b", address="10.0.0.1")  # a second browser, same address
        with pytest.raises(ActiveRunError, match="max_active_per_address"):
            sched.submit(long(3), owner="c", address="10.0.0.1")  # a third "new session"
        sched.submit(long(4), owner="d", address="10.0.0.2")
        with pytest.raises(ActiveRunError, match="max_queued"):  # a comparison of 2: 3 + 2 > 4
            sched.submit_group([long(5), long(6)], owner="e", address="10.0.0.3")
        sched.submit(long(7), owner="f", address="10.0.0.4")
        with pytest.raises(ActiveRunError, match="queue is full"):
            sched.submit(long(8), owner="g")  # the whole queue: even without an address
        assert sched.load()["running"] + sched.load()["queued"] == 4
    finally:
        sched.close()


def test_a_run_queued_before_the_device_is_known_is_still_served_from_the_store(tmp_path):
    cfg = RunConfig(epochs=2)
    first = ready(Scheduler(workers=1, store=RunStore(tmp_path / "runs.sqlite3")))
    try:
        assert first.wait(first.submit(cfg, owner="a"), timeout=scaled(60)).status == "completed"
    finally:
        first.close()
    restarted = Scheduler(workers=1, store=RunStore(tmp_path / "runs.sqlite3"))
    try:
        assert restarted.device_info is None  # just after a restart: no worker has said hello
        snap = restarted.wait(restarted.submit(cfg, owner="b"), timeout=scaled(60))
        assert snap.status == "completed" and snap.stored_at is not None
        assert restarted.store.count() == 1  # served, not trained and stored a second time
    finally:
        restarted.close()


def test_a_failing_store_lookup_means_running_it_fresh(tmp_path):
    sched = ready(Scheduler(workers=1, store=RunStore(tmp_path / "runs.sqlite3")))

    def broken(*args, **kwargs):
        raise sqlite3.DatabaseError("database disk image is malformed")

    sched.store.find = broken
    try:
        snap = sched.wait(sched.submit(RunConfig(epochs=1), owner="a"), timeout=scaled(60))
        assert snap.status == "completed" and snap.stored_at is None
        assert "malformed" in sched.store_error
    finally:
        sched.close()


def test_cpu_workers_run_under_an_address_space_ceiling():
    sched = ready(Scheduler(workers=1, limits=Limits(device_memory=512 * 2**20, memory_margin=0.5)))
    try:
        info = sched.device_info
        assert info["type"] == "cpu"
        assert info["memory_ceiling_bytes"] == 256 * 2**20 + 2**30  # the share + the slack
        with open(f"/proc/{sched.worker_pids()[0]}/limits") as f:
            line = next(line for line in f if line.startswith("Max address space"))
        assert line.split()[3] != "unlimited"
    finally:
        sched.close()


def test_an_allocation_past_the_ceiling_is_an_out_of_memory_result():
    """The engine under a tight RLIMIT_AS (a run the memory model underestimated): the CPU
    allocator's failure ends the run as "oom", in a process that goes on."""
    code = """
import gc
from bsdemo.config import RunConfig
from bsdemo.engine import measure
from bsdemo.engine.train import prepare, train
cfg = RunConfig(dataset="synthetic", samples=20_000, width=4096, depth=1, batch_size=16_000,
                epochs=None, max_steps=1)
run = prepare(cfg)  # data and model first, under no ceiling
list(train(RunConfig(epochs=None, max_steps=2)))  # warm up autograd and the optimizer
measure.ADDRESS_SPACE_SLACK = 128 * 2**20  # room for small runs, not for a 262 MB activation
measure.limit_address_space(0)
end = list(train(cfg, prepared=run))[-1]
print(end.status, end.summary.get("simulated"))
del run, end
gc.collect()
after = list(train(RunConfig(epochs=None, max_steps=3)))[-1]
print(after.status)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(240))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["oom", "False", "completed"]


def test_a_jobs_planned_points_count_what_it_will_send():
    from bsdemo.jobkinds import planned_points

    assert planned_points("norms", {"batch_sizes": [2, 4, 8], "norms": ["batch", "layer"]}) == 6
    assert planned_points("norms", {"batch_sizes": [2, 4]}) == 8  # every normalisation
    assert planned_points("sweep", {"batch_sizes": [1, 2, 4]}) == 3
    assert planned_points("sharpness", {"remedies": ["noise", "longer"]}) == 4
    assert planned_points("find", {}) is None
