"""Home: what the lab is, and the map of its lessons."""

import streamlit as st

from bsdemo.charts.sketches import sketch
from bsdemo.lessons import LESSONS
from bsdemo.plaintext import plain
from bsdemo.ui import classroom
from bsdemo.ui.entry import require_entrypoint
from bsdemo.ui.links import PageLink
from bsdemo.ui.state import predictions

require_entrypoint()
link = PageLink("home", owns_url=False)  # presentation mode only

st.title("Batch Size Lab")
st.markdown(
    "How many samples should a network see before it takes a step? This lab answers with "
    "**real training runs on the machine serving this page** — not pictures of someone else's. "
    "Move the batch size, the learning rate and the gradient-accumulation steps, press Run, and "
    "watch the loss, the throughput (samples per second) and the memory respond."
)
st.page_link("pages/training_lab.py", label="Open the Training Lab", icon=":material/arrow_forward:")
classroom.join_screen()  # the join form; for an instructor, the screen to project

st.header("Twelve lessons")
st.caption(
    "Each lesson asks one question, lets you predict the answer, and answers it with runs "
    "on this machine. Start with the Training Lab, or open any lesson."
)
guesses = predictions()
ACROSS = 3  # cards a row: at 1280 px each card holds a two-line question without crowding
for first in range(0, len(LESSONS), ACROSS):
    for column, lesson in zip(st.columns(ACROSS), LESSONS[first : first + ACROSS], strict=False):
        card = column.container(border=True, height="stretch")
        card.markdown(f"**{lesson.number}. {lesson.title}**")
        if lesson.slug:
            picture, alt = sketch(lesson.slug)  # the shape of its main chart, no numbers
            card.image(picture, width="stretch", alt=alt)
        card.caption(plain(lesson.question))  # the one-line question the lesson answers
        guess = guesses.get(lesson.slug) if lesson.slug else None
        if guess:
            card.caption(plain(f"Your prediction: “{guess}”"))
        if lesson.page:
            card.page_link(lesson.page, label="Open the lesson", icon=lesson.icon)
        else:
            card.caption("Coming")
link.finish()
