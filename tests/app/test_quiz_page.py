"""The quiz page (lesson 12) through AppTest: answer, check, score, start over."""

from __future__ import annotations

from bsdemo import quiz
from tests.app.helpers import open_page

QUIZ = "pages/quiz.py"


def test_an_answer_is_revealed_with_its_explanation_and_counted():
    questions = quiz.load_questions()
    at = open_page(QUIZ)
    assert at.title[0].value == "Check yourself"
    assert len(at.radio) == len(questions)
    assert at.button(key=f"quiz_check_{questions[0].id}").disabled  # nothing picked yet
    first, second = questions[0], questions[1]
    at.radio(key=f"quiz_pick_{first.id}").set_value(first.choices[first.answer]).run()
    at.button(key=f"quiz_check_{first.id}").click().run()
    assert not at.exception
    assert [s.value for s in at.success] == ["Right."]
    assert any(first.explanation[:40] in m.value for m in at.markdown)
    assert at.radio(key=f"quiz_pick_{first.id}").disabled  # an answer given stays given
    wrong = next(c for i, c in enumerate(second.choices) if i != second.answer)
    at.radio(key=f"quiz_pick_{second.id}").set_value(wrong).run()
    at.button(key=f"quiz_check_{second.id}").click().run()
    assert [e.value for e in at.error] == ["Not quite. The answer:"]
    assert second.choices[second.answer] in [t.value for t in at.text]
    assert any("Score: 1 of 2" in m.value for m in at.markdown)
    # no Training Lab runs in this session: the page says how to get your own numbers
    assert any("Run the Training Lab at two batch sizes" in c.value for c in at.caption)
    at.button(key="quiz_start_over").click().run()
    assert any("Score: 0 of 0" in m.value for m in at.markdown) and not at.success
    assert at.radio(key=f"quiz_pick_{first.id}").value is None
