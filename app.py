"""Batch Size Lab: page config, the navigation (from the lesson registry), the shared sidebar."""

import streamlit as st

from bsdemo.cluster import SchedulerLost
from bsdemo.lessons import LESSONS
from bsdemo.plaintext import plain
from bsdemo.ui import classroom
from bsdemo.ui.links import page_base, presenting
from bsdemo.ui.sidebar import device_badge

# a presentation link opens with the sidebar (the presenter's controls) folded away
st.set_page_config(
    page_title="Batch Size Lab",
    page_icon=":material/science:",
    layout="wide",
    initial_sidebar_state="collapsed" if presenting() else "auto",
)

page = st.navigation(
    [st.Page("pages/home.py", title="Home", icon=":material/home:", default=True)]
    + [
        st.Page(lesson.page, title=lesson.title, icon=lesson.icon, url_path=lesson.slug, help=lesson.question)
        for lesson in LESSONS
        if lesson.page
    ],
    expanded=True,
)  # every lesson listed, none behind "View more"
page_base()  # styles and the skip link, before anything else on the page
try:
    device_badge()
    classroom.take_link()  # a join or instructor link, off the URL before the page reads it
    classroom.sidebar()
    page.run()
except SchedulerLost as exc:  # a course's scheduler actor died or hangs: a message, not a trace
    st.error(plain(str(exc)))
