"""Training Lab: set batch size, learning rate and accumulation, run, and watch it train live."""

import streamlit as st

from bsdemo import recipes
from bsdemo.links import Control
from bsdemo.plaintext import plain
from bsdemo.ui import lab
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink, areas

lesson_header("training_lab")
# the lab writes its settings into its link itself (bsdemo.config); presentation mode can hide:
link = PageLink("training_lab", owns_url=False, hideable=[
    Control("scenarios", "lab_scenarios", "Scenarios", "choice"),
    Control("preset", "w_preset", "Dataset and model", "choice"),
    Control("batch", "w_batch_pow", "Batch size", "choice", hides=("w_batch_value", "w_batch_exact")),
    Control("lr", "w_lr", "Learning rate", "choice"),
    Control("accum", "w_accumulation_steps", "Gradient-accumulation steps", "choice"),
    Control("optimizer", "w_optimizer", "Optimizer", "choice"),
    Control("epochs", "w_epochs", "Epoch budget", "choice"),
    Control("seed", "w_seed", "Seed", "choice"),
    Control("advanced", "lab_advanced", "Advanced settings", "choice"),
])

url_error = lab.init_from_url()
if url_error:
    st.error(plain(url_error))  # it quotes what the link held: shown as text, not Markdown

controls, results = areas()  # presentation mode: the run and its charts above the settings
with controls:
    cfg = lab.settings_form()
    lab.scenario_buttons()  # below the settings: above them, a click during the first run reset them
    predict("training_lab")
with results:
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
prediction_check("training_lab", recipes.lab_prediction(snaps))
link.finish()
