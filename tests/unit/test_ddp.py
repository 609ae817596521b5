"""Data parallelism with a real torch.distributed (gloo) process group: equivalence to one
process, the timing split, the CLI contract, and no process left behind when stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bsdemo.config import ConfigError, RunConfig
from bsdemo.jobkinds import JobStopped
from tests.timeouts import scaled, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_bsdemo_ddp_check_matches_one_process_with_the_global_batch():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsdemo",
            "ddp-check",
            "--processes",
            "2",
            "--steps",
            "3",
            "--width",
            "64",
            "--depth",
            "1",
            "--batch-size",
            "16",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(240),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["kind"] == "ddp_check" and r["processes"] == 2 and r["global_batch_size"] == 32
    assert r["equivalent"] and r["max_abs_param_diff"] <= 1e-5  # float32 rounding only
    assert r["max_abs_param_diff"] > 0 or r["steps"] == 3  # real numbers, not a copy
    assert r["compute_s"] > 0 and r["allreduce_s"] > 0
    assert r["scaling_efficiency"] == pytest.approx(
        r["single_process_step_s"] / (r["compute_s"] + r["allreduce_s"]) / 2
    )
    # the one worker the group is counted against has one member's share of the cores, and
    # with one thread each side is timed by its own CPU time (a busy machine cannot inflate it)
    threads = max(1, (os.cpu_count() or 1) // 2)
    assert r["single_process_threads"] == threads
    assert r["clock"] == ("thread CPU time" if threads == 1 else "wall clock")


def test_a_global_batch_past_the_training_set_is_refused_before_any_process_starts():
    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "ddp-check", "--batch-size", "1024"],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        cwd=ROOT,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "--batch-size" in out.stderr and "719" in out.stderr


def _group_members() -> list[int]:
    """Process ids of every live group member on this machine (bsdemo.engine.group)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if b"bsdemo.engine.group" in argv:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_stopped_check_leaves_no_process_behind():
    from bsdemo.engine.ddp import ddp_check

    started = []

    def stop():  # stop once the group is up
        started.extend(_group_members())
        return len(started) >= 2

    with pytest.raises(JobStopped):
        ddp_check(RunConfig(width=32, depth=1), processes=2, steps=1000, should_stop=stop)
    assert len(set(started)) >= 2  # it was stopped with its members running
    assert not set(started) & set(_group_members())  # and none is left


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_the_data_parallel_job_runs_under_the_scheduler_and_stop_ends_its_processes(scheduler):
    job = scheduler.submit(
        RunConfig(width=32, depth=1, batch_size=16),
        owner="dana",
        kind="ddp",
        options={"processes": 2, "steps": 2},
    )
    snap = scheduler.wait(job, timeout=scaled(180))
    assert snap.status == "completed", snap.end
    assert snap.result["kind"] == "ddp_check" and snap.result["equivalent"]
    assert snap.result["global_batch_size"] == 32

    long = scheduler.submit(
        RunConfig(width=32, depth=1, batch_size=16),
        owner="dana",
        kind="ddp",
        options={"processes": 2, "steps": 200},
    )
    members = wait_for(lambda: len(_group_members()) >= 2 and _group_members(), timeout=120)
    assert scheduler.cancel(long, "dana")
    snap = scheduler.wait(long, timeout=scaled(60))
    assert snap.status == "cancelled"
    wait_for(lambda: not set(members) & set(_group_members()), timeout=30)
    # the worker goes on: the next job runs
    again = scheduler.submit(RunConfig(epochs=None, max_steps=2), owner="dana")
    assert scheduler.wait(again, timeout=scaled(60)).status == "completed"


def test_a_data_parallel_job_past_the_limits_is_refused_at_submit(scheduler):
    for options, field in (({"processes": 5}, "processes"), ({"steps": 0}, "steps")):
        with pytest.raises(ConfigError) as info:
            scheduler.submit(RunConfig(width=32, depth=1), owner="dana", kind="ddp", options=options)
        assert info.value.field == field
    with pytest.raises(ConfigError) as info:
        scheduler.submit(RunConfig(batch_size=1024), owner="dana", kind="ddp", options={})
    assert info.value.field == "batch_size" and "719" in str(info.value)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_members_die_with_a_launcher_killed_outright():
    """A worker killed with SIGKILL runs no cleanup: the kernel ends its group's members."""
    code = (
        "from bsdemo.config import RunConfig\nfrom bsdemo.engine.ddp import ddp_check\n"
        "ddp_check(RunConfig(width=32, depth=1), processes=2, steps=100000)\n"
    )
    before = set(_group_members())
    launcher = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:  # a ceiling: two gloo processes import torch and meet, on a machine maybe loaded
        members = wait_for(
            lambda: len(set(_group_members()) - before) >= 2 and set(_group_members()) - before, timeout=300
        )
    finally:
        launcher.kill()
        launcher.wait()
    wait_for(lambda: not members & set(_group_members()), timeout=30)
