"""Training Lab: set batch size, learning rate and accumulation, run, and watch it train live."""

import streamlit as st

from bsdemo import recipes
from bsdemo.links import Control
from bsdemo.plaintext import plain
from bsdemo.ui import classroom, lab
from bsdemo.ui.header import lesson_header, predict, prediction_check
from bsdemo.ui.links import PageLink, areas, presenting

lesson = lesson_header("training_lab")
# the lab writes its settings into its link itself (bsdemo.config); presentation mode can hide:
link = PageLink(
    "training_lab",
    owns_url=False,
    hideable=[
        Control("scenarios", "lab_scenarios", "Scenarios", "choice"),
        Control("preset", "w_preset", "Dataset and model", "choice"),
        Control("batch", "w_batch_pow", "Batch size", "choice", hides=("w_batch_value", "w_batch_exact")),
        Control("lr", "w_lr", "Learning rate", "choice"),
        Control("accum", "w_accumulation_steps", "Gradient-accumulation steps", "choice"),
        Control("optimizer", "w_optimizer", "Optimizer", "choice"),
        Control("epochs", "w_epochs", "Epoch budget", "choice"),
        Control("seed", "w_seed", "Seed", "choice"),
        Control("advanced", "lab_advanced", "Advanced settings", "choice"),
    ],
)

url_error = lab.init_from_url()
if url_error:
    st.error(plain(url_error))  # it quotes what the link held: shown as text, not Markdown

# on screen the settings are a panel beside the run and its charts (one screen holds controls,
# loss and samples/s); projected, the run and its charts come first, full width, the settings
# under them
projected = presenting()
# keyed: on a phone the panel's styles (lab.PHONE_CSS) interleave its two columns
controls, results = areas() if projected else st.container(key="lab_panel").columns([4, 9], gap="medium")
with controls:
    cfg = lab.settings_form(narrow=not projected)
    if projected:  # below the settings: above them, a click during the first run reset them
        lab.scenario_buttons()
with results:
    predict("training_lab")  # just above Run, in either order of the areas: never below results
    classroom.sweep_panel("training_lab", cfg)  # in a class: the room's sweep of this lesson
    lab.run_controls(cfg)
    lab.live_view()
if not projected:
    lab.scenario_buttons()  # full width under the panel and the charts: every name fits
snaps = lab.history()

if recipes.lab_verdict(snaps) is None:  # once a run ended, its takeaway sits under the charts
    st.markdown(lesson.text("look_for"))
prediction_check("training_lab", recipes.lab_prediction(snaps))
st.html(f"<style>{lab.PHONE_CSS}</style>")  # on a phone: the main controls, Run, the loss chart
link.finish()
