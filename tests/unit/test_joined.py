"""A room at once: identical requests ride one run (each asker its own job, the same measured
run shown to all, kept once), a Stop leaves the run to the others, and a browser's first job
goes ahead of anyone's second."""

from __future__ import annotations

import pytest

from bsdemo.config import RunConfig
from bsdemo.limits import Limits
from bsdemo.scheduler import Scheduler
from bsdemo.scheduler.joined import LEFT
from bsdemo.store import RunStore
from tests.timeouts import scaled, wait_for

LONG = RunConfig(batch_size=1, epochs=20)  # minutes at batch 1: stopped by the tests


@pytest.fixture
def sched(tmp_path):
    # a run at a time: who rides, who waits and in which order is what these tests look at
    sched = Scheduler(workers=1, store=RunStore(tmp_path / "runs.sqlite3"), limits=Limits(turns=1))
    wait_for(sched.workers_ready, timeout=60)
    yield sched
    sched.close()


def test_identical_requests_ride_one_run_shown_to_each_and_kept_once(sched):
    cfg = RunConfig(epochs=2)
    ids = [sched.submit(cfg, owner=f"student-{i}", address="10.0.0.1") for i in range(5)]
    assert len(set(ids)) == 5  # each asker has a job of its own
    assert sched.load()["queued"] + sched.load()["running"] == 1  # one run on the device
    follower = sched.snapshot(ids[3])
    assert follower.owner == "student-3" and "Joined a run" in follower.notice
    snaps = [sched.wait(i, timeout=scaled(120)) for i in ids]
    assert [s.status for s in snaps] == ["completed"] * 5
    assert all(s.steps["loss"] == snaps[0].steps["loss"] for s in snaps)
    assert all(s.end == snaps[0].end and s.stored_at is None for s in snaps)
    assert sched.flush_store(scaled(30)) and sched.store.count() == 1
    ended = {(k, st): n for k, st, n in sched.metrics()["tally"]["ended"]}
    assert ended == {("train", "completed"): 1}  # the run is counted once
    # a fresh measurement, asked for on purpose, never rides: it queues a run of its own
    going = sched.submit(LONG, owner="p")
    fresh = sched.submit(LONG, owner="q", fresh=True)
    assert sched.snapshot(fresh).queue_position == 1 and sched.snapshot(fresh).notice is None
    for job in (going, fresh):
        sched.cancel(job)


def test_stop_leaves_the_run_to_the_others_and_the_last_one_out_stops_it(sched):
    starter = sched.submit(LONG, owner="a")
    rider, late = sched.submit(LONG, owner="b"), sched.submit(LONG, owner="c")
    wait_for(lambda: sched.snapshot(rider).latest)  # the rider sees the run's points live
    assert sched.snapshot(rider).latest == sched.snapshot(starter).latest
    assert sched.cancel(late, owner="c")  # a rider leaves: the run goes on
    assert sched.snapshot(late).status == "cancelled"
    assert sched.snapshot(starter).status == "running"
    assert sched.cancel(starter, owner="a")  # the starter leaves: the run is b's now
    gone = sched.snapshot(starter)
    assert gone.done and gone.end["message"] == LEFT.format(n=1) and gone.owner == "a"
    assert sched.active_job("a") is None and sched.active_job("b") == rider
    assert not sched.snapshot(rider).done
    # the starter may run something else at once; the rider keeps watching theirs
    other = sched.submit(RunConfig(epochs=1, seed=9), owner="a")
    assert sched.cancel(rider, owner="b")  # the last one out: the run itself stops
    snap = sched.wait(rider, timeout=scaled(60))
    assert snap.status == "cancelled"
    assert sched.wait(other, timeout=scaled(120)).status == "completed"
    assert sched.load()["running"] == 0


def test_a_browser_s_first_job_goes_ahead_of_anyone_s_second(sched):
    running = sched.submit(LONG, owner="x")
    wait_for(lambda: sched.snapshot(running).status == "running")
    again = sched.submit(RunConfig(epochs=1, seed=1), owner="x")  # x's second job
    newcomer = sched.submit(RunConfig(epochs=1, seed=2), owner="y")  # y's first
    later = sched.submit(RunConfig(epochs=1, seed=3), owner="z")  # z's first, after y's
    assert [sched.snapshot(j).queue_position for j in (newcomer, later, again)] == [1, 2, 3]
    group = sched.submit_group([RunConfig(epochs=1, seed=s) for s in (4, 5)], owner="w")
    # a first comparison stays together, behind the firsts already waiting, ahead of x's second
    assert [sched.snapshot(j).queue_position for j in (*group, again)] == [3, 4, 5]
    for job in (running, again, newcomer, later, *group):
        sched.cancel(job)


def test_a_newer_run_supersedes_the_browser_s_waiting_one_in_its_place(sched):
    """A browser holds at most one waiting run: its next Run drops the one that has not started
    (ended as superseded, never trained) and takes its place in the queue, first or second."""
    running = sched.submit(LONG, owner="x")
    wait_for(lambda: sched.snapshot(running).status == "running")
    mine = sched.submit(RunConfig(epochs=1, seed=1), owner="y")  # y's first: waits
    theirs = sched.submit(RunConfig(epochs=1, seed=2), owner="z")
    assert sched.waiting_job("y") == mine and sched.can_submit("y", "train")
    newer = sched.submit(RunConfig(epochs=1, seed=3), owner="y")
    old = sched.snapshot(mine)
    assert old.status == "cancelled" and old.started_at is None
    assert f"run {newer}" in old.end["message"] and "Superseded" in old.end["message"]
    # the newer run holds the place the old one had: ahead of z's, which came in between
    assert [sched.snapshot(j).queue_position for j in (newer, theirs)] == [1, 2]
    assert sched.waiting_job("y") == newer and sched.active_job("y") == newer
    # the same settings again: the waiting copy is replaced, not joined by itself
    again = sched.submit(RunConfig(epochs=1, seed=3), owner="y")
    assert sched.snapshot(newer).status == "cancelled" and not sched.snapshot(again).notice
    assert sched.snapshot(again).queue_position == 1
    # x's running run is never superseded: x's next one queues beside it, the one after that
    # replaces that one, and a browser whose run runs and whose next waits can still press Run
    second = sched.submit(RunConfig(epochs=1, seed=4), owner="x")
    assert sched.can_submit("x", "train") and not sched.can_submit("x")
    third = sched.submit(RunConfig(epochs=1, seed=5), owner="x")
    assert sched.snapshot(running).status == "running"
    assert sched.snapshot(second).status == "cancelled" and sched.waiting_job("x") == third
    for job in (running, again, theirs, third):
        sched.cancel(job)


def test_a_superseded_rider_leaves_the_run_it_asked_for_to_its_starter(sched):
    blocker = sched.submit(LONG, owner="a")
    wait_for(lambda: sched.snapshot(blocker).status == "running")
    cfg = RunConfig(epochs=1, seed=7)
    starter = sched.submit(cfg, owner="b")
    rider = sched.submit(cfg, owner="c")  # rides b's queued run
    assert "Joined a run" in sched.snapshot(rider).notice
    own = sched.submit(RunConfig(epochs=1, seed=8), owner="c")  # c changed its mind
    assert sched.snapshot(rider).status == "cancelled"
    assert "Superseded" in sched.snapshot(rider).end["message"]
    assert sched.snapshot(starter).status == "queued" and sched.snapshot(own).queue_position == 2
    # b's newer run: b's queued run is dropped for it (nobody rides it any more)
    newer = sched.submit(RunConfig(epochs=1, seed=9), owner="b")
    assert sched.snapshot(starter).status == "cancelled"
    assert [sched.snapshot(j).queue_position for j in (newer, own)] == [1, 2]
    for job in (blocker, newer, own):
        sched.cancel(job)


def test_live_mode_supersedes_the_running_run_and_keeps_its_steps(sched):
    """A setting changed in Live mode: the browser's running run stops between two steps,
    marked as superseded by the new one (its curve stays); a waiting one is dropped too, and a
    dragging browser holds one run going and nothing waiting. Others' runs and a comparison are
    never touched."""
    first = sched.submit(LONG, owner="x")
    wait_for(lambda: sched.snapshot(first).latest)
    other = sched.submit(RunConfig(batch_size=1, epochs=20, seed=9), owner="y")  # waits: turns=1
    second = sched.submit(RunConfig(batch_size=2, epochs=20), owner="x", supersede=True)
    old = sched.wait(first, timeout=scaled(60))
    assert old.status == "cancelled" and old.superseded_by == second and old.steps["step"]
    # y's run was queued ahead of x's newer one and is not x's to stop: it runs first
    wait_for(lambda: sched.snapshot(other).status == "running")
    assert sched.snapshot(second).status == "queued"
    third = sched.submit(RunConfig(batch_size=4, epochs=20), owner="x", supersede=True)
    assert sched.snapshot(second).superseded_by == third  # waiting: dropped, never started
    assert sched.snapshot(second).status == "cancelled"
    assert sched.snapshot(other).status == "running" and sched.snapshot(other).superseded_by is None
    mine = [j for j in (first, second, third) if not sched.snapshot(j).done]
    assert mine == [third]
    for job in (other, third):
        sched.cancel(job)


def test_a_room_on_one_run_shares_one_copy_and_one_set_of_figures(sched):
    """Pages polling a running job within PUBLISH_S get one copy of it (a rider's names the run
    it rides), and the lab's figures of that copy are built once for all of them."""
    from bsdemo.ui.widgets import runs_key, shared_figures

    starter = sched.submit(LONG, owner="a")
    rider = sched.submit(LONG, owner="b")
    wait_for(lambda: sched.snapshot(starter).latest)

    def pair():  # two looks inside one PUBLISH_S window (a busy machine may straddle one)
        mine, theirs = sched.snapshot(starter), sched.snapshot(rider)
        return (mine, theirs) if sched.snapshot(starter) is mine else None

    mine, theirs = wait_for(pair)
    assert theirs.id == rider and theirs.run_id == starter == mine.run_number
    assert theirs.steps is mine.steps and runs_key([theirs]) == runs_key([mine])
    builds = []

    def build():
        builds.append(1)
        return object()

    key = ("test", runs_key([mine]))
    assert shared_figures(key, build) is shared_figures(("test", runs_key([theirs])), build)
    assert len(builds) == 1
    later = wait_for(lambda: (s := sched.snapshot(starter)).version > mine.version and s)
    assert runs_key([later]) != runs_key([mine])  # new steps: a new picture
    for job in (starter, rider):
        sched.cancel(job)
