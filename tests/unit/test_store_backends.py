"""Both run stores behind one contract: the embedded SQLite file and the shared PostgreSQL
database (a real server, started by tests/services.py) answer the same, migrate the same, and
lose nothing to writers racing; PostgreSQL's trouble (a server down, restarted, unreachable)
turns stored results off with a notice and never stops a run."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time

import pytest

from bsdemo.config import ConfigError, RunConfig
from bsdemo.scheduler import start_spawned
from bsdemo.store import StoreUnavailable, database_url, open_store
from bsdemo.store.schema import LATEST, MIGRATIONS
from tests.timeouts import scaled, wait_for

DEVICE = {"type": "cpu", "name": "Test CPU"}
# the runs table exactly as the store made it before migrations were kept (version 1)
OLD_SQLITE = """CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL,
created REAL NOT NULL, device TEXT NOT NULL, config TEXT NOT NULL, start TEXT, steps TEXT NOT NULL,
evals TEXT NOT NULL, end_record TEXT NOT NULL);
CREATE INDEX runs_key ON runs (key, created);"""


def record(store, cfg: RunConfig, loss: float = 1.0) -> int:
    return store.put(
        vars(cfg),
        DEVICE,
        {"memory_source": "accounted"},
        {"step": [1, 2], "loss": [loss, loss / 2]},
        {"step": [2], "test_loss": [0.5]},
        {"kind": "end", "status": "completed", "message": "ok", "summary": {}},
    )


@pytest.fixture(params=["sqlite", "postgres"])
def target(request, tmp_path):
    """(data_dir, url) for open_store: a fresh store of each kind."""
    if request.param == "sqlite":
        return (str(tmp_path / "data"), None)
    return (None, request.getfixturevalue("postgres_url"))


@pytest.fixture(autouse=True)
def closed_after():
    """Every store a test opens is closed at its end (an open connection left to the garbage
    collector is a warning, and warnings fail tests here)."""
    import bsdemo.store as store_module

    opened = []

    def tracking(*args, **kwargs):
        store = real(*args, **kwargs)
        opened.append(store)
        return store

    real = store_module.open_store
    globals()["open_store"] = tracking
    yield
    globals()["open_store"] = real
    for store in opened:
        store.close()


def _versions(store) -> list[int]:
    if store.backend == "sqlite":
        return [
            v
            for (v,) in sqlite3.connect(store.path).execute(
                "SELECT version FROM schema_version ORDER BY version"
            )
        ]
    import psycopg

    with psycopg.connect(store.url) as db:
        return [v for (v,) in db.execute("SELECT version FROM schema_version ORDER BY version")]


def test_put_then_find_by_config_and_device(target):
    store = open_store(*target)
    assert store.available and store.notice is None
    first = record(store, RunConfig(batch_size=64))
    hit = store.find(vars(RunConfig(batch_size=64, time_limit_s=600.0)), DEVICE)  # cap ignored
    assert hit.id == first and hit.steps["loss"] == [1.0, 0.5] and hit.end["status"] == "completed"
    assert hit.host == store.host and hit.device == DEVICE and hit.start["memory_source"]
    assert store.find(vars(RunConfig(batch_size=32)), DEVICE) is None
    assert store.find(vars(RunConfig(batch_size=64)), {"type": "cuda", "name": "H200"}) is None
    store.version = "0.1.0+different"  # changed engine code: a miss
    assert store.find(vars(RunConfig(batch_size=64)), DEVICE) is None
    assert _versions(store) == [v for v, _, _ in MIGRATIONS]


def test_newest_wins_and_survives_a_reopen(target):
    store = open_store(*target)
    record(store, RunConfig(), loss=3.0)
    time.sleep(0.01)
    record(store, RunConfig(), loss=2.0)
    store.close()
    again = open_store(*target)
    assert again.find(vars(RunConfig()), DEVICE).steps["loss"][0] == 2.0 and again.count() == 2
    assert _versions(again) == list(range(1, LATEST + 1))  # migrated once, not per open


def _open_and_write(target: tuple, offset: int, runs: int) -> None:
    store = open_store(*target)  # every writer also races the others' migration of a new store
    assert store.available, store.notice
    for i in range(runs):
        record(store, RunConfig(seed=offset + i))


def test_racing_openers_and_writers_lose_nothing(target):
    """Four processes open the same new store at once (each would migrate it) and write 20 runs
    each: the schema is applied once, every run is kept and found."""
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_open_and_write, args=(target, 100 * k, 20)) for k in range(4)]
    for p in procs:
        start_spawned(p)
    for p in procs:
        p.join(scaled(120))
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    store = open_store(*target)
    assert store.count() == 80 and _versions(store) == list(range(1, LATEST + 1))
    assert all(store.find(vars(RunConfig(seed=100 * k + i)), DEVICE) for k in range(4) for i in range(20))


def _make_old_store(target) -> None:
    """A store as the lab wrote it before migrations: version 1's table, one run, no versions."""
    from bsdemo.store.common import code_version, run_key

    row = (
        run_key(vars(RunConfig()), DEVICE, code_version()),
        time.time(),
        '{"type": "cpu", "name": "Test CPU"}',
        "{}",
        "null",
        '{"loss": [4.0]}',
        "{}",
        '{"status": "completed"}',
    )
    if target[1] is None:
        import pathlib

        pathlib.Path(target[0]).mkdir(parents=True)
        db = sqlite3.connect(pathlib.Path(target[0]) / "runs.sqlite3")
        db.executescript(OLD_SQLITE)
        db.execute(
            "INSERT INTO runs (key, created, device, config, start, steps, evals, "
            "end_record) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )
        db.commit()
        db.close()
        return
    import psycopg

    with psycopg.connect(target[1], autocommit=True) as db:
        for sql in OLD_SQLITE.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY").split(
            ";"
        ):
            if sql.strip():
                db.execute(sql)
        db.execute(
            "INSERT INTO runs (key, created, device, config, start, steps, evals, "
            "end_record) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            row,
        )


def test_a_store_from_before_migrations_is_upgraded_in_place(target):
    _make_old_store(target)
    store = open_store(*target)
    assert store.available and store.notice is None
    old = store.find(vars(RunConfig()), DEVICE)
    assert old.steps["loss"] == [4.0] and old.host is None  # kept, and read with the new column
    assert _versions(store) == list(range(1, LATEST + 1))
    record(store, RunConfig(seed=5))
    assert store.count() == 2


def test_a_store_newer_than_this_code_is_left_alone(target):
    store = open_store(*target)
    record(store, RunConfig())
    mark = "?" if store.backend == "sqlite" else "%s"
    sql = f"INSERT INTO schema_version (version, applied, description) VALUES ({mark}, 0, 'x')"
    if store.backend == "sqlite":
        with sqlite3.connect(store.path) as db:
            db.execute(sql, (LATEST + 7,))
    else:
        import psycopg

        with psycopg.connect(store.url, autocommit=True) as db:
            db.execute(sql, (LATEST + 7,))
    store.close()
    newer = open_store(*target)
    assert not newer.available and f"version {LATEST + 7}" in newer.notice
    assert "off for now" in newer.notice
    with pytest.raises(StoreUnavailable):
        newer.find(vars(RunConfig()), DEVICE)
    assert not any("damaged" in p for p in _folder_names(target))  # not salvaged: untouched


def _folder_names(target) -> list[str]:
    import os

    return os.listdir(target[0]) if target[0] else []


def test_a_database_url_is_checked_and_never_shown_with_its_password():
    assert database_url(None) is None and database_url("  ") is None
    assert database_url(" postgresql://lab@db/runs ") == "postgresql://lab@db/runs"
    with pytest.raises(ConfigError) as caught:
        database_url("mysql://lab:hunter2@db/runs")
    message = str(caught.value)
    assert "BSDEMO_DATABASE_URL" in message and "postgresql://" in message
    assert "hunter2" not in message and "mysql://lab:***@db/runs" in message


def test_an_unreachable_server_turns_stored_results_off_then_back_on(postgres_server, monkeypatch):
    """Down at open: unavailable, a notice naming where (password masked), the lookups fail
    fast; once the server is back and the retry is due, the store works."""
    from tests.services import PostgresServer

    server = PostgresServer()
    try:
        url = server.new_database()
        server.stop()
        masked = url.replace("bsdemo@", "bsdemo:hunter2@")
        started = time.monotonic()
        store = open_store(None, masked)
        assert time.monotonic() - started < scaled(30)  # bounded by the connect timeout
        assert not store.available and "could not be reached" in store.notice
        assert "hunter2" not in store.notice and "bsdemo:***@127.0.0.1" in store.notice
        with pytest.raises(StoreUnavailable):
            store.find(vars(RunConfig()), DEVICE)
        server.start()
        with pytest.raises(StoreUnavailable):  # not retried before its time (RETRY_S)
            store.count()
        store._retry_at = 0  # the retry is due
        assert store.count() == 0 and store.available and store.notice is None
    finally:
        server.close()


def test_a_restarted_server_is_reconnected_and_a_stopped_one_fails_fast():
    from tests.services import PostgresServer

    server = PostgresServer()
    try:
        store = open_store(None, server.new_database())
        record(store, RunConfig(seed=1))
        server.stop()
        server.start()  # every connection was cut: the store reconnects once, at once
        assert store.find(vars(RunConfig(seed=1)), DEVICE) is not None and store.available
        server.stop()
        with pytest.raises(StoreUnavailable):
            record(store, RunConfig(seed=2))
        assert not store.available and "could not be reached" in store.notice  # tried again
    finally:
        server.close()


def test_a_run_trains_on_while_the_database_is_down_and_is_kept_once_it_is_back():
    """The scheduler with a PostgreSQL store whose server is down: Run completes (fresh), the
    store's failure is its notice; with the server back, a finished run is kept and a second
    scheduler (another replica) serves it from the store."""
    from bsdemo.scheduler import Scheduler
    from tests.services import PostgresServer

    server = PostgresServer()
    scheds = []
    try:
        url = server.new_database()
        server.stop()
        a = Scheduler(workers=1, store=open_store(None, url))
        scheds.append(a)
        wait_for(a.workers_ready, timeout=60)
        cfg = RunConfig(epochs=None, max_steps=3)
        snap = a.wait(a.submit(cfg, owner="s1", fresh=True), timeout=scaled(120))
        assert snap.status == "completed" and snap.stored_at is None
        assert "off for now" in a.store_notice
        server.start()
        a.store._retry_at = 0
        snap = a.wait(a.submit(cfg, owner="s1", fresh=True), timeout=scaled(120))
        assert snap.status == "completed" and a.flush_store(scaled(30))
        assert a.store_notice is None and a.store.count() == 1
        b = Scheduler(workers=1, store=open_store(None, url))  # another replica, same store
        scheds.append(b)
        wait_for(lambda: b.device_info, timeout=60)
        served = b.snapshot(b.submit(cfg, owner="s2"))
        assert served.status == "completed" and served.stored_at is not None
        assert served.steps["loss"] == snap.steps["loss"]
    finally:
        for sched in scheds:
            sched.close()
        server.close()


def _warm(url: str):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "BSDEMO_DATA_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "bsdemo", "warm", "--preset", "digits-mlp", "--batch-sizes", "64"],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        env={**env, "BSDEMO_DATABASE_URL": url},
    )


def test_warm_fills_the_shared_store_or_says_in_one_line_why_it_cannot(postgres_url):
    """`bsdemo warm` with BSDEMO_DATABASE_URL: a URL that is not PostgreSQL's is bad input (exit
    2, one line naming the setting, password masked); a server nobody answers at is exit 1 before
    any training; a real one gets the lecture's runs, which a replica then finds."""
    from tests.services import free_port

    bad = _warm(f"mysql://lab:hunter2@127.0.0.1:{free_port()}/runs")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stdout == ""
    assert "BSDEMO_DATABASE_URL" in bad.stderr and "hunter2" not in bad.stderr
    down = _warm(f"postgresql://lab:hunter2@127.0.0.1:{free_port()}/runs")
    assert down.returncode == 1 and down.stderr.count("\n") == 1 and "Traceback" not in down.stderr
    assert "could not be reached" in down.stderr and "nothing was trained" in down.stderr
    assert "hunter2" not in down.stderr
    ok = _warm(postgres_url)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "1 runs" in ok.stdout and "postgresql://bsdemo@127.0.0.1" in ok.stdout
    store = open_store(None, postgres_url)
    assert store.count() == 1
