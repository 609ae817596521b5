"""Store faults: what a Run press waits and what is kept while the run store is stuck.

Three faults, each against a real store: PostgreSQL frozen (SIGSTOP on every process of the
server), PostgreSQL stopped (and the lab's server restarted while it is down), and SQLite with
its write lock held by another connection. In each: one run is kept while the store works; then
the fault; then N Run presses of new settings (each timed from submit to its return, and to its
run's end), the runs that wait for the store (in memory and as spool files); then the store is
mended and the time until every waiting run is written is taken. Needs Debian's postgresql
(initdb, pg_ctl) and psycopg, as the tests do.

    .venv/bin/python bench/store_faults.py [--presses 3]
"""

from __future__ import annotations

import argparse
import glob
import os
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bsdemo.config import RunConfig  # noqa: E402
from bsdemo.scheduler import Scheduler  # noqa: E402
from bsdemo.scheduler.spool import SUFFIX  # noqa: E402
from bsdemo.store import RunStore, open_store  # noqa: E402
from tests.services import PostgresServer  # noqa: E402


def ready(sched: Scheduler) -> Scheduler:
    deadline = time.monotonic() + 120
    while not sched.workers_ready():
        if time.monotonic() > deadline:
            raise RuntimeError("the worker did not start in 120 s")
        time.sleep(0.05)
    return sched


def presses(sched: Scheduler, n: int, seed0: int) -> tuple[list[float], list[float], int]:
    """(seconds each submit took to return, seconds to its run's end, runs completed)."""
    returns, ends, done = [], [], 0
    for i in range(n):
        t0 = time.perf_counter()
        job = sched.submit(RunConfig(epochs=None, max_steps=20, seed=seed0 + i), owner=f"s{i}")
        returns.append(time.perf_counter() - t0)
        snap = sched.wait(job, timeout=300)
        ends.append(time.perf_counter() - t0)
        done += snap.status == "completed"
    return returns, ends, done


def until_written(sched: Scheduler, timeout: float = 120) -> float:
    t0 = time.perf_counter()
    if not sched.flush_store(timeout):
        return float("nan")
    return time.perf_counter() - t0


def spooled(folder: Path) -> int:
    return len(glob.glob(str(folder / f"*{SUFFIX}")))


def frozen(n: int, folder: Path) -> dict:
    server = PostgresServer()
    try:
        sched = ready(
            Scheduler(workers=1, store=open_store(None, server.new_database()), spool=folder / "spool")
        )
        sched.wait(sched.submit(RunConfig(epochs=None, max_steps=5), owner="first"), 120)
        sched.flush_store(30)
        pids = server.processes()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            returns, ends, done = presses(sched, n, 100)
            time.sleep(1)
            waiting, files = sched.store_waiting, spooled(folder / "spool")
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        sched.store._retry_at = 0  # the store's retry (30 s) made due now
        written = until_written(sched)
        kept = sched.store.count() - 1
        sched.close()
    finally:
        server.close()
    return dict(
        fault="PostgreSQL frozen (SIGSTOP)",
        returns=returns,
        ends=ends,
        done=done,
        waiting=waiting,
        files=files,
        written=written,
        kept=kept,
    )


def stopped(n: int, folder: Path) -> dict:
    server = PostgresServer()
    try:
        url = server.new_database()
        server.stop()
        a = ready(Scheduler(workers=1, store=open_store(None, url), spool=folder / "spool"))
        returns, ends, done = presses(sched=a, n=n, seed0=200)
        time.sleep(1)
        waiting, files = a.store_waiting, spooled(folder / "spool")
        a.close()  # the lab's server goes down with the runs waiting
        server.start()
        b = Scheduler(workers=1, store=open_store(None, url), spool=folder / "spool")
        written = until_written(b)
        kept = b.store.count()
        b.close()
    finally:
        server.close()
    return dict(
        fault="PostgreSQL stopped, lab restarted",
        returns=returns,
        ends=ends,
        done=done,
        waiting=waiting,
        files=files,
        written=written,
        kept=kept,
    )


def locked(n: int, folder: Path) -> dict:
    path = folder / "runs.sqlite3"
    sched = ready(Scheduler(workers=1, store=RunStore(path), spool=folder / "spool"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    returns, ends, done = presses(sched, n, 300)
    time.sleep(3)  # the writer's busy wait (2 s) has run out
    waiting, files = sched.store_waiting, spooled(folder / "spool")
    holder.execute("COMMIT")
    holder.close()
    written = until_written(sched)
    kept = sched.store.count()
    sched.close()
    return dict(
        fault="SQLite write lock held",
        returns=returns,
        ends=ends,
        done=done,
        waiting=waiting,
        files=files,
        written=written,
        kept=kept,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presses", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for fault in (frozen, stopped, locked):
        with tempfile.TemporaryDirectory(prefix="bsdemo-faults-") as folder:
            rows.append(fault(args.presses, Path(folder)))
    print(
        f"{'fault':<34} {'press returns s (max)':>22} {'run ends s (med)':>17} "
        f"{'completed':>9} {'waiting':>8} {'spooled':>8} {'written s':>10} {'kept':>5}"
    )
    for r in rows:
        print(
            f"{r['fault']:<34} {max(r['returns']):>22.2f} {statistics.median(r['ends']):>17.2f} "
            f"{r['done']:>6}/{args.presses} {r['waiting']:>8} {r['files']:>8} "
            f"{r['written']:>10.2f} {r['kept']:>5}"
        )


if __name__ == "__main__":
    main()
