"""Training Lab: set batch size, learning rate and accumulation, run, and watch it train live."""

import streamlit as st

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
lab.history()

st.markdown(
    "**What your runs show.** Each optimizer step used one *effective batch* (micro-batch × "
    "accumulation steps); an epoch is ceil(N / effective batch) steps, so a small batch makes "
    "many cheap, noisy updates and a large one a few expensive, smoother ones. Compare the "
    "loss against *optimizer steps* and against *samples seen*: the same data, two different "
    "stories. The samples/s tile is a median over measured steps (the first few are warm-up "
    "and excluded); on the CPU, memory is *accounted* — parameters, gradients, optimizer "
    "state and the activations saved for the backward pass, counted exactly.")
