"""A lesson question's rounds and the room's votes in the class store: a round opened, shown and
asked again, each member's answer taken and the rounds' tallies. A part of `ClassStore`
(bsdemo.classroom.store).
"""

from __future__ import annotations

from collections.abc import Sequence

from bsdemo.classroom import rules
from bsdemo.classroom.rules import ClassError, Round, Tally


class VoteStore:
    """ClassStore's rounds and votes (its `_do`, `_class_row`, `_instructing`, `_touch` and
    `clock` are the store's)."""

    # ----- the instructor -----
    def reveal(self, code: str, key: object, question: str) -> None:
        """Show the room's answers to the current round: its votes are locked from now."""

        def work(q):
            self._instructing(q, code, key)
            number = self._current(q, code, question).number
            q(
                "UPDATE class_rounds SET revealed = ? WHERE code = ? AND question = ? AND round = ? "
                "AND revealed IS NULL",
                (self.clock(), code, question, number),
            )
            self._touch(q, code)

        self._do(work)

    def ask_again(self, code: str, key: object, question: str) -> int:
        """A new round of the question (peer instruction's second vote); its number. The first
        round must have been shown: a round nobody has seen is still the one being voted on."""

        def work(q):
            row = self._instructing(q, code, key)
            if row[3] is not None:
                raise ClassError("The class has ended: votes are closed.")
            current = self._current(q, code, question)
            if not current.revealed:
                return current.number
            q(
                "INSERT INTO class_rounds (code, question, round, opened, revealed, supported) "
                "VALUES (?, ?, ?, ?, NULL, NULL) ON CONFLICT (code, question, round) DO NOTHING",
                (code, question, current.number + 1, self.clock()),
            )
            self._touch(q, code)
            return current.number + 1

        return self._do(work)

    def settle(self, code: str, key: object, question: str, supported: int) -> None:
        """Mark the answer the instructor's (or the class's) runs support, on every round."""

        def work(q):
            self._instructing(q, code, key)
            self._current(q, code, question)
            q(
                "UPDATE class_rounds SET supported = ? WHERE code = ? AND question = ?",
                (int(supported), code, question),
            )

        self._do(work)

    # ----- members -----
    def vote(self, code: str, member: str, question: str, choice: int, answers: Sequence[str]) -> None:
        """Take (or change) a member's answer to the question's current round; ClassError with
        the reason when it cannot be taken (ended, shown, not a member, not an answer)."""

        def work(q):
            row = self._class_row(q, code)
            if (
                row is None
                or q("SELECT 1 FROM class_members WHERE code = ? AND member = ?", (code, member)).fetchone()
                is None
            ):
                raise ClassError("This browser is not in the class: join it again with its code.")
            current = self._current(q, code, question)
            refusal = rules.vote_refusal(choice, answers, current, row[3] is not None)
            if refusal:
                raise ClassError(refusal)
            # only while the round is still unshown, checked again in the statement itself: a
            # reveal that lands between the check above and this write still locks the round
            taken = q(
                "INSERT INTO class_votes (code, question, round, member, choice, at) "
                "SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM class_rounds WHERE "
                "code = ? AND question = ? AND round = ? AND revealed IS NULL) "
                "ON CONFLICT (code, question, round, member) "
                "DO UPDATE SET choice = excluded.choice, at = excluded.at",
                (
                    code,
                    question,
                    current.number,
                    member,
                    choice,
                    self.clock(),
                    code,
                    question,
                    current.number,
                ),
            ).rowcount
            if taken == 0:
                raise ClassError(rules.vote_refusal(choice, answers, Round(current.number, True), False))

        self._do(work)

    def my_vote(self, code: str, member: str, question: str) -> tuple[Round, int | None]:
        """The question's current round and this member's answer in it (None: not yet)."""

        def work(q):
            current = self._current(q, code, question)
            got = q(
                "SELECT choice FROM class_votes WHERE code = ? AND question = ? AND round = ? AND member = ?",
                (code, question, current.number, member),
            ).fetchone()
            return current, (None if got is None else int(got[0]))

        return self._do(work)

    # ----- the projector -----
    def tallies(self, code: str, question: str, answers: Sequence[str]) -> list[tuple[Round, Tally]]:
        """Every round of the question, oldest first, with the room's answers in it."""

        def work(q):
            self._current(q, code, question)
            rounds = q(
                "SELECT round, revealed, supported FROM class_rounds WHERE code = ? AND "
                "question = ? ORDER BY round",
                (code, question),
            ).fetchall()
            votes = q(
                "SELECT round, choice FROM class_votes WHERE code = ? AND question = ?", (code, question)
            ).fetchall()
            out = []
            for number, revealed, supported in rounds:
                chosen = [int(c) for r, c in votes if r == number]
                out.append(
                    (
                        Round(
                            int(number), revealed is not None, None if supported is None else int(supported)
                        ),
                        rules.tally(answers, chosen),
                    )
                )
            return out

        return self._do(work)

    def _current(self, q, code: str, question: str) -> Round:
        """The question's newest round (round 1 opened now when the question is new)."""
        row = q(
            "SELECT round, revealed, supported FROM class_rounds WHERE code = ? AND "
            "question = ? ORDER BY round DESC LIMIT 1",
            (code, question),
        ).fetchone()
        if row is None:
            q(
                "INSERT INTO class_rounds (code, question, round, opened, revealed, supported) "
                "VALUES (?, ?, 1, ?, NULL, NULL) ON CONFLICT (code, question, round) DO NOTHING",
                (code, question, self.clock()),
            )
            return Round(1, False)
        return Round(int(row[0]), row[1] is not None, None if row[2] is None else int(row[2]))
