"""Predict, then see: before its first result a lesson page asks its question and gives no
answer — its Goal is the question (`ask`), and the finding (`goal`), what the student sets out
to see (`intro`) and its Why appear only under a result."""

from __future__ import annotations

import pytest

from bsdemo.lessons import LESSONS
from tests.app.helpers import open_page

ASKING = [lesson for lesson in LESSONS if lesson.slug and lesson.answers]


def page_text(at) -> str:
    """Every word the page shows, folded or not: texts, boxes, captions, expanders' labels,
    widgets' labels and help."""
    parts = [
        e.value
        for kind in (
            at.markdown,
            at.caption,
            at.info,
            at.success,
            at.warning,
            at.error,
            at.title,
            at.header,
            at.subheader,
        )
        for e in kind
    ]
    parts += [e.label for e in at.expander]
    for kind in (
        at.button,
        at.radio,
        at.number_input,
        at.select_slider,
        at.selectbox,
        at.slider,
        at.toggle,
        at.checkbox,
    ):
        parts += [f"{e.label} {e.help or ''}" for e in kind]
    return "\n".join(parts)


def test_every_lesson_that_asks_has_a_question_of_its_own():
    assert len(ASKING) >= 10
    for lesson in ASKING:
        assert lesson.ask.endswith("?") and lesson.ask != lesson.goal, lesson.slug


@pytest.mark.parametrize("lesson", ASKING, ids=lambda lesson: lesson.slug)
def test_a_lesson_asks_its_question_and_gives_no_answer_before_its_first_run(lesson):
    at = open_page(lesson.page)
    text = page_text(at)
    assert f"**Goal:** {lesson.ask}" in text  # the question, where the goal was
    assert lesson.predict.split("?")[0].strip()[:40] in text  # and "Predict first" under it
    answers = {
        "goal": lesson.goal,
        "intro": lesson.intro.strip(),
        "why": lesson.texts.get("why", "").strip().removeprefix("**Why.** "),
    }
    for name, words in answers.items():
        if words:  # its first words, anywhere on the page (folded under "More" too)
            assert words[:50] not in text, f"{lesson.slug}: its {name} shows before a run"
