"""A lesson page's header, from the lesson registry: title, goal and the "Predict first" question."""

from __future__ import annotations

import streamlit as st

from bsdemo.lessons import BY_SLUG, Lesson
from bsdemo.ui.entry import require_entrypoint


def lesson_header(slug: str) -> Lesson:
    """Draw the header of the lesson at `slug` (after making sure app.py runs around the page)."""
    require_entrypoint()
    lesson = BY_SLUG[slug]
    st.title(lesson.title)
    st.markdown(f"**Goal:** {lesson.intro}")
    if lesson.predict:
        st.info(f"**Predict first:** {lesson.predict}", icon=":material/psychology:")
    return lesson
