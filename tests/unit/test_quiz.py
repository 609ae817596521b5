"""bsdemo.quiz: the shipped questions are valid, a broken file says what is wrong, and the
explanations quote the student's own runs."""

from __future__ import annotations

import dataclasses

import pytest

from bsdemo import quiz
from bsdemo.config import ConfigError
from bsdemo.lessons import LESSONS
from tests.unit.test_charts import fake_snapshot

GOOD = """
[[question]]
id = "a"
lesson = 1
text = "Q?"
choices = ["yes", "no"]
answer = 1
explanation = "Because."
"""


def test_the_shipped_quiz_is_valid_and_covers_the_built_lessons():
    questions = quiz.load_questions()
    assert len(questions) >= 10 and len({q.id for q in questions}) == len(questions)
    built = {lesson.number for lesson in LESSONS if lesson.page and lesson.slug != "quiz"}
    assert built <= {q.lesson for q in questions}  # every built lesson is asked about
    seed = next(q for q in questions if q.id == "seed-oom")  # the curriculum's own question
    assert "batch 16" in seed.text and "utilisation drops" in seed.choices[seed.answer].lower()
    # answers are not all in one position
    assert len({q.answer for q in questions}) >= 3
    # asked in lesson order, whatever order the file lists them in
    assert [q.lesson for q in questions] == sorted(q.lesson for q in questions)


def test_the_quiz_tip_names_scenarios_the_lab_offers():
    from bsdemo.presets import COMPARED_SCENARIOS, LAB_SCENARIOS

    assert set(COMPARED_SCENARIOS) <= set(LAB_SCENARIOS) and len(set(COMPARED_SCENARIOS)) == 2


@pytest.mark.parametrize(
    "change, message",
    [
        ("answer = 1", None),
        ("answer = 2", "question 1 (a) answer: got 2; allowed: a choice index from 0 to 1"),
        ("answer = true", "question 1 answer: got True; allowed: a whole number"),
        ("lesson = 12", "question 1 (a) lesson: got 12; allowed: a lesson from 1 to 11"),
        ('id = "Bad Id"', "question 1 (Bad Id) id: got 'Bad Id'; allowed: lowercase letters"),
        ('choices = ["only"]', "question 1 (a) choices: got ['only']; allowed: 2 to 6 non-empty"),
        (
            'choices = ["same", "same"]',
            "question 1 (a) choices: got ['same', 'same']; allowed: texts that differ",
        ),
        ('explanation = "  "', "question 1 (a) explanation: got '  '; allowed: an explanation"),
        ('colour = "red"', "question 1 field: got 'colour'; allowed: id, lesson, text, choices"),
        ('evidence = "vibes"', "question 1 (a) evidence: got 'vibes'; allowed: updates, speed, memory"),
    ],
)
def test_a_broken_question_names_the_question_the_field_and_what_is_allowed(tmp_path, change, message):
    key = change.split(" = ")[0]
    lines = [line for line in GOOD.strip().splitlines() if not line.startswith(f"{key} =")]
    path = tmp_path / "quiz.toml"
    path.write_text("\n".join([*lines, change]) + "\n")
    if message is None:
        assert quiz.load_questions(path)[0].answer == 1
        return
    with pytest.raises(ConfigError) as err:
        quiz.load_questions(path)
    assert str(err.value).startswith(message)


def test_a_file_that_is_not_a_quiz_is_refused(tmp_path):
    path = tmp_path / "quiz.toml"
    for text, message in (
        ("", "allowed: one or more [[question]] tables"),
        ("[[question", "allowed: a TOML file"),
        (GOOD + GOOD, "question 2 id: got 'a'; allowed: an id no other"),
        (GOOD.replace("lesson = 1\n", ""), "question 1 lesson: got None"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError) as err:
            quiz.load_questions(path)
        assert message in str(err.value)


def test_the_score_counts_checked_answers_only():
    questions = quiz.load_questions()
    a, b = questions[:2]
    assert quiz.score(questions, {}) == (0, 0)
    assert quiz.score(questions, {a.id: a.answer, b.id: (b.answer + 1) % len(b.choices)}) == (1, 2)


def run(job_id, batch, rate, peak, epochs=10.0, **conditions):
    snap = fake_snapshot(job_id, batch_size=batch)
    steps = round(epochs * 1438 / batch)
    end = {
        "summary": {
            "steps": steps,
            "epochs": epochs,
            "samples_seen": int(epochs * 1438),
            "samples_per_sec": rate,
            "peak_memory_bytes": peak,
            "device": "cpu",
            "torch_threads": 1,
            "others_busy_share": 0.0,
        }
        | conditions
    }
    return dataclasses.replace(snap, end=end)


def test_the_explanation_quotes_the_students_own_runs():
    questions = {q.evidence: q for q in quiz.load_questions() if q.evidence}
    small, large = run(1, 16, 9_000.0, 1 * 2**20), run(2, 128, 45_000.0, 3 * 2**20)
    speed = quiz.evidence(questions["speed"], [large, small])
    assert "batch 16 trained at 9,000 samples/s" in speed and "5.0× slower per sample" in speed
    assert "an epoch of 90 steps in about 0.16 s" in speed and "(12 steps in about 0.03 s)" in speed
    assert "batch 16 made 90 updates per epoch, batch 128 made 12" in quiz.evidence(
        questions["updates"], [small, large]
    )
    assert "1.00 MiB" in quiz.evidence(questions["memory"], [small, large])
    # one batch size only, or a run that did not complete: nothing to quote
    assert quiz.evidence(questions["speed"], [small, run(3, 16, 8_000.0, 2**20)]) is None
    stopped = dataclasses.replace(large, status="cancelled")
    assert quiz.evidence(questions["speed"], [small, stopped]) is None
    # a larger batch that was not faster is said as it is
    slow = quiz.evidence(questions["speed"], [small, run(4, 128, 8_000.0, 2**20)])
    assert "was not faster" in slow


def test_a_quiet_speed_is_never_quoted_against_a_loaded_one():
    """The issue's case: a stored batch-32 run from a quiet machine, a live batch-256 run under
    load — by the wall clock they are not comparable; by the thread's CPU time they are."""
    questions = {q.evidence: q for q in quiz.load_questions() if q.evidence}
    quiet = run(1, 32, 36_446.0, 2**20, others_busy_share=0.02)
    loaded = run(2, 256, 3_817.0, 2**20, others_busy_share=0.85)
    assert quiz.evidence(questions["speed"], [quiet, loaded]) is None
    assert quiz.evidence(questions["speed"], [quiet, run(3, 256, 3_817.0, 2**20, torch_threads=2)]) is None
    stable = quiz.evidence(
        questions["speed"],
        [
            run(1, 32, 36_446.0, 2**20, others_busy_share=0.02, cpu_samples_per_sec=40_000.0),
            run(2, 256, 3_817.0, 2**20, others_busy_share=0.85, cpu_samples_per_sec=160_000.0),
        ],
    )
    assert "batch 32 trained at 40,000 samples/s" in stable and "4.0× slower" in stable
