"""The run store: finished runs in SQLite (WAL), so a repeated run is served at once.

A stored run is found by its key: the config, the code version (a hash of the engine's source)
and the device (kind and name). Pages label what they show from here "stored result, measured
on <device> at <time>" and offer a fresh run.

A damaged store degrades visibly and never breaks a page: at open, `PRAGMA quick_check` looks
at the whole file; a file that fails it (or cannot be read at all) is moved aside, every run that
can still be read from it is copied into a fresh file, and `notice` says what happened (the
sidebar shows it). Errors after that are the scheduler's to turn into "running it fresh".
Pure Python (sqlite3): no torch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bsdemo

log = logging.getLogger(__name__)
ENGINE_DIR = Path(__file__).resolve().parent / "engine"
COLUMNS = "id, key, created, device, config, start, steps, evals, end_record"
SALVAGE_PROBES = 200_000  # row ids tried one by one past a damaged stretch of the table
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    created REAL NOT NULL,
    device TEXT NOT NULL,
    config TEXT NOT NULL,
    start TEXT,
    steps TEXT NOT NULL,
    evals TEXT NOT NULL,
    end_record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_key ON runs (key, created);
"""


def code_version() -> str:
    """The package version plus a hash of the engine's source (and of the memory model it shares
    its constants with): changed code, new results."""
    digest = hashlib.sha256()
    for path in [*sorted(ENGINE_DIR.glob("*.py")), ENGINE_DIR.parent / "footprint.py"]:
        digest.update(path.read_bytes())
    return f"{bsdemo.__version__}+{digest.hexdigest()[:12]}"


KEY_IGNORES = ("time_limit_s", "device")  # a cap that was not hit; the device is keyed by name


def run_key(config: dict[str, Any], device: dict[str, Any], version: str) -> str:
    settings = {k: v for k, v in config.items() if k not in KEY_IGNORES}
    blob = json.dumps({"config": settings, "device": [device.get("type"), device.get("name")],
                       "code": version}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class StoredRun:
    id: int
    created: float  # unix time it was measured
    device: dict[str, Any]
    config: dict[str, Any]
    start: dict[str, Any] | None
    steps: dict[str, list]
    evals: dict[str, list]
    end: dict[str, Any]


class RunStore:
    """Thread-safe; each process opens its own connection (SQLite handles concurrent writers)."""

    def __init__(self, path: str | Path):
        """Open (or create) the store; raises OSError or sqlite3.Error only when the folder
        itself cannot hold a database (the caller then runs without a store)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.version = code_version()
        self._lock = threading.Lock()
        self.notice: str | None = None  # what opening it found and did, for the page to say
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            db = self._connect()
            problem = db.execute("PRAGMA quick_check").fetchone()[0]
            if problem == "ok":
                db.execute("SELECT count(*) FROM runs").fetchone()
                return db
            db.close()
        except sqlite3.DatabaseError as exc:
            problem = str(exc)
        aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                p.rename(Path(str(aside) + suffix))
        db = self._connect()
        recovered = _salvage(aside, db)
        self.notice = (f"The run store was damaged ({problem[:80]}) and was moved aside to "
                       f"{aside.name}; " + (f"{recovered} stored run(s) were recovered from it."
                                            if recovered else "no stored run could be recovered: "
                                            "stored results start afresh."))
        log.warning("run store %s: %s", self.path, self.notice)
        return db

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=10)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(SCHEMA)
        return db

    def put(self, config: dict, device: dict, start: dict | None, steps: dict, evals: dict,
            end: dict) -> int:
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO runs (key, created, device, config, start, steps, evals, end_record)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (run_key(config, device, self.version), time.time(), json.dumps(device),
                 json.dumps(config), json.dumps(start), json.dumps(steps), json.dumps(evals),
                 json.dumps(end)))
            return cur.lastrowid

    def find(self, config: dict, device: dict) -> StoredRun | None:
        """The newest stored run with this config, code version and device."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, created, device, config, start, steps, evals, end_record FROM runs "
                "WHERE key = ? ORDER BY created DESC LIMIT 1",
                (run_key(config, device, self.version),)).fetchone()
        if row is None:
            return None
        return StoredRun(row[0], row[1], *(json.loads(v) if v else None for v in row[2:]))

    def db_mode(self) -> str:
        with self._lock:
            return self._db.execute("PRAGMA journal_mode").fetchone()[0]

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM runs").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _salvage(damaged: Path, into: sqlite3.Connection) -> int:
    """Copy every run that can still be read from a damaged store file into `into`; returns how
    many. Reads in id order until an error, then probes the ids past it one by one (a damaged
    page of the table loses the rows on it, not the rest)."""
    try:
        src = sqlite3.connect(f"file:{damaged}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    rows: dict[int, tuple] = {}
    try:
        try:
            for row in src.execute(f"SELECT {COLUMNS} FROM runs ORDER BY id"):
                rows[row[0]] = row
            return _insert(into, rows)
        except sqlite3.DatabaseError:
            pass
        try:
            top = src.execute("SELECT seq FROM sqlite_sequence WHERE name = 'runs'").fetchone()
            top = top[0] if top else max(rows, default=0) + SALVAGE_PROBES
        except sqlite3.DatabaseError:
            top = max(rows, default=0) + SALVAGE_PROBES
        for rowid in range(1, min(top, max(rows, default=0) + SALVAGE_PROBES) + 1):
            if rowid in rows:
                continue
            try:
                row = src.execute(f"SELECT {COLUMNS} FROM runs WHERE id = ?", (rowid,)).fetchone()
            except sqlite3.DatabaseError:
                continue
            if row is not None:
                rows[rowid] = row
        return _insert(into, rows)
    finally:
        src.close()


def _insert(into: sqlite3.Connection, rows: dict[int, tuple]) -> int:
    """Insert rows whose JSON still parses; returns how many went in."""
    good = []
    for row in rows.values():
        try:
            for blob in row[3:]:
                if blob is not None:
                    json.loads(blob)
        except (TypeError, ValueError):
            continue
        good.append(row)
    with into:
        into.executemany(f"INSERT OR IGNORE INTO runs ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         good)
    return len(good)
