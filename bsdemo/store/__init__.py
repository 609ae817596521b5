"""The run store: finished runs, so a repeated run is served at once.

A stored run is found by its key: the config, the code version (a hash of the engine's source)
and the device (kind and name). Pages label what they show from here "stored result, measured
on <device> at <time>" and offer a fresh run.

Two backends, one schema (bsdemo.store.schema's migrations) and one interface (put, find,
count, close, available, notice, where):
- SQLite (`RunStore`, bsdemo.store.sqlite): the embedded default, one file in BSDEMO_DATA_DIR;
- PostgreSQL (`PostgresStore`, bsdemo.store.postgres): when BSDEMO_DATABASE_URL is set, one
  store for every replica of a course deployment.
`open_store` picks one from the settings. Pure Python here: no torch, no database driver.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from bsdemo.errors import ConfigError
from bsdemo.store.common import (
    BUSY_S,
    CALL_S,
    LOOKUP_S,
    RETRY_S,
    StoreBusy,
    StoredRun,
    StoreUnavailable,
    code_version,
    redact,
    run_key,
)
from bsdemo.store.sqlite import RunStore, is_damage, salvage

__all__ = [
    "BUSY_S",
    "CALL_S",
    "LOOKUP_S",
    "RETRY_S",
    "DATABASE_URL_ENV",
    "RunStore",
    "Store",
    "StoreBusy",
    "StoredRun",
    "StoreUnavailable",
    "code_version",
    "database_url",
    "is_damage",
    "open_store",
    "redact",
    "run_key",
    "salvage",
]
DATABASE_URL_ENV = "BSDEMO_DATABASE_URL"


class Store(Protocol):
    """What the scheduler, the CLI and the pages use of a run store, whichever backend."""

    backend: str  # "sqlite" or "postgres"
    where: str  # the file, or the database URL with any password masked
    version: str  # the code version runs are keyed by
    notice: str | None  # what the page should say about the store; None when it simply works
    problem: str | None  # why it is unavailable, in a phrase

    @property
    def available(self) -> bool: ...

    def put(
        self,
        config: dict,
        device: dict,
        start: dict | None,
        steps: dict,
        evals: dict,
        end: dict,
        created: float | None = None,
    ) -> int: ...

    def find(self, config: dict, device: dict, wait: float = ...) -> StoredRun | None: ...

    def count(self) -> int: ...

    def transact(self, work, wait: float = ...): ...

    def close(self) -> None: ...


SCHEMES = ("postgresql://", "postgres://")


def database_url(value: str | None) -> str | None:
    """BSDEMO_DATABASE_URL checked: None when unset or blank; a PostgreSQL URL; ConfigError
    otherwise (its message quotes the value with any password masked)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if not value.lower().startswith(SCHEMES):
        raise ConfigError(
            DATABASE_URL_ENV, redact(value), "postgresql://user@host[:port]/database, or unset (SQLite)"
        )
    return value


def open_store(data_dir: str | Path | None, url: str | None = None) -> Store | None:
    """The run store the settings ask for: PostgreSQL at url (checked by database_url) when
    given, else SQLite in data_dir, else None (no store). Raises OSError (or sqlite3.Error)
    only when data_dir cannot hold a database; a database server in trouble opens unavailable
    with a notice instead."""
    if url:
        from bsdemo.store.postgres import PostgresStore  # the driver only when asked for

        return PostgresStore(url)
    if not data_dir:
        return None
    return RunStore(Path(data_dir) / "runs.sqlite3")
