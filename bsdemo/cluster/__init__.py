"""A course on a Ray cluster: one scheduler for every web replica (BSDEMO_RAY_ADDRESS).

With BSDEMO_RAY_ADDRESS set, the lab's scheduler — its queue, its fair-sharing limits, its job
ids, its warm workers — lives in one named, detached Ray actor ("bsdemo-scheduler" in the
"bsdemo" namespace), and every Streamlit replica talks to it through `RemoteScheduler`, which
offers the pages the same calls as a local `Scheduler`. A queue position, a predicted start,
the per-browser and per-address limits and the whole-queue cap therefore hold across replicas:
a student who lands on another replica finds the same queue and the same limits. The first
replica to connect creates the actor with its settings; the others join it. A replica that dies
loses only its own connections (the actor is not its child); its students reconnect to another
replica and find their runs.

Why an actor and not the database: the queue is live state (which worker runs what, a Stop
between two steps, the reaper), touched on every poll; an actor keeps it in one process's memory
and answers a call in about a millisecond on loopback, with the same thread-safe Scheduler the
embedded lab runs, so both deployments share one implementation. The database keeps what must
outlive processes: the finished runs (bsdemo.store).

Ray is the `cluster` extra (`pip install 'bsdemo[cluster]'`) and is imported only by
bsdemo/cluster/actor.py, only when the setting is given: the embedded default never loads it.
This module itself is pure (the setting's check).
"""

from __future__ import annotations

import re

from bsdemo.errors import ConfigError

RAY_ADDRESS_ENV = "BSDEMO_RAY_ADDRESS"
NAMESPACE = "bsdemo"
ACTOR_NAME = "bsdemo-scheduler"
_ADDRESS = re.compile(r"[A-Za-z0-9.\-]+:\d{1,5}")


class SchedulerLost(RuntimeError):
    """The course's scheduler actor did not answer a page's call: it died (Ray restarts it, with
    an empty queue) or hangs. Raised by RemoteScheduler; the pages show it as a message."""


def ray_address(value: str | None) -> str | None:
    """BSDEMO_RAY_ADDRESS checked: None when unset or blank; "auto" (a cluster started on this
    machine), host:port (the head node's GCS port, 6379 by default: the replica joins the
    cluster as a Ray driver on a node of its own) or ray://host:port (Ray Client, the head's
    client server, 10001 by default: the replica stays outside the cluster); ConfigError
    otherwise."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value == "auto" or _ADDRESS.fullmatch(value.removeprefix("ray://")):
        return value
    raise ConfigError(
        RAY_ADDRESS_ENV,
        value,
        "auto, the head's host:port, or ray://host:port "
        "(Ray Client); or unset: the scheduler runs in "
        "this process",
    )


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of an error (Ray's run over many), short."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:limit]
