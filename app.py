"""Batch Size Lab: page config, navigation over pages/, and the shared sidebar."""

import streamlit as st

from bsdemo.ui.sidebar import device_badge

st.set_page_config(page_title="Batch Size Lab", page_icon=":material/science:", layout="wide")

page = st.navigation([
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/training_lab.py", title="Training Lab", icon=":material/model_training:",
            url_path="training_lab", help="Train a real network and watch batch size at work."),
])
device_badge()
page.run()
