"""Lesson 12's quiz: questions from a data file (bsdemo/quiz.toml), checked on load, and the
student's own runs quoted in an explanation where they ran the matching experiment.

Pure Python (no torch, no Streamlit): the page draws, this module decides.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bsdemo.errors import ConfigError, clip
from bsdemo.lessons import LESSONS
from bsdemo.runs import JobSnapshot, batch_extremes, comparable_rates
from bsdemo.units import fixed, format_bytes

QUESTIONS_FILE = Path(__file__).with_name("quiz.toml")
EVIDENCE = {  # what a question can quote from the student's Training Lab runs
    "updates": "weight updates per epoch at the smallest and the largest batch",
    "speed": "samples/s and seconds per epoch at the smallest and the largest batch",
    "memory": "peak memory at the smallest and the largest batch",
}
FIELDS = {
    "id": str,
    "lesson": int,
    "text": str,
    "choices": list,
    "answer": int,
    "explanation": str,
    "evidence": str,
}
OPTIONAL = {"evidence"}
ID = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")


@dataclass(frozen=True)
class Question:
    id: str
    lesson: int
    text: str
    choices: tuple[str, ...]
    answer: int  # index into choices
    explanation: str
    evidence: str | None = None  # a key of EVIDENCE

    @property
    def lesson_title(self) -> str:
        return next(lesson.title for lesson in LESSONS if lesson.number == self.lesson)


def load_questions(path: Path = QUESTIONS_FILE) -> list[Question]:
    """The questions of a quiz file in lesson order (the file's order within a lesson); a
    ConfigError naming the question, the field,
    the value and what is allowed, for anything the page could not ask."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"quiz file {path.name}", clip(str(exc)), "a TOML file") from None
    raw = data.get("question")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"quiz file {path.name}", sorted(data), "one or more [[question]] tables")
    questions, seen = [], set()
    for number, entry in enumerate(raw, 1):
        q = _question(entry, f"question {number}")
        if q.id in seen:
            raise ConfigError(f"question {number} id", q.id, "an id no other question uses")
        seen.add(q.id)
        questions.append(q)
    return sorted(questions, key=lambda q: q.lesson)  # stable: the file's order within a lesson


def _question(entry: Any, where: str) -> Question:
    if not isinstance(entry, dict):
        raise ConfigError(where, entry, "a table of fields")
    for name in entry:
        if name not in FIELDS:
            raise ConfigError(f"{where} field", name, ", ".join(FIELDS))
    for name, kind in FIELDS.items():
        if name not in entry:
            if name not in OPTIONAL:
                raise ConfigError(f"{where} {name}", None, "a value: the field is required")
            continue
        if not isinstance(entry[name], kind) or isinstance(entry[name], bool):
            raise ConfigError(
                f"{where} {name}", entry[name], "a whole number" if kind is int else f"a {kind.__name__}"
            )
    where = f"{where} ({clip(entry['id'], 48)})"
    choices = entry["choices"]
    checks = [
        ("id", ID.fullmatch(entry["id"]), "lowercase letters, digits and dashes"),
        (
            "lesson",
            any(lesson.number == entry["lesson"] for lesson in LESSONS[:-1]),
            f"a lesson from 1 to {len(LESSONS) - 1}",
        ),
        (
            "choices",
            2 <= len(choices) <= 6 and all(isinstance(c, str) and c.strip() for c in choices),
            "2 to 6 non-empty texts",
        ),
        ("choices", len(set(choices)) == len(choices), "texts that differ from each other"),
        ("answer", 0 <= entry["answer"] < len(choices), f"a choice index from 0 to {len(choices) - 1}"),
        ("text", entry["text"].strip(), "a question"),
        ("explanation", entry["explanation"].strip(), "an explanation"),
        ("evidence", entry.get("evidence") in (None, *EVIDENCE), ", ".join(EVIDENCE)),
    ]
    for name, ok, allowed in checks:
        if not ok:
            raise ConfigError(f"{where} {name}", entry.get(name), allowed)
    return Question(
        entry["id"],
        entry["lesson"],
        entry["text"].strip(),
        tuple(choices),
        entry["answer"],
        entry["explanation"].strip(),
        entry.get("evidence"),
    )


def score(questions: Sequence[Question], answers: dict[str, int]) -> tuple[int, int]:
    """(right, answered) over the questions the student has checked."""
    answered = [q for q in questions if q.id in answers]
    return sum(answers[q.id] == q.answer for q in answered), len(answered)


def evidence(question: Question, runs: Sequence[JobSnapshot]) -> str | None:
    """The student's own numbers for a question: their completed Training Lab runs at the
    smallest and the largest effective batch (they must differ); None when there is nothing to
    quote."""
    if question.evidence is None:
        return None
    pair = batch_extremes(runs)
    if pair is None:
        return None
    small, large = pair
    b, big = small.effective_batch, large.effective_batch

    if question.evidence == "updates":
        return (
            f"Your runs: batch {b} made {small.updates_per_epoch:,} updates per epoch, batch {big} "
            f"made {large.updates_per_epoch:,}."
        )
    if question.evidence == "speed":
        like = comparable_rates(small.summary, large.summary)
        if like is None:  # measured under different conditions: no speed is quoted
            return None
        rates = like[:2]
        n = small.summary["samples_seen"] / small.summary["epochs"]
        return (
            f"Your runs: batch {b} trained at {fixed(rates[0], 0)} samples/s (an epoch of "
            f"{small.updates_per_epoch:,} steps in about {fixed(n / rates[0], 2)} s at that rate); batch "
            f"{big} at {fixed(rates[1], 0)} samples/s ({large.updates_per_epoch:,} steps in about "
            f"{fixed(n / rates[1], 2)} s): batch {b} was {fixed(rates[1] / rates[0], 1)}× slower per "
            "sample."
            if rates[1] > rates[0]
            else f"Your runs: batch {b} trained at {fixed(rates[0], 0)} samples/s and batch {big} at "
            f"{fixed(rates[1], 0)}: here the larger batch was not faster — a loaded machine, or a "
            "device already saturated."
        )
    peaks = [s.summary.get("peak_memory_bytes") for s in (small, large)]
    if not all(peaks):
        return None
    return (
        f"Your runs: batch {b} peaked at {format_bytes(peaks[0])}, batch {big} at {format_bytes(peaks[1])}."
    )
