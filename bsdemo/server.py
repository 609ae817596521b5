"""The lab server's process-wide parts, made once per process: the scheduler (its workers kept
warm) and the Prometheus endpoint, with the notices of whatever setting could not be used.

`python -m bsdemo.ui.launch app.py [streamlit run's options]` is `streamlit run` with these
parts started first: the workers warm up and /metrics answers from the server's first second,
before any browser (a plain `streamlit run` makes them at the first page view instead). Pages
reach them through bsdemo.ui.state. No Streamlit, no torch here.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
from typing import TYPE_CHECKING

from bsdemo.cluster import RAY_ADDRESS_ENV, ray_address
from bsdemo.config import ConfigError, clip
from bsdemo.limits import Limits, default_threads, threads_rule
from bsdemo.scheduler import Scheduler
from bsdemo.scheduler.ids import default_counter
from bsdemo.scheduler.spool import spool_folder
from bsdemo.store import DATABASE_URL_ENV, Store, database_url
from bsdemo.store import open_store as open_configured

if TYPE_CHECKING:  # only named here: Ray is loaded only when the setting asks for a cluster
    from bsdemo.cluster.actor import RemoteScheduler

# what the server could not use (a bad limits file or setting, an unusable data folder, a store
# that was damaged): shown in every page's sidebar, in plain text, instead of breaking the page
SERVER_NOTICES: list[str] = []
REPLICA_ENV = "BSDEMO_REPLICA"  # this server's name in the metrics (default: the host name)
_made: list[Scheduler | RemoteScheduler] = []
_lock = threading.Lock()


def process_scheduler() -> Scheduler | RemoteScheduler:
    """The one scheduler of this process, made at the first call (its metrics served with it)."""
    with _lock:
        if not _made:
            _made.append(make_scheduler())
            serve_metrics(_made[0])
        return _made[0]


def make_scheduler() -> Scheduler | RemoteScheduler:
    """A scheduler from the server's settings; with BSDEMO_RAY_ADDRESS, the course's one
    scheduler on the Ray cluster, shared by every replica (bsdemo.cluster). A cluster that
    cannot be reached is a notice: this replica then runs its own scheduler, so the lab still
    trains."""
    try:
        limits = Limits.load()
    except ConfigError as exc:
        SERVER_NOTICES.append(f"The server's limits could not be read ({exc}); defaults apply.")
        limits = Limits()
    try:
        threads = default_threads(limits.workers)  # BSDEMO_TORCH_THREADS
    except ConfigError as exc:
        SERVER_NOTICES.append(
            f"A server setting could not be used ({exc}); the default thread count applies."
        )
        threads = threads_rule(limits.workers)
    data_dir = os.environ.get("BSDEMO_DATA_DIR")
    return course_scheduler(limits, threads, data_dir) or Scheduler(
        limits=limits,
        store=open_store(data_dir),
        threads_per_worker=threads,
        id_counter=default_counter(data_dir),
        spool=spool_folder(data_dir),
    )


def replica_name() -> str:
    return (os.environ.get(REPLICA_ENV) or "").strip()[:64] or socket.gethostname()


def serve_metrics(sched) -> None:
    """With BSDEMO_METRICS_PORT set, Prometheus metrics of this scheduler (bsdemo.metrics) on
    BSDEMO_METRICS_ADDRESS; a bad setting or a taken port is a notice, and the lab serves on
    without them."""
    from bsdemo.metrics import PORT_ENV, serve

    try:
        serve(lambda: sched, replica=replica_name())
    except ConfigError as exc:
        SERVER_NOTICES.append(f"Metrics are off: {exc}")
    except OSError as exc:
        SERVER_NOTICES.append(
            f"Metrics are off: {PORT_ENV} could not be served ({type(exc).__name__}: {exc.strerror or exc})."
        )


def course_scheduler(limits: Limits, threads: int, data_dir: str | None):
    """The course's scheduler actor when BSDEMO_RAY_ADDRESS asks for one and it can be reached;
    None otherwise (with a notice saying why, when the setting was given)."""
    try:
        address = ray_address(os.environ.get(RAY_ADDRESS_ENV))
        url = database_url(os.environ.get(DATABASE_URL_ENV)) if address else None
    except ConfigError as exc:
        SERVER_NOTICES.append(f"A server setting could not be used ({exc}); this replica runs its own queue.")
        return None
    if address is None:
        return None
    try:
        from bsdemo.cluster.actor import ClusterUnreachable, SchedulerLost, connect
    except ImportError as exc:
        SERVER_NOTICES.append(
            f"The course's Ray cluster cannot be joined: Ray is not installed "
            f"here ({clip(str(exc), 80)}; pip install 'bsdemo[cluster]'). "
            "This replica runs its own queue."
        )
        return None
    try:
        remote = connect(address, limits, threads, data_dir, url)
    except (ClusterUnreachable, SchedulerLost) as exc:
        SERVER_NOTICES.append(
            f"The course's Ray cluster at {clip(address)!r} could not be "
            f"reached ({clip(str(exc), 160)}). This replica runs its own queue; "
            "runs still train."
        )
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
        SERVER_NOTICES.append(
            f"Stored results are off: a server setting could not be used "
            f"({exc}). Runs still train; they are not kept."
        )
    except (OSError, sqlite3.Error) as exc:
        SERVER_NOTICES.append(
            f"Stored results are off: the data folder {clip(data_dir)!r} could "
            f"not be used ({clip(str(exc), 120)}). Runs still train; they are "
            "not kept."
        )
    return None
