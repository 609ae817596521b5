"""A lesson page's header, from the lesson registry: title and goal; and the "Predict first"
question with its answers, above the run button."""

from __future__ import annotations

import streamlit as st

from bsdemo.lessons import BY_SLUG, Lesson
from bsdemo.plaintext import plain
from bsdemo.ui import classroom
from bsdemo.ui.entry import require_entrypoint
from bsdemo.ui.links import presenting
from bsdemo.ui.state import predictions


def lesson_header(slug: str) -> Lesson:
    """Draw the header of the lesson at `slug` (after making sure app.py runs around the page)."""
    require_entrypoint()
    lesson = BY_SLUG[slug]
    st.title(lesson.title)
    # the one-line goal, the paragraph folded under it (projected, left out: the presenter
    # says it), so the controls and the chart reach the first screen
    if lesson.intro and not presenting():
        with st.expander(f"**Goal:** {lesson.goal}", icon=":material/flag:"):
            st.markdown(lesson.intro)
    else:
        st.markdown(f"**Goal:** {lesson.goal}")
    return lesson


def predict(slug: str) -> None:
    """The "Predict first" question and its answers, drawn just above the page's run button
    (after the settings, whose first run must not be cut short by a widget above them)."""
    lesson = BY_SLUG[slug]
    st.info(f"**Predict first:** {lesson.predict}", icon=":material/psychology:")
    key, saved = f"predict_{slug}", predictions()
    round_, mine = classroom.member_round(slug)
    if round_ is not None:  # in a class: the answer is this round's vote (a new round: none yet)
        seen = f"class_round_{slug}"
        if st.session_state.get(seen) != round_.number:
            st.session_state[seen] = round_.number
            st.session_state[key] = None if mine is None else lesson.answers[mine]
    elif key not in st.session_state and slug in saved:  # kept across pages and reloads
        st.session_state[key] = saved[slug]
    st.radio("Your prediction, before you run it" + (" (the question's first part)"
             if lesson.predict.count("?") > 1 else ""), lesson.answers, index=None,
             key=key, horizontal=True, on_change=_keep, args=(slug, key),
             disabled=round_ is not None and round_.revealed,
             # right under the question it answers: its label (read out by screen readers)
             # would be a line too many on screen
             label_visibility="collapsed")
    if round_ is not None:
        classroom.member_status(slug, round_)
    classroom.room_panel(slug)


def _keep(slug: str, key: str) -> None:
    choice = st.session_state[key]
    answers = BY_SLUG[slug].answers
    if choice is not None and choice not in answers:  # a client that sent a value of its own
        st.session_state[key] = None
        return
    predictions()[slug] = choice
    if choice is not None:  # a class member's answer goes to the room too
        classroom.vote(slug, answers.index(choice))


def prediction_check(slug: str, judged: tuple[int, str] | None) -> None:
    """After the runs: the student's prediction beside what their runs showed (recipes'
    *_prediction), and whether it was right; nothing until the runs answer the question."""
    if judged is None:
        return
    index, numbers = judged
    classroom.settle(slug, index)  # the instructor's runs answer the room's question
    shown = BY_SLUG[slug].answers[index]
    guess = predictions().get(slug)
    if guess is None:
        st.caption(plain(f"Your runs say “{shown}”: {numbers}. Predict before the next run "
                         "and see whether you were right."))
    elif guess == shown:
        st.success(plain(f"You predicted “{guess}”, and your runs agree: {numbers}."),
                   icon=":material/check_circle:")
    else:
        st.warning(plain(f"You predicted “{guess}”; your runs show “{shown}”: {numbers}."),
                   icon=":material/lightbulb:")
