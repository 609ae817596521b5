"""A stuck run store neither freezes a Run press nor loses a finished run: a real PostgreSQL
server frozen (SIGSTOP on every one of its processes) and stopped, and an SQLite store whose
write lock another connection holds. Each run that finishes meanwhile waits (in the server's
spool folder, on disk), the sidebar's notice says so, and it is written once the store answers
again — by the same server, or by the next one after a restart."""

from __future__ import annotations

import glob
import os
import signal
import sqlite3
import time

import pytest

from bsdemo.config import RunConfig
from bsdemo.scheduler import Scheduler
from bsdemo.scheduler.spool import SUFFIX
from bsdemo.store import RunStore, open_store
from tests.timeouts import scaled, wait_for

SHORT = RunConfig(epochs=None, max_steps=3)


def _spooled(folder) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, f"*{SUFFIX}")))


def _ready(sched: Scheduler) -> Scheduler:
    wait_for(sched.workers_ready, timeout=60)
    return sched


@pytest.fixture
def own_postgres():
    """A PostgreSQL server of this test's own (it is frozen or stopped)."""
    from tests.services import PostgresServer

    server = PostgresServer()
    yield server
    server.close()


def test_a_frozen_database_neither_blocks_a_run_press_nor_loses_the_run(own_postgres, tmp_path):
    server = own_postgres
    spool = tmp_path / "spool"
    sched = _ready(Scheduler(workers=1, store=open_store(None, server.new_database()), spool=spool))
    pids = server.processes()
    try:
        first = sched.wait(sched.submit(SHORT, owner="a", fresh=True), timeout=scaled(120))
        assert first.status == "completed" and sched.flush_store(scaled(30))
        assert sched.store.count() == 1
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        # a Run press: the lookup gives up on the silent server (client-side deadline), the run
        # trains; the press returns within a ceiling, not after the server's 90 s of silence
        started = time.monotonic()
        job = sched.submit(RunConfig(epochs=None, max_steps=4), owner="b")
        assert time.monotonic() - started < scaled(15)
        snap = sched.wait(job, timeout=scaled(120))
        assert snap.status == "completed" and snap.stored_at is None
        wait_for(lambda: "wait to be stored" in (sched.store_notice or ""), timeout=60)
        assert sched.store_waiting == 1 and len(_spooled(spool)) == 1
        assert "did not answer" in sched.store_notice
        # the waiting run is served to the next asker at once, from memory
        again = sched.snapshot(sched.submit(RunConfig(epochs=None, max_steps=4), owner="c"))
        assert again.status == "completed" and again.steps["loss"] == snap.steps["loss"]
        # polls and lookups never queue behind the stuck store
        assert sched.snapshot(job).done and sched.load()["queued"] == 0
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    try:
        sched.store._retry_at = 0  # the store's retry is due
        assert sched.flush_store(scaled(60))
        assert sched.store.count() == 2 and _spooled(spool) == []
        assert sched.store_notice is None
    finally:
        sched.close()


def test_runs_finished_while_the_database_is_down_survive_a_server_restart(own_postgres, tmp_path):
    server = own_postgres
    url, spool = server.new_database(), tmp_path / "spool"
    server.stop()
    a = _ready(Scheduler(workers=1, store=open_store(None, url), spool=spool))
    try:
        # three runs back to back: each reaches the disk at once, while the writer is busy
        # failing on the one before
        snaps = [
            a.wait(
                a.submit(RunConfig(epochs=None, max_steps=3, seed=s), owner="a", fresh=True),
                timeout=scaled(120),
            )
            for s in (0, 1, 2)
        ]
        assert [s.status for s in snaps] == ["completed"] * 3
        snap = snaps[0]
        wait_for(lambda: len(_spooled(spool)) == 3, timeout=30)
        assert "wait to be stored" in a.store_notice and "on this server's disk" in a.store_notice
    finally:
        a.close()  # the lab's server goes down with the runs still waiting
    assert len(_spooled(spool)) == 3
    server.start()
    b = Scheduler(workers=1, store=open_store(None, url), spool=spool)  # the server restarted
    try:
        assert b.flush_store(scaled(60)) and _spooled(spool) == []
        assert b.store.count() == 3
        _ready(b)
        served = b.snapshot(b.submit(RunConfig(epochs=None, max_steps=3, seed=0), owner="b"))
        assert served.status == "completed" and served.stored_at is not None
        assert served.steps["loss"] == snap.steps["loss"]
    finally:
        b.close()


def test_a_held_sqlite_lock_delays_the_write_and_loses_nothing(tmp_path):
    path, spool = tmp_path / "runs.sqlite3", tmp_path / "spool"
    sched = _ready(Scheduler(workers=1, store=RunStore(path), spool=spool))
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")  # another process's long write
        snap = sched.wait(sched.submit(SHORT, owner="a"), timeout=scaled(120))
        assert snap.status == "completed"
        wait_for(lambda: "wait to be stored" in (sched.store_notice or ""), timeout=60)
        assert "locked" in sched.store_notice and len(_spooled(spool)) == 1
        served = sched.snapshot(sched.submit(SHORT, owner="b"))  # found while it waits
        assert served.stored_at is not None and served.steps["loss"] == snap.steps["loss"]
        holder.execute("COMMIT")
        assert sched.flush_store(scaled(60))
        assert sched.store.count() == 1 and _spooled(spool) == [] and sched.store_notice is None
    finally:
        holder.close()
        sched.close()
