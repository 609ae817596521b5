"""Check yourself: the quiz, one answer revealed at a time, explained with the student's runs."""

import json

import streamlit as st

from bsdemo import quiz
from bsdemo.presets import COMPARED_SCENARIOS
from bsdemo.ui.header import lesson_header
from bsdemo.ui.links import PageLink
from bsdemo.ui.state import remembered, scheduler, session_runs

lesson_header("quiz")
link = PageLink("quiz", owns_url=False)  # no settings to link: presentation mode only

questions = quiz.load_questions()
answers: dict[str, int] = remembered("quiz_answers", dict)  # checked answers, kept on reload
runs = [s for s in (scheduler().snapshot(j) for j in session_runs()) if s is not None]

right, answered = quiz.score(questions, answers)
left, middle, end = st.columns([3, 1.3, 1.3], vertical_alignment="center")
left.markdown(
    f"## Score: {right} of {answered}"
    + (f" · {len(questions) - answered} to go" if answered < len(questions) else " · done")
)


def start_over() -> None:
    answers.clear()
    for q in questions:
        st.session_state.pop(f"quiz_pick_{q.id}", None)


middle.button(
    "Start over",
    key="quiz_start_over",
    on_click=start_over,
    disabled=not answers,
    icon=":material/restart_alt:",
)
end.download_button(
    "Your answers (JSON)",
    json.dumps(
        [
            {
                "id": q.id,
                "lesson": q.lesson,
                "answer": q.choices[answers[q.id]],
                "right": answers[q.id] == q.answer,
            }
            for q in questions
            if q.id in answers
        ],
        indent=2,
    ),
    file_name="batch-size-lab-quiz.json",
    mime="application/json",
    disabled=not answers,
    icon=":material/download:",
)
if not any(s.status == "completed" for s in runs):
    first, second = COMPARED_SCENARIOS
    st.caption(
        f"Tip: run the Training Lab's scenarios “{first}” and “{second}” first — the "
        "explanations then quote your own numbers."
    )


def check(q: quiz.Question) -> None:
    """on_click: keep the picked choice as this question's answer."""
    pick = st.session_state.get(f"quiz_pick_{q.id}")
    if pick is not None:
        answers[q.id] = q.choices.index(pick)


for number, q in enumerate(questions, 1):
    with st.container(border=True):
        st.markdown(f"**Question {number}** · lesson {q.lesson}, {q.lesson_title}")
        st.markdown(q.text)
        done = q.id in answers
        if done:  # the radio shows the answer given, and can no longer change it
            st.session_state[f"quiz_pick_{q.id}"] = q.choices[answers[q.id]]
        st.radio(
            "Your answer",
            q.choices,
            index=None,
            key=f"quiz_pick_{q.id}",
            disabled=done,
            label_visibility="collapsed",
        )
        if not done:
            st.button(
                "Check",
                key=f"quiz_check_{q.id}",
                on_click=check,
                args=(q,),
                disabled=st.session_state.get(f"quiz_pick_{q.id}") is None,
            )
            continue
        if answers[q.id] == q.answer:
            st.success("Right.", icon=":material/check_circle:")
        else:
            st.error("Not quite. The answer:", icon=":material/cancel:")
            st.text(q.choices[q.answer])  # a choice is shown as plain text
        st.markdown(q.explanation)
        own = quiz.evidence(q, runs)
        if own:
            st.info(own, icon=":material/monitoring:")
        elif q.evidence:
            st.caption(
                f"Run the Training Lab at two batch sizes to see this with your own "
                f"numbers ({quiz.EVIDENCE[q.evidence]})."
            )
link.finish()
