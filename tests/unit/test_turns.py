"""Runs in turns: a CPU worker holds several training runs at once and steps each in turn
(bsdemo.engine.worker), so a room's runs all start at once instead of queueing. Real spawned
workers on the CPU; no test looks at how fast anything ran, only at what started, what ended
how, and ratios within one run."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

import pytest

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.measure import RunClock
from bsdemo.engine.train import train
from bsdemo.limits import Limits
from bsdemo.runs import turns_note
from bsdemo.scheduler import Scheduler
from bsdemo.scheduler.dispatch import TURN_AFTER_S
from tests.timeouts import scaled, wait_for

LONG = RunConfig(batch_size=1, epochs=5)  # minutes at batch 1: stopped by the tests


def _ready(sched: Scheduler) -> Scheduler:
    wait_for(lambda: sched.workers_ready() == len(sched._pool), timeout=60)
    return sched


@pytest.fixture
def sched():
    sched = _ready(Scheduler(workers=1, limits=Limits(max_active_per_address=100)))
    yield sched
    sched.close()


def test_one_worker_starts_a_room_s_runs_within_a_moment_each_timed_alone(sched):
    ids = [sched.submit(replace(LONG, seed=s), owner=f"s{s}") for s in range(4)]
    # the first starts on the idle worker; the others wait a moment (a short run would end
    # alone meanwhile), then take turns beside it instead of queueing behind it
    assert [sched.snapshot(j).status for j in ids] == ["running"] + ["queued"] * 3
    wait_for(lambda: all(sched.snapshot(j).status == "running" for j in ids), timeout=TURN_AFTER_S + 10)
    wait_for(lambda: all(sched.snapshot(j).latest for j in ids), timeout=60)
    steps = [sched.snapshot(j).latest["step"] for j in ids]
    wait_for(
        lambda: all(sched.snapshot(j).latest["step"] > n for j, n in zip(ids, steps, strict=True)), timeout=60
    )  # every run moves on: they take turns
    for j in ids:
        snap = sched.snapshot(j)
        assert snap.turns_with == 3 and not snap.shared_device and not snap.done
        assert "takes turns with 3 other run(s)" in turns_note(snap.turns_with)
    for j in ids:
        sched.cancel(j)
    snaps = [sched.wait(j, timeout=scaled(60)) for j in ids]
    assert [s.status for s in snaps] == ["cancelled"] * 4
    assert all(s.turns_with == 3 and s.summary["steps"] > 0 for s in snaps)


def test_a_short_run_ends_alone_before_the_next_starts(sched):
    """Runs that end within the moment a run waits for an idle worker never take turns."""
    first = sched.submit(RunConfig(batch_size=64, epochs=1), owner="a")
    second = sched.submit(RunConfig(batch_size=64, epochs=1, seed=1), owner="b")
    snaps = [sched.wait(j, timeout=scaled(60)) for j in (first, second)]
    assert [s.status for s in snaps] == ["completed"] * 2
    # the first ended before the second had waited its moment (so here, where a batch-64 epoch
    # takes ~0.1 s; on a much slower machine the second may have joined it in turns)
    if snaps[0].finished_at - snaps[1].submitted_at < TURN_AFTER_S:
        assert [s.turns_with for s in snaps] == [0, 0]
        assert snaps[1].started_at >= snaps[0].finished_at


def test_stop_ends_only_its_run_and_two_quick_stops_both_land(sched):
    ids = [sched.submit(replace(LONG, seed=s), owner=f"s{s}") for s in range(4)]
    wait_for(lambda: all(sched.snapshot(j).latest for j in ids), timeout=120)
    # two Stops in a row: one shared flag would keep only the second; the messages keep both
    assert sched.cancel(ids[0]) and sched.cancel(ids[1])
    for j in ids[:2]:
        snap = sched.wait(j, timeout=scaled(60))
        assert snap.status == "cancelled" and snap.end["message"].startswith("Stopped after")
    assert [sched.snapshot(j).status for j in ids[2:]] == ["running"] * 2
    first = sched.snapshot(ids[2]).latest["step"]
    wait_for(lambda: sched.snapshot(ids[2]).latest["step"] > first, timeout=60)  # still going
    for j in ids[2:]:
        sched.cancel(j)
        assert sched.wait(j, timeout=scaled(60)).status == "cancelled"


def test_each_run_s_time_cap_is_on_its_own_clock_and_the_backstop_leaves_it_alone():
    """Six runs capped at 1 s each take turns: each ends at its own cap (about 6 s of wall time
    for all), and the server's backstop (1 s past a cap on the wall clock) kills nothing while
    the worker keeps sending records."""
    sched = _ready(Scheduler(workers=1, limits=Limits(stop_grace_s=1.0, max_active_per_address=100)))
    try:
        ids = [sched.submit(replace(LONG, seed=s, time_limit_s=1.0), owner=f"s{s}") for s in range(6)]
        snaps = [sched.wait(j, timeout=scaled(120)) for j in ids]
        assert [s.ending for s in snaps] == ["time_cap"] * 6, [s.end for s in snaps]
        assert not any(s.summary.get("ended_by_server") for s in snaps)
        assert sched.restarts == 0
        for snap in snaps:  # the cap on its own clock: about a second of its own turns
            assert snap.summary["run_time_s"] <= 1.0 + 0.5, snap.summary["run_time_s"]
        elapsed = max(s.finished_at for s in snaps) - min(s.started_at for s in snaps)
        assert elapsed > 2 * max(s.summary["run_time_s"] for s in snaps)  # they took turns
    finally:
        sched.close()


def test_a_killed_worker_fails_every_run_it_held_and_a_fresh_one_goes_on(sched):
    ids = [sched.submit(replace(LONG, seed=s), owner=f"s{s}") for s in range(3)]
    wait_for(lambda: all(sched.snapshot(j).latest for j in ids), timeout=120)
    victim = sched.worker_pids()[0]
    os.kill(victim, signal.SIGKILL)
    for j in ids:
        snap = sched.wait(j, timeout=scaled(60))
        assert snap.status == "failed" and "stopped unexpectedly" in snap.end["message"]
    assert victim not in sched.worker_pids() and sched.restarts == 1
    after = sched.submit(RunConfig(epochs=1, seed=9), owner="next")
    assert sched.wait(after, timeout=scaled(120)).status == "completed"


def test_a_measurement_never_takes_turns_with_a_run(sched):
    run = sched.submit(LONG, owner="a")
    wait_for(lambda: sched.snapshot(run).latest, timeout=60)
    sweep = sched.submit(
        RunConfig(), owner="b", kind="sweep", options={"batch_sizes": [8, 64], "timed_steps": 2}
    )
    snap = sched.snapshot(sweep)
    assert snap.status == "queued" and "to itself" in snap.wait_reason
    sched.cancel(run)
    assert sched.wait(sweep, timeout=scaled(120)).status == "completed"
    assert sched.snapshot(sweep).turns_with == 0


def test_runs_in_turns_keep_their_own_clocks_in_one_thread():
    """Two runs stepped alternately in one thread (as the worker does): each one's wall time
    counts its own turns, so the two together come to about the time both took, not twice it;
    each step is timed inside one turn."""
    clocks = [RunClock(), RunClock()]
    runs = [train(RunConfig(epochs=1, seed=s), clock=c) for s, c in enumerate(clocks)]
    ends, began = [None, None], time.perf_counter()
    for clock in clocks:
        clock.leave()
    while None in ends:
        for i, (run, clock) in enumerate(zip(runs, clocks, strict=True)):
            if ends[i] is not None:
                continue
            clock.back()
            for event in run:
                if event.kind == "end":
                    ends[i] = event
                if event.kind in ("step", "end"):
                    break
            clock.leave()
    elapsed = time.perf_counter() - began
    own = sum(e.summary["run_time_s"] for e in ends)
    assert all(e.status == "completed" for e in ends)
    assert own < 1.5 * elapsed, (own, elapsed)  # a shared clock would give about 2x elapsed
    assert all(c.away > 0 for c in clocks)


def test_turns_is_a_limit_with_a_clear_range():
    assert Limits.load({"BSDEMO_TURNS": "1"}).turns == 1
    assert Limits().turns > 1
    with pytest.raises(ConfigError, match="turns"):
        Limits.load({"BSDEMO_TURNS": "0"})
    with pytest.raises(ConfigError, match="turns"):
        Limits.load({"BSDEMO_TURNS": "100000"})
