"""Process-wide and per-browser state: the one scheduler, and who this browser is.

Who owns a run is decided by a secret this app keeps in the browser's cookie (`bsdemo_browser`),
never by anything in the URL: a copied link reproduces a run's settings (and may show the run
read-only), while a reload of the same browser's tab comes back with the same cookie and so with
control. The scheduler only ever sees a hash of the secret.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import streamlit as st

from bsdemo.addresses import client_address as address_of
from bsdemo.addresses import parse_trusted
from bsdemo.config import ConfigError
from bsdemo.recall import BrowserMemory
from bsdemo.scheduler import Scheduler
from bsdemo.server import SERVER_NOTICES, process_scheduler
from bsdemo.ui.cookies import COOKIE, COOKIE_DAYS, SECRET, new_secret

if TYPE_CHECKING:  # only named here: Ray is loaded only when the setting asks for a cluster
    from bsdemo.cluster.actor import RemoteScheduler


@st.cache_resource(show_spinner=False)
def scheduler() -> Scheduler | RemoteScheduler:
    """The process's one scheduler, shared by every session (bsdemo.server: made before any
    browser when the server was started with `python -m bsdemo.ui.launch`, else here)."""
    return process_scheduler()


def browser_secret() -> str | None:
    """This browser's secret, when its cookie holds a well-formed one (AppTest sends none)."""
    value = (st.context.cookies or {}).get(COOKIE)
    return value if isinstance(value, str) and SECRET.fullmatch(value) else None


def owner() -> str:
    """Who this browser is, for the scheduler: a hash of its cookie's secret. A browser without
    the cookie gets a fresh secret, written to its cookie by remember_browser()."""
    state = st.session_state
    if "owner" not in state:
        secret = browser_secret()
        if secret is None:
            secret = state["secret_to_store"] = new_secret()
        state["owner"] = hashlib.sha256(secret.encode()).hexdigest()[:32]
    return state["owner"]


def remember_browser() -> None:
    """Store a new secret in this browser's cookie, by script: only where the server did not send
    one (a plain `streamlit run app.py`; `python -m bsdemo.ui.launch` sends it HttpOnly,
    bsdemo.ui.cookies). It is read when a tab connects, so a reloaded tab is the same owner."""
    owner()
    secret = st.session_state.get("secret_to_store")
    if secret is None:
        return
    with st.sidebar:
        st.html(
            f"""<script>
document.cookie = "{COOKIE}={secret}; path=/; max-age={COOKIE_DAYS * 86400}; samesite=lax"
  + (location.protocol === "https:" ? "; secure" : "");
</script>""",
            unsafe_allow_javascript=True,
        )


@st.cache_resource(show_spinner=False)
def trusted_proxies() -> list:
    """The proxies the operator named in BSDEMO_TRUSTED_PROXIES (a bad value: none, and a notice)."""
    try:
        return parse_trusted(os.environ.get("BSDEMO_TRUSTED_PROXIES"))
    except ConfigError as exc:
        SERVER_NOTICES.append(f"A server setting could not be used ({exc}); no proxy is trusted.")
        return []


def client_address() -> str:
    """The connection's address for the per-address limit (bsdemo.addresses): from the
    connection itself, through the headers only of the proxies the operator trusts; every
    connection without one (AppTest's too) shares one bucket."""
    headers = st.context.headers
    forwarded = headers.get_all("X-Forwarded-For") if headers is not None else []
    return address_of(st.context.ip_address, forwarded, trusted_proxies())


@st.cache_resource(show_spinner=False)
def browser_memory() -> BrowserMemory:
    """One per server process: what each browser did, for its next reload (bsdemo.recall)."""
    return BrowserMemory()


def remembered(name: str, factory: Callable[[], Any]) -> Any:
    """This browser's `name` — kept across its reloads (bsdemo.recall) — in this session."""
    state = st.session_state
    if name not in state:
        state[name] = browser_memory().get(owner(), name, factory)
    return state[name]


def predictions() -> dict[str, str]:
    """This browser's answers to the lessons' "Predict first" questions: lesson slug -> answer
    (back after a reload)."""
    return remembered("predictions", dict)


def lab_view() -> dict[str, str]:
    """This browser's choices of how the Training Lab draws its runs (its charts' x-axis), back
    after a reload."""
    return remembered("lab_view", dict)


def locked_predictions() -> dict[str, bool]:
    """Lessons whose prediction this browser made before a result it was judged against: it
    stands as made (back after a reload)."""
    return remembered("predictions_locked", dict)


def session_runs() -> list[int]:
    """Job ids this browser submitted or opened from a link, oldest first (back after a reload)."""
    return remembered("runs", list)
