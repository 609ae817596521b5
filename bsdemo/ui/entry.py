"""Make every page run through app.py, even for the very first visitor of a deep link.

Streamlit keeps its legacy "pages/ directory" mode until some session has called st.navigation;
in that mode a first request for /training_lab runs the page file alone, without app.py (no
page config, no navigation, no sidebar). A page that finds itself run that way switches the
process to st.navigation mode and reruns, so app.py draws the real app around it.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def require_entrypoint() -> None:
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
