"""The run store: finished runs in SQLite (WAL), so a repeated run is served at once.

A stored run is found by its key: the config, the code version (a hash of the engine's source)
and the device (kind and name). Pages label what they show from here "stored result, measured
on <device> at <time>" and offer a fresh run. A corrupt or unreadable database file is moved
aside and recreated with a warning — never a crash. Pure Python (sqlite3): no torch.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bsdemo

ENGINE_DIR = Path(__file__).resolve().parent / "engine"
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
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.version = code_version()
        self._lock = threading.Lock()
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            db = self._connect()
            db.execute("SELECT count(*) FROM runs").fetchone()
            return db
        except sqlite3.DatabaseError as exc:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            warnings.warn(f"run store {self.path} was unreadable ({exc}); moved to {aside.name} "
                          "and started afresh", RuntimeWarning, stacklevel=2)
            for suffix in ("", "-wal", "-shm"):
                p = Path(str(self.path) + suffix)
                if p.exists():
                    p.rename(Path(str(aside) + suffix))
            return self._connect()

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
