"""What every run store shares: how a run is keyed, what a stored run holds, how long a store
waits, and the error that means "not just now". Pure Python: no torch, no database driver."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bsdemo
from bsdemo.units import setting

PACKAGE_DIR = Path(__file__).resolve().parent.parent
BUSY_S = 2.0  # the longest any statement waits for another connection's lock
RETRY_S = 30.0  # an unavailable store is tried again at the next use after this long
# the longest a caller waits for the store, measured on the caller's side (a server that stops
# answering, SIGSTOP say, never enforces its own statement timeout): a write, and a page's
# lookup, which a Run press waits on (a lookup that takes longer is skipped: the run trains)
CALL_S = 12.0
LOOKUP_S = 2.0
KEY_IGNORES = ("time_limit_s", "device")  # a cap that was not hit; the device is keyed by name
# the columns a stored run is read back from, in StoredRun's order after its id
READ_COLUMNS = "id, created, device, config, start, steps, evals, end_record, host"


def code_version() -> str:
    """The package version plus a hash of the engine's source (and of the memory model it shares
    its constants with): changed code, new results."""
    digest = hashlib.sha256()
    engine = PACKAGE_DIR / "engine"
    for path in [*sorted(engine.glob("*.py")), PACKAGE_DIR / "footprint.py"]:
        digest.update(path.read_bytes())
    return f"{bsdemo.__version__}+{digest.hexdigest()[:12]}"


def run_key(config: dict[str, Any], device: dict[str, Any], version: str) -> str:
    settings = {k: v for k, v in config.items() if k not in KEY_IGNORES}
    blob = json.dumps(
        {"config": settings, "device": [device.get("type"), device.get("name")], "code": version},
        sort_keys=True,
    )
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
    host: str | None = None  # the machine that measured it (None: stored before hosts were kept)

    @classmethod
    def from_row(cls, row) -> StoredRun:
        """From a row of READ_COLUMNS (JSON columns as text)."""
        return cls(row[0], row[1], *(json.loads(v) if v else None for v in row[2:8]), row[8])


def run_row(
    config: dict,
    device: dict,
    start: dict | None,
    steps: dict,
    evals: dict,
    end: dict,
    version: str,
    created: float,
    host: str,
) -> tuple:
    """The values of a new row, in WRITE_COLUMNS' order."""
    return (
        run_key(config, device, version),
        created,
        json.dumps(device),
        json.dumps(config),
        json.dumps(start),
        json.dumps(steps),
        json.dumps(evals),
        json.dumps(end),
        host,
    )


WRITE_COLUMNS = "key, created, device, config, start, steps, evals, end_record, host"


class StoreUnavailable(RuntimeError):
    """The store cannot be used just now (locked, full, unreachable): nothing is lost."""


class StoreBusy(StoreUnavailable):
    """Another call of this process to the store has not returned in time: this one gave up
    waiting for it (the store itself is not marked unavailable)."""


class Reopening:
    """What both stores do alike with their one connection: None while the store is unavailable,
    opened again (`_open`, the store's own) at the next use once RETRY_S has passed."""

    _db: Any
    _retry_at: float
    _lock: Any
    notice: str | None

    @property
    def available(self) -> bool:
        return self._db is not None

    def _open(self) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def _held(self, wait: float):
        """The store's lock, waited for at most `wait` seconds (StoreBusy after that): a call
        stuck on a dead server never holds up the next caller longer than its own wait."""
        if not self._lock.acquire(timeout=wait):
            raise StoreBusy(
                f"the run store is busy: another call to it has not returned within {setting(wait)} s"
            )
        try:
            yield
        finally:
            self._lock.release()

    def _connection(self):
        """The open connection, reopening an unavailable store when its retry is due; raises
        StoreUnavailable otherwise. Lock held."""
        if self._db is None and time.monotonic() >= self._retry_at:
            self._open()
        if self._db is None:
            raise StoreUnavailable(self.notice or "the run store is unavailable")
        return self._db

    def close(self) -> None:
        """Close the connection; one held by a call that never returned is left to that call
        (closing must not hang a shutdown on a dead server)."""
        self._retry_at = float("inf")
        if not self._lock.acquire(timeout=CALL_S):
            return
        try:
            if self._db is not None:
                self._db.close()
                self._db = None
        finally:
            self._lock.release()


_PASSWORD = re.compile(r"(?<=:)[^:@/]*(?=@)|(?i:password\s*=\s*)\S+")


def redact(where: str) -> str:
    """A database URL or connection string with any password replaced by "***" (for notices and
    logs: a sidebar must never show a credential)."""
    return _PASSWORD.sub(
        lambda m: "password=***" if m.group(0).lower().startswith("password") else "***", where
    )
