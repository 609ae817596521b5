"""Process-wide and per-browser state: the one scheduler, and who this browser is.

Who owns a run is decided by a secret this app keeps in the browser's cookie (`bsdemo_browser`),
never by anything in the URL: a copied link reproduces a run's settings (and may show the run
read-only), while a reload of the same browser's tab comes back with the same cookie and so with
control. The scheduler only ever sees a hash of the secret.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import streamlit as st

from bsdemo.addresses import client_address as address_of
from bsdemo.addresses import parse_trusted
from bsdemo.cluster import RAY_ADDRESS_ENV, ray_address
from bsdemo.config import ConfigError, clip
from bsdemo.limits import Limits, default_threads, threads_rule
from bsdemo.recall import BrowserMemory
from bsdemo.scheduler import Scheduler
from bsdemo.scheduler.ids import default_counter
from bsdemo.scheduler.spool import spool_folder
from bsdemo.store import DATABASE_URL_ENV, Store, database_url
from bsdemo.store import open_store as open_configured

if TYPE_CHECKING:  # only named here: Ray is loaded only when the setting asks for a cluster
    from bsdemo.cluster.actor import RemoteScheduler

COOKIE = "bsdemo_browser"
COOKIE_DAYS = 30
_SECRET = re.compile(r"[0-9a-f]{32}")
# what the server could not use (a bad limits file or setting, an unusable data folder, a store
# that was damaged): shown in every page's sidebar, in plain text, instead of breaking the page
SERVER_NOTICES: list[str] = []


@st.cache_resource(show_spinner=False)
def scheduler() -> Scheduler | RemoteScheduler:
    """One scheduler per server process, shared by every session (its workers stay warm); with
    BSDEMO_RAY_ADDRESS, the course's one scheduler on the Ray cluster, shared by every replica
    (bsdemo.cluster). A cluster that cannot be reached is a notice: this replica then runs its
    own scheduler, so the lab still trains."""
    try:
        limits = Limits.load()
    except ConfigError as exc:
        SERVER_NOTICES.append(f"The server's limits could not be read ({exc}); defaults apply.")
        limits = Limits()
    try:
        threads = default_threads(limits.workers)  # BSDEMO_TORCH_THREADS
    except ConfigError as exc:
        SERVER_NOTICES.append(f"A server setting could not be used ({exc}); the default "
                              "thread count applies.")
        threads = threads_rule(limits.workers)
    data_dir = os.environ.get("BSDEMO_DATA_DIR")
    sched = course_scheduler(limits, threads, data_dir) or Scheduler(
        limits=limits, store=open_store(data_dir), threads_per_worker=threads,
        id_counter=default_counter(data_dir), spool=spool_folder(data_dir))
    serve_metrics(sched)
    return sched


def serve_metrics(sched) -> None:
    """With BSDEMO_METRICS_PORT set, Prometheus metrics of this scheduler (bsdemo.metrics); a
    bad setting or a taken port is a notice, and the lab serves on without them."""
    try:
        from bsdemo.metrics import PORT_ENV, serve

        serve(lambda: sched)
    except ConfigError as exc:
        SERVER_NOTICES.append(f"Metrics are off: {exc}")
    except OSError as exc:
        SERVER_NOTICES.append(f"Metrics are off: {PORT_ENV} could not be served "
                              f"({type(exc).__name__}: {exc.strerror or exc}).")


def course_scheduler(limits: Limits, threads: int, data_dir: str | None):
    """The course's scheduler actor when BSDEMO_RAY_ADDRESS asks for one and it can be reached;
    None otherwise (with a notice saying why, when the setting was given)."""
    try:
        address = ray_address(os.environ.get(RAY_ADDRESS_ENV))
        url = database_url(os.environ.get(DATABASE_URL_ENV)) if address else None
    except ConfigError as exc:
        SERVER_NOTICES.append(f"A server setting could not be used ({exc}); this replica runs "
                              "its own queue.")
        return None
    if address is None:
        return None
    try:
        from bsdemo.cluster.actor import ClusterUnreachable, SchedulerLost, connect
    except ImportError as exc:
        SERVER_NOTICES.append(f"The course's Ray cluster cannot be joined: Ray is not installed "
                              f"here ({clip(str(exc), 80)}; pip install 'bsdemo[cluster]'). "
                              "This replica runs its own queue.")
        return None
    try:
        remote = connect(address, limits, threads, data_dir, url)
    except (ClusterUnreachable, SchedulerLost) as exc:
        SERVER_NOTICES.append(f"The course's Ray cluster at {clip(address)!r} could not be "
                              f"reached ({clip(str(exc), 160)}). This replica runs its own queue; "
                              "runs still train.")
        return None
    SERVER_NOTICES.extend(remote.notices())
    return remote


def open_store(data_dir: str | None) -> Store | None:
    """The run store: PostgreSQL at BSDEMO_DATABASE_URL when set, else SQLite in data_dir, else
    none. A setting or folder that cannot be used turns stored results off with a notice; a
    database server in trouble opens unavailable (the sidebar shows its notice live). Either way
    the lab trains as before."""
    try:
        return open_configured(data_dir, database_url(os.environ.get(DATABASE_URL_ENV)))
    except ConfigError as exc:
        SERVER_NOTICES.append(f"Stored results are off: a server setting could not be used "
                              f"({exc}). Runs still train; they are not kept.")
    except (OSError, sqlite3.Error) as exc:
        SERVER_NOTICES.append(f"Stored results are off: the data folder {clip(data_dir)!r} could "
                              f"not be used ({clip(str(exc), 120)}). Runs still train; they are "
                              "not kept.")
    return None


def browser_secret() -> str | None:
    """This browser's secret, when its cookie holds a well-formed one (AppTest sends none)."""
    value = (st.context.cookies or {}).get(COOKIE)
    return value if isinstance(value, str) and _SECRET.fullmatch(value) else None


def owner() -> str:
    """Who this browser is, for the scheduler: a hash of its cookie's secret. A browser without
    the cookie gets a fresh secret, written to its cookie by remember_browser()."""
    state = st.session_state
    if "owner" not in state:
        secret = browser_secret()
        if secret is None:
            secret = state["secret_to_store"] = secrets.token_hex(16)
        state["owner"] = hashlib.sha256(secret.encode()).hexdigest()[:32]
    return state["owner"]


def remember_browser() -> None:
    """Store a new secret in this browser's cookie (a first-party cookie, set by script: Streamlit
    gives the server no way to send Set-Cookie). It is read when a tab connects, so a reloaded
    tab is the same owner."""
    owner()
    secret = st.session_state.get("secret_to_store")
    if secret is None:
        return
    with st.sidebar:
        st.html(f"""<script>
document.cookie = "{COOKIE}={secret}; path=/; max-age={COOKIE_DAYS * 86400}; samesite=lax"
  + (location.protocol === "https:" ? "; secure" : "");
</script>""", unsafe_allow_javascript=True)


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


def session_runs() -> list[int]:
    """Job ids this browser submitted or opened from a link, oldest first (back after a reload)."""
    return remembered("runs", list)
