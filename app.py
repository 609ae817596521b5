"""Batch Size Lab: page config, navigation over pages/, and the shared sidebar."""

import streamlit as st

from bsdemo.ui.sidebar import device_badge

st.set_page_config(page_title="Batch Size Lab", page_icon=":material/science:", layout="wide")

page = st.navigation([
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/training_lab.py", title="Training Lab", icon=":material/model_training:",
            url_path="training_lab", help="Train a real network and watch batch size at work."),
    st.Page("pages/throughput.py", title="Throughput & utilisation", icon=":material/speed:",
            url_path="throughput", help="Samples/s against batch size, measured."),
    st.Page("pages/memory.py", title="Memory & OOM", icon=":material/memory:",
            url_path="memory", help="What fills memory, and what happens past it."),
    st.Page("pages/finder.py", title="Find your batch size", icon=":material/search:",
            url_path="finder", help="Predict, then verify, the largest batch that fits."),
    st.Page("pages/regimes.py", title="SGD, full batch, mini-batch", icon=":material/compare:",
            url_path="regimes", help="Three regimes, one model, one epoch budget."),
    st.Page("pages/lr_scaling.py", title="Learning-rate scaling", icon=":material/trending_up:",
            url_path="lr_scaling", help="Scale the learning rate with the batch."),
    st.Page("pages/accumulation.py", title="Gradient accumulation", icon=":material/layers:",
            url_path="accumulation", help="k micro-batches of b = one batch of k·b."),
])
device_badge()
page.run()
