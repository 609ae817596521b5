"""Training Lab: set batch size, learning rate and accumulation, run, and watch it train live."""

import streamlit as st

from bsdemo import recipes
from bsdemo.plaintext import plain
from bsdemo.ui import lab
from bsdemo.ui.header import lesson_header

lesson_header("training_lab")

url_error = lab.init_from_url()
if url_error:
    st.error(plain(url_error))  # it quotes what the link held: shown as text, not Markdown

cfg = lab.settings_form()
lab.run_controls(cfg)
lab.live_view()
snaps = lab.history()

verdict = recipes.lab_verdict(snaps)
st.markdown(verdict or (
    "**What to look for.** Each optimizer step uses one *effective batch* (micro-batch × "
    "accumulation steps); an epoch is ceil(N / effective batch) steps, so a small batch makes "
    "many cheap, noisy updates and a large one a few expensive, smoother ones. Run once, then "
    "again at another batch size with the same epochs: this paragraph then says what your two "
    "runs showed."))
