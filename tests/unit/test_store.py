"""The run store: SQLite in WAL mode, keyed by config, code version and device."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import shutil
import sqlite3
import subprocess
import time

import pytest

from bsdemo.config import RunConfig
from bsdemo.scheduler import start_spawned
from bsdemo.store import RunStore
from tests.timeouts import scaled, wait_for

DEVICE = {"type": "cpu", "name": "Test CPU"}


def record(store: RunStore, cfg: RunConfig, loss: float = 1.0) -> int:
    return store.put(
        vars(cfg),
        DEVICE,
        {"memory_source": "accounted"},
        {"step": [1, 2], "loss": [loss, loss / 2]},
        {"step": [2], "test_loss": [0.5]},
        {"kind": "end", "status": "completed", "message": "ok", "summary": {}},
    )


def test_put_then_find_by_config_and_device(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    record(store, RunConfig(batch_size=64))
    hit = store.find(vars(RunConfig(batch_size=64, time_limit_s=600.0)), DEVICE)  # cap ignored
    assert hit is not None and hit.steps["loss"] == [1.0, 0.5] and hit.end["status"] == "completed"
    assert store.find(vars(RunConfig(batch_size=32)), DEVICE) is None
    assert store.find(vars(RunConfig(batch_size=64)), {"type": "cuda", "name": "H200"}) is None
    assert store.db_mode() == "wal"


def test_changed_code_is_a_miss(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    record(store, RunConfig())
    store.version = "0.1.0+different"
    assert store.find(vars(RunConfig()), DEVICE) is None


def test_newest_wins_and_survives_a_restart(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    record(store, RunConfig(), loss=3.0)
    time.sleep(0.01)
    record(store, RunConfig(), loss=2.0)
    store.close()
    again = RunStore(tmp_path / "runs.sqlite3")
    assert again.find(vars(RunConfig()), DEVICE).steps["loss"][0] == 2.0
    assert again.count() == 2


def test_a_corrupt_file_is_moved_aside_and_recreated(tmp_path):
    path = tmp_path / "runs.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    store = RunStore(path)  # no exception, no warning: a notice for the page to show
    assert store.count() == 0
    assert "damaged" in store.notice and "no stored run could be recovered" in store.notice
    assert any(p.name.startswith("runs.sqlite3.damaged-") for p in tmp_path.iterdir())
    record(store, RunConfig())
    assert store.count() == 1
    assert RunStore(path).notice is None  # the fresh file is healthy


def _damage_middle_pages(path, pages: int = 3) -> None:
    """Overwrite a few pages in the middle of the file with garbage (a torn disk write)."""
    page = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    middle = (len(data) // page) // 2
    for i in range(middle, middle + pages):
        data[i * page : (i + 1) * page] = bytes([0xA5]) * page
    path.write_bytes(bytes(data))


def test_a_partly_damaged_store_is_noticed_at_open_and_salvaged(tmp_path):
    path = tmp_path / "runs.sqlite3"
    store = RunStore(path)
    for seed in range(300):  # big rows: the table spans many pages
        store.put(
            vars(RunConfig(seed=seed)),
            DEVICE,
            {"memory_source": "accounted"},
            {"step": list(range(400)), "loss": [seed / 7] * 400},
            {"step": [400]},
            {"kind": "end", "status": "completed", "message": "ok", "summary": {}},
        )
    store.close()
    for suffix in ("-wal", "-shm"):  # checkpointed at close: the damage is in the main file
        assert not (tmp_path / f"runs.sqlite3{suffix}").exists()
    _damage_middle_pages(path)
    reopened = RunStore(path)  # quick_check at open finds it: no error later, at a lookup
    assert reopened.notice is not None and "damaged" in reopened.notice
    kept = reopened.count()
    assert 0 < kept < 300 and f"{kept} stored run(s) were recovered" in reopened.notice
    found = [reopened.find(vars(RunConfig(seed=s)), DEVICE) for s in range(300)]
    assert sum(f is not None for f in found) == kept  # every recovered run is served whole
    assert all(f.steps["loss"] == [f.config["seed"] / 7] * 400 for f in found if f)
    assert reopened.db_mode() == "wal"


def test_an_unusable_folder_raises_for_the_caller_to_turn_off_the_store(tmp_path):
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data folder should be")
    with pytest.raises(OSError):
        RunStore(blocker / "runs.sqlite3")


def _write_many(path: str, offset: int) -> None:
    store = RunStore(path)
    for i in range(25):
        record(store, RunConfig(seed=offset + i))


def test_concurrent_writers_lose_nothing(tmp_path):
    path = str(tmp_path / "runs.sqlite3")
    RunStore(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(path, 100 * k)) for k in range(3)]
    for p in procs:
        start_spawned(p)
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert RunStore(path).count() == 75


def test_a_missing_folder_is_created(tmp_path):
    store = RunStore(tmp_path / "deep" / "er" / "runs.sqlite3")
    assert store.count() == 0 and sqlite3.connect(store.path).execute("select 1").fetchone()


def test_warm_precomputes_what_the_scheduler_then_serves(tmp_path):
    import subprocess
    import sys

    from bsdemo.scheduler import Scheduler

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsdemo",
            "warm",
            "--preset",
            "digits-mlp",
            "--batch-sizes",
            "64",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert out.returncode == 0, out.stderr
    assert "1 runs" in out.stdout
    sched = Scheduler(workers=1, store=RunStore(tmp_path / "runs.sqlite3"))
    try:
        deadline = time.monotonic() + scaled(60)
        while sched.device_info is None and time.monotonic() < deadline:
            time.sleep(0.05)
        snap = sched.snapshot(sched.submit(RunConfig(batch_size=64), owner="teacher"))
        assert snap.stored_at is not None and snap.status == "completed"
    finally:
        sched.close()


def _filled(path, runs: int = 300) -> bytes:
    """A healthy store of `runs` big runs, closed (checkpointed); returns its bytes."""
    store = RunStore(path)
    for seed in range(runs):
        store.put(
            vars(RunConfig(seed=seed)),
            DEVICE,
            {"memory_source": "accounted"},
            {"step": list(range(400)), "loss": [seed / 7] * 400},
            {"step": [400]},
            {"kind": "end", "status": "completed", "message": "ok", "summary": {}},
        )
    store.close()
    return path.read_bytes()


def test_a_held_lock_makes_the_store_unavailable_never_damaged(tmp_path):
    path = tmp_path / "runs.sqlite3"
    _filled(path, 20)
    holder = sqlite3.connect(path)
    holder.execute("PRAGMA journal_mode=DELETE")  # out of WAL: its exclusive lock stops readers
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        store = RunStore(path)
        assert time.monotonic() - started < scaled(10)  # a bounded wait, not a salvage
        assert not store.available and "off for now" in store.notice and "locked" in store.notice
        assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.sqlite3"]  # left in place
        from bsdemo.store import StoreUnavailable

        with pytest.raises(StoreUnavailable):
            store.find(vars(RunConfig(seed=1)), DEVICE)
    finally:
        holder.rollback()
        holder.close()
    store._retry_at = 0  # the retry is due (RETRY_S later, in the server)
    assert store.count() == 20 and store.available and store.notice is None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="mounting needs root")
def test_a_full_disk_makes_the_store_unavailable_and_loses_no_run(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
    try:
        path = disk / "runs.sqlite3"
        _filled(path, 60)
        (disk / "filler").write_bytes(b"")
        with open(disk / "filler", "wb") as f:  # fill the filesystem to its last byte
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
        store = RunStore(path)
        if store.available:  # opened without writing: the first write hits the full disk
            with pytest.raises(sqlite3.Error):
                record(store, RunConfig(seed=999))
        else:
            assert "off for now" in store.notice
        assert not any("damaged" in p.name for p in disk.iterdir())
        (disk / "filler").unlink()
        store.close()
        assert RunStore(path).count() == 60  # every stored run is still there
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_truncated_store_keeps_the_runs_on_its_surviving_pages(tmp_path):
    path = tmp_path / "runs.sqlite3"
    good = _filled(path)
    path.write_bytes(good[: len(good) // 2])
    store = RunStore(path)
    assert "damaged" in store.notice
    kept = store.count()
    assert 100 < kept < 300, kept  # about half the rows were on the first half's pages
    found = [store.find(vars(RunConfig(seed=s)), DEVICE) for s in range(300)]
    assert all(f.steps["loss"] == [f.config["seed"] / 7] * 400 for f in found if f)


def test_a_store_with_an_overwritten_header_keeps_every_run(tmp_path):
    path = tmp_path / "runs.sqlite3"
    good = _filled(path)
    path.write_bytes(b"\xff" * 104 + good[104:])
    store = RunStore(path)
    assert "file is not a database" in store.notice and store.count() == 300
    assert "300 stored run(s) were recovered" in store.notice


def test_a_locked_store_never_holds_the_schedulers_lock(tmp_path):
    """A finished run is written on the store's own thread: with the store locked, the scheduler
    keeps answering (pages poll it) while the write waits its bounded turn."""
    from bsdemo.scheduler import Scheduler

    path = tmp_path / "runs.sqlite3"
    sched = Scheduler(workers=1, store=RunStore(path))
    holder = sqlite3.connect(path, timeout=0)
    try:
        wait_for(lambda: sched.workers_ready(), timeout=60)
        holder.execute("BEGIN EXCLUSIVE")
        job = sched.submit(RunConfig(epochs=None, max_steps=3), owner="a", fresh=True)
        snap = sched.wait(job, timeout=scaled(60))
        assert snap.status == "completed"
        started = time.monotonic()
        for _ in range(20):
            sched.snapshot(job)
            sched.load()
        assert time.monotonic() - started < scaled(1.0)
    finally:
        holder.rollback()
        holder.close()
        sched.close()


def test_a_garbled_header_asks_for_no_huge_padding(tmp_path):
    path = tmp_path / "runs.sqlite3"
    path.write_bytes(b"SQLite format 3\0" + b"\xa5" * 8000)  # its page count: terabytes
    store = RunStore(path)
    assert store.available and "damaged" in store.notice and store.count() == 0
