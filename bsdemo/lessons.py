"""The lesson registry: every lesson's number, title, icon, goal, "Predict first" question, page
and the fixed words of its page, read from one content file per lesson (bsdemo/content/<slug>.toml).

One place for what the navigation (app.py), Home's lesson map, each lesson page (its header, its
captions, its "Why") and docs/lessons.md say about a lesson, so they cannot disagree — and a
teacher can change the words without touching Python. Texts computed from runs live in
bsdemo/recipes. Pure Python.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONTENT = Path(__file__).resolve().parent / "content"


@dataclass(frozen=True)
class Lesson:
    number: int
    title: str  # the navigation's label, the page's title and Home's heading alike
    goal: str  # one line, the lesson's finding: Home's map, the navigation's tooltip, and its
    # page under the first result (never before: the page asks `ask` until then)
    slug: str | None = None  # the page's URL path; None while the lesson is coming
    icon: str = ":material/school:"
    intro: str = ""  # what the student set out to do (Markdown), under the first result too
    ask: str = ""  # the page's **Goal:** before a result: what is asked, not its answer
    predict: str = ""  # the page's "Predict first" question (Markdown)
    answers: tuple[str, ...] = ()  # choices for its first part, judged by the student's runs
    texts: Mapping[str, Any] = field(default_factory=dict)  # the page's fixed words, by name

    @property
    def question(self) -> str:
        """What the page's Goal says before a result: the question, else (a lesson that asks
        nothing: the quiz) the goal."""
        return self.ask or self.goal

    @property
    def page(self) -> str | None:
        """The page file under pages/, once built."""
        return f"pages/{self.slug}.py" if self.slug else None

    def text(self, name: str, **values: object) -> str:
        """The page's words called `name`, with its {placeholders} filled from `values`."""
        words = self.texts[name]
        return words.format(**values) if values else words


def load(path: Path) -> Lesson:
    """A lesson from its content file: [lesson] for the registry, [text] for the page's words."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    meta = data["lesson"]
    return Lesson(
        number=meta["number"],
        title=meta["title"],
        goal=meta["goal"],
        slug=path.stem,
        icon=meta.get("icon", ":material/school:"),
        intro=meta.get("intro", ""),
        ask=meta.get("ask", ""),
        predict=meta.get("predict", ""),
        answers=tuple(meta.get("answers", ())),
        texts=dict(data.get("text", {})),
    )


LESSONS = tuple(sorted((load(p) for p in CONTENT.glob("*.toml")), key=lambda lesson: lesson.number))
BY_SLUG = {lesson.slug: lesson for lesson in LESSONS if lesson.slug}
