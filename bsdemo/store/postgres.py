"""The shared run store: finished runs in PostgreSQL, for a course whose web replicas must all
serve the runs any one of them kept (BSDEMO_DATABASE_URL; the driver is psycopg 3, installed
with `pip install 'bsdemo[cluster]'` and imported only here, only when such a store is opened).

Same schema and migrations as the SQLite store (bsdemo.store.schema), same answers, same rule
for trouble: a server that cannot be reached, refuses the login or times out turns stored
results off (`notice` says why, with any password masked) and is tried again at the next use
after RETRY_S; the lab keeps training. A connection lost while the store was in use (a restarted
server) is replaced once at once before the store calls itself unavailable. A server that stops
answering altogether (frozen, or a network that drops packets: its own statement timeout never
fires) is cut off from this side: every call has a deadline (CALL_S; a page's lookup LOOKUP_S)
after which its socket is shut and the store turns unavailable. Damage is the
server's business (it has its own recovery): this store never moves or rewrites anything.
Each process keeps one connection (thread-safe behind a lock); PostgreSQL orders the writes of
many processes, so replicas writing at once lose nothing.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from typing import Any

from bsdemo.store.common import (
    BUSY_S,
    CALL_S,
    READ_COLUMNS,
    RETRY_S,
    WRITE_COLUMNS,
    Reopening,
    StoredRun,
    StoreUnavailable,
    code_version,
    redact,
    run_key,
    run_row,
)
from bsdemo.store.schema import SchemaTooNew, migrate
from bsdemo.units import setting

log = logging.getLogger(__name__)
CONNECT_S = 5  # the longest opening a connection may take (libpq counts whole seconds, min 2)
STATEMENT_S = 10.0  # the longest any statement may run (a migration included)


class PostgresStore(Reopening):
    backend = "postgres"

    def __init__(self, url: str):
        """Open the store at url (postgresql://user[:password]@host[:port]/database). Never raises
        for a server in trouble: the store opens unavailable and says why in `notice`."""
        self.url = url
        self.where = redact(url)
        self.host = socket.gethostname()
        self.version = code_version()
        self._lock = threading.Lock()
        self.notice: str | None = None
        self.problem: str | None = None  # why it is unavailable, in a phrase (the notice's core)
        self._db: Any = None
        self._retry_at = 0.0
        with self._lock:
            self._open()

    def _open(self) -> None:
        """Connect and migrate; on any trouble, stay unavailable until RETRY_S. Lock held."""
        try:
            import psycopg
        except ImportError as exc:
            self._unavailable(
                exc, "the PostgreSQL driver is not installed here (pip install 'bsdemo[cluster]')"
            )
            return
        try:
            db = psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_S,
                application_name="bsdemo",
                options=f"-c statement_timeout={int(STATEMENT_S * 1000)} "
                f"-c lock_timeout={int(BUSY_S * 1000)}",
            )
        except psycopg.Error as exc:
            self._unavailable(exc, "it could not be reached")
            return
        try:
            migrate(db, "postgres")
        except (psycopg.Error, SchemaTooNew) as exc:
            db.close()
            self._unavailable(exc, "it could not be prepared")
            return
        self._db, self.notice, self.problem = db, None, None

    def _unavailable(self, exc: BaseException, what: str) -> None:
        self._db, self._retry_at = None, time.monotonic() + RETRY_S
        detail = redact(re.sub(r"\s+", " ", str(exc)).strip())
        self.problem = f"{what} ({type(exc).__name__}: {detail[:160]})"
        self.notice = (
            f"Stored results are off for now: the run store at {self.where} "
            f"could not be used — {self.problem}. It is tried again in "
            f"{setting(RETRY_S)} s; runs still train."
        )
        log.warning("run store %s unavailable: %s", self.where, detail)

    def _run(self, work, wait: float = CALL_S):
        """work(connection)'s result, under the lock (waited for at most `wait` s: StoreBusy).
        A connection found lost (the server restarted or went away) is reopened once at once;
        when that fails the store is unavailable and StoreUnavailable is raised. A call still
        waiting for the server after `wait` seconds has its socket shut (Deadline): the store is
        then unavailable until its retry. Other errors (a statement timed out) are the
        caller's, as with SQLite."""
        import psycopg

        with self._held(wait):
            for attempt in (1, 2):
                db = self._connection()
                deadline = Deadline(db, wait)
                try:
                    with deadline:
                        return work(db)
                except psycopg.OperationalError as exc:
                    if not (db.broken or db.closed):
                        raise
                    db.close()
                    self._db = None
                    if deadline.passed:
                        self._unavailable(exc, f"it did not answer within {setting(wait)} s")
                        raise StoreUnavailable(self.notice) from exc
                    if attempt == 2:
                        self._unavailable(exc, "the connection was lost")
                        raise StoreUnavailable(self.notice) from exc
                    self._retry_at = 0.0  # reconnect now, once
        raise AssertionError("unreachable")

    def put(
        self,
        config: dict,
        device: dict,
        start: dict | None,
        steps: dict,
        evals: dict,
        end: dict,
        created: float | None = None,
    ) -> int:
        """Keep a finished run (measured at `created`, default now); its row id."""
        row = run_row(
            config, device, start, steps, evals, end, self.version, created or time.time(), self.host
        )
        sql = f"INSERT INTO runs ({WRITE_COLUMNS}) VALUES ({', '.join(['%s'] * 9)}) RETURNING id"
        return self._run(lambda db: db.execute(sql, row).fetchone()[0])

    def transact(self, work, wait: float = CALL_S):
        """work(connection)'s result, in one transaction (see _run for the deadlines)."""

        def inside(db):
            with db.transaction():
                return work(db)

        return self._run(inside, wait)

    def find(self, config: dict, device: dict, wait: float = CALL_S) -> StoredRun | None:
        """The newest stored run with this config, code version and device, within `wait`
        seconds (see _run)."""
        key = run_key(config, device, self.version)
        row = self._run(
            lambda db: db.execute(
                f"SELECT {READ_COLUMNS} FROM runs WHERE key = %s ORDER BY created DESC LIMIT 1", (key,)
            ).fetchone(),
            wait,
        )
        return None if row is None else StoredRun.from_row(row)

    def count(self) -> int:
        return self._run(lambda db: db.execute("SELECT count(*) FROM runs").fetchone()[0])


class Deadline:
    """Shuts a connection's socket once `seconds` have passed inside the `with` block: libpq's
    blocked read then returns, and the call fails as a lost connection (`passed` says it was
    this). The client's own clock: a frozen server answers no cancel request either."""

    def __init__(self, db, seconds: float):
        self.passed = False
        self._db = db
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()

    def _cut(self) -> None:
        self.passed = True
        try:
            with socket.socket(fileno=os.dup(self._db.pgconn.socket)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except Exception:  # noqa: BLE001 - already closed: nothing left to cut
            pass
