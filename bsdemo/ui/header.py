"""A lesson page's header, from the lesson registry: title and goal; and the "Predict first"
question with its answers, above the run button."""

from __future__ import annotations

import streamlit as st

from bsdemo.lessons import BY_SLUG, Lesson
from bsdemo.plaintext import plain
from bsdemo.ui import classroom
from bsdemo.ui.entry import require_entrypoint
from bsdemo.ui.state import locked_predictions, predictions


def lesson_header(slug: str) -> Lesson:
    """Draw the header of the lesson at `slug` (after making sure app.py runs around the page):
    its title and the question it asks. Never the answer: the lesson's finding, what the
    student set out to do and its Why come under the first result (`prediction_check`)."""
    require_entrypoint()
    lesson = BY_SLUG[slug]
    st.title(lesson.title)
    st.markdown(f"**Goal:** {lesson.question}")
    return lesson


def predict(slug: str) -> None:
    """The "Predict first" question and its answers, drawn just above the page's run button
    (after the settings, whose first run must not be cut short by a widget above them)."""
    lesson = BY_SLUG[slug]
    key, saved = f"predict_{slug}", predictions()
    round_, mine = classroom.member_round(slug)
    if round_ is not None:  # in a class: the answer is this round's vote (a new round: none yet)
        seen = f"class_round_{slug}"
        if st.session_state.get(seen) != round_.number:
            st.session_state[seen] = round_.number
            st.session_state[key] = None if mine is None else lesson.answers[mine]
    elif key not in st.session_state and slug in saved:  # kept across pages and reloads
        st.session_state[key] = saved[slug]
    locked = round_ is None and slug in locked_predictions() and saved.get(slug) is not None
    if locked:  # the result is out: the prediction stands as it was made (shown beside it)
        st.session_state[key] = saved[slug]
    # the question is the radio's own label (read out with its answers), in one tinted box
    # (PREDICT_CSS): a line shorter than a box above a radio, so Run stays high on the screen
    st.radio(
        f":material/psychology: **Predict first:** {lesson.predict}"
        + (" *(Answer its first part.)*" if lesson.predict.count("?") > 1 else ""),
        lesson.answers,
        index=None,
        key=key,
        horizontal=True,
        on_change=_keep,
        args=(slug, key),
        disabled=locked or (round_ is not None and round_.revealed),
    )
    if round_ is not None:
        classroom.member_status(slug, round_)
    classroom.room_panel(slug)


def _keep(slug: str, key: str) -> None:
    choice = st.session_state[key]
    answers = BY_SLUG[slug].answers
    if (
        slug in locked_predictions()
        and predictions().get(slug) is not None
        and classroom.member_round(slug)[0] is None
    ):
        st.session_state[key] = predictions()[slug]  # a change sent after the result: refused
        return
    if choice is not None and choice not in answers:  # a client that sent a value of its own
        st.session_state[key] = None
        return
    predictions()[slug] = choice
    if choice is not None:  # a class member's answer goes to the room too
        classroom.vote(slug, answers.index(choice))


def prediction_check(slug: str, judged: tuple[int, str] | None, done: bool = False) -> None:
    """After the runs: the student's prediction beside what their runs showed (recipes'
    *_prediction), and whether it was right, then the lesson's finding and its Why (`finding`);
    nothing until the runs answer the question (`done`: the page's result is complete, so its
    finding is shown even where the runs left the question open). A prediction made is locked
    from then on."""
    if judged is None:
        if done:
            finding(BY_SLUG[slug])
        return
    index, numbers = judged
    classroom.settle(slug, index)  # the instructor's runs answer the room's question
    lesson = BY_SLUG[slug]
    shown = lesson.answers[index]
    guess = predictions().get(slug)
    if guess is not None:
        locked_predictions()[slug] = True
    _judged(guess, shown, numbers)
    finding(lesson)


def _judged(guess: str | None, shown: str, numbers: str) -> None:
    if guess is None:
        st.caption(
            plain(
                f"Your runs say “{shown}”: {numbers}. Predict before the next run "
                "and see whether you were right."
            )
        )
    elif guess == shown:
        st.success(
            plain(f"You predicted “{guess}”, and your runs agree: {numbers}."), icon=":material/check_circle:"
        )
    else:
        st.warning(
            plain(f"You predicted “{guess}”; your runs show “{shown}”: {numbers}."),
            icon=":material/lightbulb:",
        )


def finding(lesson: Lesson) -> None:
    """Under a result: the lesson's finding in one line, and folded under it what the student
    set out to do and why the result comes out as it does."""
    why = lesson.texts.get("why")
    if not lesson.intro and not why:
        st.markdown(f"**What this lesson shows:** {lesson.goal}")
        return
    with st.expander(f"**What this lesson shows:** {lesson.goal}", icon=":material/flag:"):
        if lesson.intro:
            st.markdown(f"You set out to {lesson.intro.strip()}")
        if why:
            st.markdown(why)
