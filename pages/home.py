"""Home: what the lab is, and the map of its lessons."""

import streamlit as st

from bsdemo.lessons import LESSONS
from bsdemo.ui.entry import require_entrypoint
from bsdemo.ui.links import PageLink

require_entrypoint()
link = PageLink("home", owns_url=False)  # presentation mode only

st.title("Batch Size Lab")
st.markdown(
    "How many samples should a network see before it takes a step? This lab answers with "
    "**real training runs on the machine serving this page** — not pictures of someone else's. "
    "Move the batch size, the learning rate and the gradient-accumulation steps, press Run, and "
    "watch the loss, the throughput (samples per second) and the memory respond.")
st.page_link("pages/training_lab.py", label="Open the Training Lab", icon=":material/arrow_forward:")

st.subheader("Lessons")
for lesson in LESSONS:
    left, right = st.columns([3, 1])
    left.markdown(f"**{lesson.number}. {lesson.title}** — {lesson.goal}")
    if lesson.page:
        with right:
            st.page_link(lesson.page, label="Open", icon=":material/play_circle:")
    else:
        right.caption("Coming")
link.finish()
