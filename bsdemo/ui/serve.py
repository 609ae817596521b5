"""The lab as an ASGI app: app.py (or the script BSDEMO_APP_SCRIPT names) behind the browser-id
cookie middleware (bsdemo.ui.cookies). `python -m bsdemo.ui.launch app.py` runs
`streamlit run` on this file; Streamlit finds `app` and serves it."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from bsdemo.ui.cookies import BrowserCookie, serving

SCRIPT = os.environ.get("BSDEMO_APP_SCRIPT") or str(Path(__file__).resolve().parents[2] / "app.py")

serving()  # the pages may hand cookies over (a class seat), HttpOnly
app = st.App(SCRIPT, middleware=[Middleware(BrowserCookie)])
