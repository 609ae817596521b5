"""A class's state in the run store: the class, its members, the rounds of each lesson's
question and the members' votes — in the same database as the runs (SQLite in the data folder,
PostgreSQL in a course), never only in one process: any replica serves any member, and a
restart loses no vote.

`ClassStore` applies bsdemo.classroom.rules and keeps what they decide; every call is one short
transaction through the run store's own connection (its deadlines and its reopening included),
so a database in trouble raises `StoreUnavailable` and the page says so. Nothing personal is
kept: a member is a hash of the class and the browser's random id; no name, no address.
Pure Python: no torch, no Streamlit (the database driver comes with the run store).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bsdemo.classroom import rules
from bsdemo.classroom.rules import ClassError
from bsdemo.classroom.sweepstore import INSTRUCTOR, Sweep, SweepStore  # noqa: F401 - re-exported
from bsdemo.classroom.votestore import VoteStore

ATTEMPTS = 8  # fresh codes tried when a new class's code is taken (31^6 codes: never in practice)
NOT_OPEN = "No open class has this code (and password, if it has one): check it with your instructor."


@dataclass(frozen=True)
class ClassInfo:
    code: str
    title: str
    created: float
    ended: float | None
    has_password: bool
    members: int

    @property
    def open(self) -> bool:
        return self.ended is None


class ClassStore(VoteStore, SweepStore):
    """Classes kept in a run store (a bsdemo.store RunStore or PostgresStore); their rounds and
    votes are VoteStore's, their sweeps SweepStore's."""

    def __init__(self, store, clock: Callable[[], float] = time.time):
        self.store = store
        self.clock = clock
        self._mark = "?" if store.backend == "sqlite" else "%s"

    # ----- plumbing -----
    def _do(self, work: Callable[[Callable[..., Any]], Any]) -> Any:
        """work(q) in one transaction; q(sql, params) runs a statement written with "?"."""

        def inside(db):
            def q(sql: str, params: Sequence = ()):
                return db.execute(sql.replace("?", self._mark), tuple(params))

            return work(q)

        return self.store.transact(inside)

    def _class_row(self, q, code: str):
        return q(
            "SELECT code, title, created, ended, password_hash, key_hash, last_active "
            "FROM classes WHERE code = ?",
            (code,),
        ).fetchone()

    def _touch(self, q, code: str) -> None:
        q("UPDATE classes SET last_active = ? WHERE code = ?", (self.clock(), code))

    # ----- the instructor -----
    def start(self, title: str = "", password: str | None = None) -> tuple[str, str]:
        """A new class: (its join code, its instructor key). The key is returned once and only
        its hash is kept."""
        title = rules.check_title(title)
        password = rules.check_password(password)
        key = rules.new_key()
        hashed = rules.password_hash(password) if password else None
        now = self.clock()
        for _ in range(ATTEMPTS):
            code = rules.new_code()

            def insert(q, code=code):
                if self._class_row(q, code) is not None:
                    return False
                q(
                    "INSERT INTO classes (code, title, key_hash, password_hash, created, ended, "
                    "last_active) VALUES (?, ?, ?, ?, ?, NULL, ?)",
                    (code, title, rules.key_hash(key), hashed, now, now),
                )
                return True

            if self._do(insert):
                return code, key
        raise ClassError("No free join code was found; try again.")

    def is_instructor(self, code: str, key: object) -> bool:
        """Whether `key` is the instructor key of the class `code` (constant-time compare)."""
        row = self._do(lambda q: self._class_row(q, code))
        return row is not None and rules.key_matches(key, row[5])

    def _instructing(self, q, code: str, key: object):
        row = self._class_row(q, code)
        if row is None or not rules.key_matches(key, row[5]):
            raise ClassError("Only the class's instructor can do that (their browser holds the class's key).")
        return row

    def end(self, code: str, key: object) -> None:
        """End the class: no more joins or votes; its results stay readable by the instructor."""

        def work(q):
            row = self._instructing(q, code, key)
            if row[3] is None:
                q(
                    "UPDATE classes SET ended = ?, last_active = ? WHERE code = ?",
                    (self.clock(), self.clock(), code),
                )

        self._do(work)

    # ----- members -----
    def info(self, code: str) -> ClassInfo | None:
        """The class `code` (open or ended), or None."""

        def work(q):
            row = self._class_row(q, code)
            if row is None:
                return None
            members = q("SELECT count(*) FROM class_members WHERE code = ?", (code,)).fetchone()[0]
            return ClassInfo(row[0], row[1], row[2], row[3], row[4] is not None, members)

        return self._do(work)

    def join(self, code: str, browser: str, password: object = None) -> str:
        """Make the browser a member of the open class `code`; its member id. One message for a
        code that does not exist, an ended class and a wrong password (a guesser learns
        nothing)."""

        def work(q):
            row = self._class_row(q, code)
            if row is None or row[3] is not None or not rules.password_matches(password, row[4]):
                raise ClassError(NOT_OPEN)
            member = rules.member_id(code, browser)
            q(
                "INSERT INTO class_members (code, member, joined) VALUES (?, ?, ?) "
                "ON CONFLICT (code, member) DO NOTHING",
                (code, member, self.clock()),
            )
            self._touch(q, code)
            return member

        return self._do(work)

    def is_member(self, code: str, member: str) -> bool:
        return (
            self._do(
                lambda q: q(
                    "SELECT 1 FROM class_members WHERE code = ? AND member = ?", (code, member)
                ).fetchone()
            )
            is not None
        )

    # ----- a class-sourced sweep -----
    def export(self, code: str, key: object) -> dict[str, Any]:
        """The class's results for its instructor: the class, and every round's counts (no
        member ids: counts are what the room said)."""

        def work(q):
            row = self._instructing(q, code, key)
            members = q("SELECT count(*) FROM class_members WHERE code = ?", (code,)).fetchone()[0]
            rounds = q(
                "SELECT question, round, opened, revealed, supported FROM class_rounds "
                "WHERE code = ? ORDER BY question, round",
                (code,),
            ).fetchall()
            votes = q(
                "SELECT question, round, choice, count(*) FROM class_votes WHERE code = ? "
                "GROUP BY question, round, choice",
                (code,),
            ).fetchall()
            sweeps = q(
                "SELECT page, sweep, opened, grid, config FROM class_sweeps WHERE "
                "code = ? ORDER BY page, sweep",
                (code,),
            ).fetchall()
            runs = q(
                "SELECT page, sweep, cell, at, report FROM class_results WHERE code = ? "
                "ORDER BY page, sweep, at",
                (code,),
            ).fetchall()
            return {
                "class": {
                    "code": row[0],
                    "title": row[1],
                    "created": row[2],
                    "ended": row[3],
                    "members": members,
                },
                # the runs by cell, no member ids: what the room measured
                "sweeps": [
                    {
                        "page": s[0],
                        "sweep": int(s[1]),
                        "opened": s[2],
                        "grid": json.loads(s[3]),
                        "config": json.loads(s[4]),
                        "runs": [
                            {"cell": int(r[2]), "at": r[3]} | json.loads(r[4])
                            for r in runs
                            if r[0] == s[0] and r[1] == s[1]
                        ],
                    }
                    for s in sweeps
                ],
                "rounds": [
                    {
                        "question": r[0],
                        "round": int(r[1]),
                        "opened": r[2],
                        "revealed": r[3],
                        "supported": r[4],
                        "counts": {int(c): int(n) for qn, rn, c, n in votes if qn == r[0] and rn == r[1]},
                    }
                    for r in rounds
                ],
            }

        return self._do(work)

    def purge(self, days: float) -> int:
        """Delete every class past keeping (rules.expired) with everything it held; how many."""

        def work(q):
            gone = [
                r[0]
                for r in q("SELECT code, created, ended, last_active FROM classes").fetchall()
                if rules.expired(r[1], r[2], r[3], self.clock(), days)
            ]
            for code in gone:
                for table in (
                    "class_results",
                    "class_cells",
                    "class_sweeps",
                    "class_votes",
                    "class_rounds",
                    "class_members",
                    "classes",
                ):
                    q(f"DELETE FROM {table} WHERE code = ?", (code,))
            return len(gone)

        return self._do(work)


def open_classes() -> ClassStore:
    """The classes' store from the server's settings: PostgreSQL at BSDEMO_DATABASE_URL, else
    SQLite in BSDEMO_DATA_DIR, else in ~/.cache/bsdemo (a laptop's lab keeps its classes too).
    ConfigError for a bad URL; OSError when the folder cannot hold a database."""
    import os
    from pathlib import Path

    from bsdemo.store import DATABASE_URL_ENV, database_url, open_store

    url = database_url(os.environ.get(DATABASE_URL_ENV))
    folder = os.environ.get("BSDEMO_DATA_DIR") or str(Path.home() / ".cache" / "bsdemo")
    return ClassStore(open_store(None if url else folder, url))
