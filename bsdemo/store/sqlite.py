"""The embedded run store: finished runs in one SQLite file (WAL mode) in the data folder.

A store in trouble degrades visibly and never breaks a page, and never loses a stored run:
- *Unavailable* — locked by another connection, a full disk, an I/O error, a file it may not
  open: stored results are off (`notice` says why), the file is left exactly where it is, and
  opening is tried again at the next use after RETRY_S.
- *Damaged* — only when SQLite's integrity check fails or the file is not a database: the file
  is moved aside and every run that can still be read from it is copied into a fresh file
  (`salvage`: it mends a truncated file's missing tail and an overwritten header on a copy
  first, then reads row by row, within SALVAGE_S), and `notice` says what was recovered.
Every connection waits at most BUSY_S for a lock, so a locked store costs a write a bounded
wait (and the scheduler writes outside its own lock). Errors after opening are the
scheduler's to turn into "running it fresh".
Pure Python (sqlite3): no torch.
"""

from __future__ import annotations

import json
import logging
import socket
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

from bsdemo.store.common import (
    BUSY_S,
    CALL_S,
    READ_COLUMNS,
    RETRY_S,
    WRITE_COLUMNS,
    Reopening,
    StoredRun,
    code_version,
    run_key,
    run_row,
)
from bsdemo.store.schema import SchemaTooNew, migrate
from bsdemo.units import setting

log = logging.getLogger(__name__)
COLUMNS = "id, " + WRITE_COLUMNS  # what salvage copies
SALVAGE_PROBES = 200_000  # row ids tried one by one past a damaged stretch of the table
SALVAGE_S = 60.0  # salvage gives up probing (keeping what it has) after this long
# SQLite's result codes that mean the file itself is damaged; any other error is trouble
DAMAGE_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def is_damage(exc: BaseException) -> bool:
    """Whether an sqlite3 error says the file is damaged (rather than busy, full or unreadable)."""
    return getattr(exc, "sqlite_errorname", None) in DAMAGE_CODES or (
        isinstance(exc, sqlite3.DatabaseError)
        and not isinstance(exc, sqlite3.OperationalError)
        and getattr(exc, "sqlite_errorname", None) is None
    )


class RunStore(Reopening):
    """Thread-safe; each process opens its own connection (SQLite handles concurrent writers)."""

    backend = "sqlite"

    def __init__(self, path: str | Path):
        """Open (or create) the store; raises OSError only when the folder itself cannot hold a
        database (the caller then runs without a store). A store in trouble opens unavailable
        (`available` False, `notice` says why) and is tried again later."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.where = str(self.path)
        self.host = socket.gethostname()
        self.version = code_version()
        self._lock = threading.Lock()
        self.notice: str | None = None  # what opening it found and did, for the page to say
        self.problem: str | None = None  # why it is unavailable, in a phrase (the notice's core)
        self._db: sqlite3.Connection | None = None
        self._retry_at = 0.0
        with self._lock:
            self._open()

    def _open(self) -> None:
        """Connect and check; on damage, salvage; on trouble, stay unavailable. Lock held."""
        db = None
        try:
            db = self._connect()
            problem = db.execute("PRAGMA quick_check").fetchone()[0]
            if problem == "ok":
                db.execute("SELECT count(*) FROM runs").fetchone()
                self._db, self.notice, self.problem = db, None, None
                return
        except (sqlite3.Error, SchemaTooNew) as exc:
            if db is not None:
                db.close()
                db = None
            if isinstance(exc, SchemaTooNew) or not is_damage(exc):
                self._unavailable(exc)
                return
            problem = str(exc)
        if db is not None:
            db.close()
        self._salvage_aside(problem)

    def _unavailable(self, exc: BaseException) -> None:
        self._db, self._retry_at = None, time.monotonic() + RETRY_S
        self.problem = f"{type(exc).__name__}: {str(exc)[:120]}"
        self.notice = (
            f"Stored results are off for now: the run store could not be used "
            f"({self.problem}). Its file is left as it is and "
            f"is tried again in {setting(RETRY_S)} s; runs still train."
        )
        log.warning("run store %s unavailable: %s", self.path, exc)

    def _salvage_aside(self, problem: str) -> None:
        aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                p.rename(Path(str(aside) + suffix))
        try:
            db = self._connect()
        except sqlite3.Error as exc:
            self._unavailable(exc)
            return
        recovered = salvage(aside, db)
        self._db = db
        self.notice = f"The run store was damaged ({problem[:80]}) and was moved aside to {aside.name}; " + (
            f"{recovered} stored run(s) were recovered from it."
            if recovered
            else "no stored run could be recovered: stored results start afresh."
        )
        log.warning("run store %s: %s", self.path, self.notice)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=BUSY_S)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            migrate(db, "sqlite")
        except (sqlite3.Error, SchemaTooNew):
            db.close()
            raise
        return db

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
        with self._held(CALL_S):
            db = self._connection()
            with db:
                cur = db.execute(
                    f"INSERT INTO runs ({WRITE_COLUMNS}) VALUES ({', '.join('?' * 9)})",
                    run_row(
                        config,
                        device,
                        start,
                        steps,
                        evals,
                        end,
                        self.version,
                        created or time.time(),
                        self.host,
                    ),
                )
            return cur.lastrowid

    def find(self, config: dict, device: dict, wait: float = CALL_S) -> StoredRun | None:
        """The newest stored run with this config, code version and device; StoreBusy when
        another call holds the store longer than `wait` seconds."""
        with self._held(wait):
            row = (
                self._connection()
                .execute(
                    f"SELECT {READ_COLUMNS} FROM runs WHERE key = ? ORDER BY created DESC LIMIT 1",
                    (run_key(config, device, self.version),),
                )
                .fetchone()
            )
        return None if row is None else StoredRun.from_row(row)

    def transact(self, work, wait: float = CALL_S):
        """work(connection)'s result, in one transaction (committed, or rolled back when work
        raises); StoreBusy when another call holds the store longer than `wait` seconds."""
        with self._held(wait):
            db = self._connection()
            with db:
                return work(db)

    def db_mode(self) -> str:
        with self._held(CALL_S):
            return self._connection().execute("PRAGMA journal_mode").fetchone()[0]

    def count(self) -> int:
        with self._held(CALL_S):
            return self._connection().execute("SELECT count(*) FROM runs").fetchone()[0]


def salvage(damaged: Path, into: sqlite3.Connection, seconds: float = SALVAGE_S) -> int:
    """Copy every run that can still be read from a damaged store file into `into`; returns how
    many. Works on a mended copy (mend_copy: an overwritten header rewritten, a truncated tail
    padded back to the pages the header counts), never locks the damaged file, reads in id order
    until an error, then probes the ids past it one by one (a damaged page of the table loses the
    rows on it, not the rest) until `seconds` have passed."""
    deadline = time.monotonic() + seconds
    with tempfile.TemporaryDirectory(prefix="bsdemo-salvage-") as folder:
        copy = Path(folder) / "copy.sqlite3"
        try:
            mend_copy(damaged, copy)
            src = sqlite3.connect(f"file:{copy}?mode=ro&immutable=1", uri=True, timeout=0)
        except (OSError, MemoryError, sqlite3.Error):
            return 0
        try:
            return _insert(into, _readable_rows(src, deadline))
        finally:
            src.close()


def _readable_rows(src: sqlite3.Connection, deadline: float) -> dict[int, tuple]:
    rows: dict[int, tuple] = {}
    columns = COLUMNS
    try:
        src.execute("SELECT host FROM runs LIMIT 0")
    except sqlite3.DatabaseError:  # a store from before hosts were kept
        columns = COLUMNS.replace("host", "NULL")
    try:
        for row in src.execute(f"SELECT {columns} FROM runs ORDER BY id"):
            rows[row[0]] = row
        return rows
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
        if rowid % 256 == 0 and time.monotonic() > deadline:
            break
        try:
            row = src.execute(f"SELECT {columns} FROM runs WHERE id = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None:
            rows[rowid] = row
    return rows


HEADER = b"SQLite format 3\x00"
PAGE_SIZES = tuple(2**k for k in range(9, 17))
MAX_PAD_FACTOR = 16  # a truncated file is padded to at most this many times its size


def mend_copy(damaged: Path, copy: Path) -> None:
    """Copy a damaged store file, mended where a store's damage is mendable:
    - an overwritten header (not "SQLite format 3"): a fresh store's header, and the start of
      its first page's b-tree header, in its place, with the page size that divides the file
      and the page count the file holds (the schema's cells, further on, are usually intact);
    - a truncated file: zero pages appended up to the page count its header gives (SQLite
      then reads the rows on the pages that are there instead of refusing the whole file)."""
    data = bytearray(damaged.read_bytes())
    if not data.startswith(HEADER) and len(data) > 104:
        size = next((p for p in (4096, *PAGE_SIZES) if len(data) % p == 0), 4096)
        data[:104] = _fresh_header(size)
        data[28:32] = (len(data) // size).to_bytes(4, "big")  # pages in the file
    if data.startswith(HEADER) and len(data) >= 100:
        size = int.from_bytes(data[16:18], "big")
        size = 65536 if size == 1 else size
        pages = int.from_bytes(data[28:32], "big")
        want = pages * size
        # only a page size SQLite can have, and a tail the file could have lost (a garbled
        # header's "page count" would ask for terabytes)
        if size in PAGE_SIZES and len(data) < want <= min(MAX_PAD_FACTOR * len(data), 2**30):
            data += bytes(want - len(data))
    copy.write_bytes(bytes(data))


def _fresh_header(page_size: int) -> bytes:
    """The first 108 bytes of a new store with this page size: the file header (journal, page
    size, schema format) and the first page's b-tree header (a leaf table page with no free
    block; its cell count's high byte — the low one, byte 104 onwards, stays the file's own)."""
    with tempfile.TemporaryDirectory(prefix="bsdemo-header-") as folder:
        path = Path(folder) / "fresh.sqlite3"
        db = sqlite3.connect(path)
        db.execute(f"PRAGMA page_size={page_size}")
        migrate(db, "sqlite")
        db.close()
        head = bytearray(path.read_bytes()[:104])
    head[100:104] = bytes([0x0D, 0, 0, 0])
    return bytes(head)


def _insert(into: sqlite3.Connection, rows: dict[int, tuple]) -> int:
    """Insert rows whose JSON still parses; returns how many went in."""
    good = []
    for row in rows.values():
        try:
            for blob in row[3:9]:
                if blob is not None:
                    json.loads(blob)
        except (TypeError, ValueError):
            continue
        good.append(row)
    with into:
        into.executemany(f"INSERT OR IGNORE INTO runs ({COLUMNS}) VALUES ({', '.join('?' * 10)})", good)
    return len(good)
