"""A class-sourced sweep in the class store: the sweep an instructor hands out, each member's
cell, the runs reported into its cells and the room's results (bsdemo.classroom.sweep's rules,
kept in the run store's database). A part of `ClassStore` (bsdemo.classroom.store).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bsdemo.classroom import rules, sweep
from bsdemo.classroom.rules import ClassError
from bsdemo.classroom.sweep import Cell


@dataclass(frozen=True)
class Sweep:
    """A lesson's sweep handed out to a class: its number, grid, workload and seed."""

    page: str
    number: int
    opened: float
    cells: tuple[Cell, ...]
    config: dict[str, Any]
    seed: int


INSTRUCTOR = "instructor"  # whose runs fill a sweep's empty cells (members are hex hashes)


class SweepStore:
    """ClassStore's sweeps (its `_do`, `_class_row`, `_instructing` and `_touch` are the
    store's)."""

    def open_sweep(
        self, code: str, key: object, page: str, config: Mapping[str, Any], seed: int = 0
    ) -> Sweep:
        """Hand the page's grid out to the class: a new sweep of `config` (the instructor's
        workload), each member present given a cell (rules.assign_cells, balanced); members
        who come later get one when their page asks (`my_cell`)."""
        cells = sweep.grid(page)

        def work(q):
            row = self._instructing(q, code, key)
            if row[3] is not None:
                raise ClassError("The class has ended: no new sweep.")
            top = q(
                "SELECT max(sweep) FROM class_sweeps WHERE code = ? AND page = ?", (code, page)
            ).fetchone()[0]
            number = int(top or 0) + 1
            now = self.clock()
            q(
                "INSERT INTO class_sweeps (code, page, sweep, opened, grid, config, seed) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    code,
                    page,
                    number,
                    now,
                    json.dumps([c.as_list() for c in cells]),
                    json.dumps(dict(config), sort_keys=True),
                    int(seed),
                ),
            )
            members = [r[0] for r in q("SELECT member FROM class_members WHERE code = ?", (code,)).fetchall()]
            chosen = rules.assign_cells(members, list(range(len(cells))), number + int(seed))
            for member, cell in chosen.items():
                q(
                    "INSERT INTO class_cells (code, page, sweep, member, cell) VALUES (?, ?, ?, ?, ?)",
                    (code, page, number, member, cell),
                )
            self._touch(q, code)
            return Sweep(page, number, now, cells, dict(config), int(seed))

        return self._do(work)

    def _sweep(self, q, code: str, page: str) -> Sweep | None:
        row = q(
            "SELECT sweep, opened, grid, config, seed FROM class_sweeps WHERE code = ? AND "
            "page = ? ORDER BY sweep DESC LIMIT 1",
            (code, page),
        ).fetchone()
        if row is None:
            return None
        return Sweep(
            page, int(row[0]), row[1], sweep.cells_from(json.loads(row[2])), json.loads(row[3]), int(row[4])
        )

    def current_sweep(self, code: str, page: str) -> Sweep | None:
        """The page's newest sweep in the class, or None."""
        return self._do(lambda q: self._sweep(q, code, page))

    def my_cell(self, code: str, member: str, page: str) -> tuple[Sweep, int] | None:
        """The page's current sweep and this member's cell in it, given now to a member who
        joined after it was handed out (the cell with the fewest members); None: no sweep, an
        ended class, or not a member."""

        def work(q):
            row = self._class_row(q, code)
            current = self._sweep(q, code, page)
            if row is None or row[3] is not None or current is None:
                return None
            if (
                q("SELECT 1 FROM class_members WHERE code = ? AND member = ?", (code, member)).fetchone()
                is None
            ):
                return None
            got = q(
                "SELECT cell FROM class_cells WHERE code = ? AND page = ? AND sweep = ? AND member = ?",
                (code, page, current.number, member),
            ).fetchone()
            if got is not None:
                return current, int(got[0])
            taken = {
                m: int(c)
                for m, c in q(
                    "SELECT member, cell FROM class_cells WHERE code = ? AND page = ? AND sweep = ?",
                    (code, page, current.number),
                ).fetchall()
            }
            cell = rules.assign_cells(
                [*taken, member], list(range(len(current.cells))), current.number + current.seed, taken
            )[member]
            q(
                "INSERT INTO class_cells (code, page, sweep, member, cell) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (code, page, sweep, member) DO NOTHING",
                (code, page, current.number, member, cell),
            )
            got = q(
                "SELECT cell FROM class_cells WHERE code = ? AND page = ? AND sweep = ? AND member = ?",
                (code, page, current.number, member),
            ).fetchone()
            return current, int(got[0])

        return self._do(work)

    def report(
        self,
        code: str,
        page: str,
        number: int,
        cell: int,
        report: Mapping[str, Any],
        member: str | None = None,
        key: object = None,
    ) -> None:
        """Keep a finished run of a cell: a member's run of their own cell, or the instructor's
        (with the key) of any cell. A member's second run of the cell replaces the first (one
        member, one vote in each cell). ClassError when it cannot be taken."""

        def work(q):
            row = self._class_row(q, code)
            if row is None or row[3] is not None:
                raise ClassError("The class has ended: its sweep takes no more runs.")
            current = self._sweep(q, code, page)
            if current is None or current.number != number:
                raise ClassError(
                    "The instructor has started a new sweep since this run began: it was not added."
                )
            index = sweep.check_cell(cell, current.cells)
            if key is not None:
                self._instructing(q, code, key)
                who = INSTRUCTOR
            else:
                mine = q(
                    "SELECT cell FROM class_cells WHERE code = ? AND page = ? AND sweep = ? AND member = ?",
                    (code, page, number, member),
                ).fetchone()
                if mine is None or int(mine[0]) != index:
                    raise ClassError("That cell is not this browser's: run the cell the page gives you.")
                who = member
            q(
                "INSERT INTO class_results (code, page, sweep, member, cell, at, report) VALUES "
                "(?, ?, ?, ?, ?, ?, ?) ON CONFLICT (code, page, sweep, member, cell) DO UPDATE SET "
                "at = excluded.at, report = excluded.report",
                (code, page, number, who, index, self.clock(), json.dumps(dict(report))),
            )
            self._touch(q, code)

        self._do(work)

    def sweep_results(self, code: str, page: str) -> tuple[Sweep, list[tuple[int, dict]], int] | None:
        """The page's current sweep, its runs as (cell, report) and how many members hold a
        cell; None when the class has no sweep on the page."""

        def work(q):
            current = self._sweep(q, code, page)
            if current is None:
                return None
            got = q(
                "SELECT cell, report FROM class_results WHERE code = ? AND page = ? AND "
                "sweep = ? ORDER BY at",
                (code, page, current.number),
            ).fetchall()
            held = q(
                "SELECT count(*) FROM class_cells WHERE code = ? AND page = ? AND sweep = ?",
                (code, page, current.number),
            ).fetchone()[0]
            return current, [(int(c), json.loads(r)) for c, r in got], int(held)

        return self._do(work)

    # ----- keeping -----
