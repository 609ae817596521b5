"""The scheduler as a named, detached Ray actor, and the proxy the pages call it through.

Imports Ray: loaded only when BSDEMO_RAY_ADDRESS is set (bsdemo.cluster says why an actor).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from bsdemo.cluster import ACTOR_NAME, NAMESPACE, SchedulerLost, first_line
from bsdemo.errors import clip
from bsdemo.limits import Limits
from bsdemo.units import setting

CONNECT_S = 5.0  # how long a replica tries to reach the head before running on its own
CALL_S = 30.0  # the longest one call to the scheduler may take (a lookup in the store included)
# what the pages may ask of the scheduler: calls, and values read
CALLS = frozenset(
    {
        "submit",
        "submit_group",
        "snapshot",
        "can_submit",
        "heartbeat",
        "cancel",
        "active_job",
        "waiting_job",
        "load",
        "wait",
        "workers_ready",
        "flush_store",
        "usable_memory",
        "metrics",
    }
)
READS = frozenset({"limits", "device_info", "store_notice", "store_error", "restarts"})


class ClusterUnreachable(RuntimeError):
    """The Ray cluster named by the setting could not be reached."""


class SchedulerHost:
    """The actor's body: the embedded lab's own Scheduler, made in the actor's process with the
    settings of the replica that created it, its store opened there."""

    def __init__(self, limits: Limits, threads: int | None, data_dir: str | None, url: str | None):
        from bsdemo.scheduler import Scheduler
        from bsdemo.scheduler.ids import default_counter
        from bsdemo.scheduler.spool import spool_folder
        from bsdemo.store import open_store

        self.notices: list[str] = []
        try:
            store = open_store(data_dir, url)
        except OSError as exc:
            self.notices.append(
                f"Stored results are off: the scheduler's data folder "
                f"{clip(str(data_dir))!r} could not be used ({clip(str(exc), 120)})."
            )
            store = None
        from bsdemo.cluster.workers import RayWorkerPool

        self.scheduler = Scheduler(
            limits=limits,
            store=store,
            threads_per_worker=threads,
            id_counter=default_counter(data_dir),
            pool=RayWorkerPool,
            spool=spool_folder(data_dir),
        )
        self.where = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        if name not in CALLS:
            raise AttributeError(f"the scheduler offers no call {name!r} to replicas")
        return getattr(self.scheduler, name)(*args, **kwargs)

    def read(self, name: str) -> Any:
        if name == "notices":
            return list(self.notices)
        if name == "where":
            return dict(self.where)

        if name not in READS:
            raise AttributeError(f"the scheduler offers no value {name!r} to replicas")
        return getattr(self.scheduler, name)

    def shutdown(self) -> None:
        """Stop the workers (tests, and an instructor tearing the course down)."""
        self.scheduler.close()


class RemoteScheduler:
    """What a page asks of a Scheduler, answered by the course's one scheduler actor.

    Errors the scheduler raises for the page (a limit, a bad setting) reach the page as the same
    exceptions. `limits` is read once: the actor's, for its whole life."""

    def __init__(self, actor):
        self.actor = actor
        self.limits: Limits = self._read("limits")

    def _get(self, ref, timeout: float = CALL_S) -> Any:
        try:
            return ray.get(ref, timeout=timeout)
        except RayTaskError as exc:  # the scheduler's own error: raise it as itself
            cause = exc.cause
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        except (RayActorError, GetTimeoutError) as exc:
            what = (
                f"did not answer within {setting(timeout)} s"
                if isinstance(exc, GetTimeoutError)
                else "was lost"
            )
            raise SchedulerLost(
                f"The course's scheduler {what} ({first_line(exc, 120).rstrip('.')}"
                "). Ray starts it again by itself; the runs it held queued or running are "
                "gone. Reload the page in a moment."
            ) from None

    def _call(self, name: str, *args, timeout: float = CALL_S, **kwargs) -> Any:
        return self._get(self.actor.call.remote(name, args, kwargs), timeout)

    def _read(self, name: str) -> Any:
        return self._get(self.actor.read.remote(name))

    def submit(
        self,
        cfg,
        owner: str,
        kind: str = "train",
        options: dict | None = None,
        fresh: bool = False,
        address: str | None = None,
        supersede: bool = False,
    ) -> int:
        return self._call(
            "submit",
            cfg,
            owner,
            kind=kind,
            options=options,
            fresh=fresh,
            address=address,
            supersede=supersede,
        )

    def submit_group(self, cfgs, owner: str, address: str | None = None, fresh: bool = False) -> list[int]:
        return self._call("submit_group", cfgs, owner, address=address, fresh=fresh)

    def snapshot(self, job_id: int):
        return self._call("snapshot", job_id)

    def can_submit(self, owner: str, kind: str | None = None) -> bool:
        return self._call("can_submit", owner, kind)

    def waiting_job(self, owner: str, kind: str = "train") -> int | None:
        return self._call("waiting_job", owner, kind)

    def heartbeat(self, owner: str) -> None:
        """Sent, not waited for: a page polls with a heartbeat then a snapshot, and the
        heartbeat answers nothing (a lost actor is told by the snapshot right after), so a poll
        costs the page one round trip to the scheduler instead of two."""
        self.actor.call.remote("heartbeat", (owner,), {})

    def cancel(self, job_id: int | None, owner: str | None = None) -> bool:
        return self._call("cancel", job_id, owner)

    def active_job(self, owner: str) -> int | None:
        return self._call("active_job", owner)

    def load(self) -> dict[str, Any]:
        return self._call("load")

    def wait(self, job_id: int, timeout: float = 60.0):
        return self._call("wait", job_id, timeout, timeout=timeout + CALL_S)

    def workers_ready(self) -> int:
        return self._call("workers_ready")

    def metrics(self) -> dict[str, Any]:
        return self._call("metrics")

    def flush_store(self, timeout: float = 30.0) -> bool:
        return self._call("flush_store", timeout, timeout=timeout + CALL_S)

    def usable_memory(self) -> int | None:
        return self._call("usable_memory")

    @property
    def device_info(self) -> dict[str, Any] | None:
        return self._read("device_info")

    @property
    def store_notice(self) -> str | None:
        return self._read("store_notice")

    @property
    def store_error(self) -> str | None:
        return self._read("store_error")

    @property
    def restarts(self) -> int:
        return self._read("restarts")

    def notices(self) -> list[str]:
        """What the actor could not use when it was made (its data folder)."""
        return self._read("notices")

    def where(self) -> dict[str, Any]:
        """The node, host and process the scheduler runs in."""
        return self._read("where")

    def close(self) -> None:
        """A replica closing leaves the course's scheduler running (other replicas use it)."""


def reachable(address: str, seconds: float = CONNECT_S) -> bool:
    """Whether host:port accepts a TCP connection within seconds: Ray's own connect waits minutes
    for a head that is not there."""
    if address == "auto":
        return True
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=seconds):
            return True
    except OSError:
        return False


CLIENT_TRIES = 3  # a Ray Client head starts a server process per client; a busy head can lose one


def join(address: str) -> None:
    """ray.init at address. Through Ray Client the head starts a fresh server process for each
    client, and on a busy head that process can die starting ("Initialization failure from
    server"): that is tried again, twice, before the replica gives up."""
    for attempt in range(1, CLIENT_TRIES + 1):
        try:
            ray.init(
                address=address,
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level="WARNING",
                configure_logging=False,
            )
            return
        except (ConnectionError, RuntimeError, TimeoutError) as exc:
            retry = (
                address.startswith("ray://")
                and attempt < CLIENT_TRIES
                and isinstance(exc, ConnectionAbortedError)
            )
            if not retry:
                raise ClusterUnreachable(f"{type(exc).__name__}: {clip(str(exc), 160)}") from exc
            time.sleep(attempt)


def connect(
    address: str, limits: Limits, threads: int | None, data_dir: str | None, url: str | None
) -> RemoteScheduler:
    """Join the Ray cluster at address and the course's scheduler actor in it, creating the actor
    (with these settings) when no replica has yet. Raises ClusterUnreachable."""
    if not reachable(address):
        raise ClusterUnreachable(f"nothing answered at {address} within {setting(CONNECT_S)} s")
    if not ray.is_initialized():
        join(address)
    # on the head node: the one node a cluster cannot lose anyway (it holds Ray's own state),
    # so a GPU node going away never takes the course's queue with it
    host = ray.remote(SchedulerHost).options(
        name=ACTOR_NAME,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        num_cpus=0,
        resources={"node:__internal_head__": 0.001},
        max_concurrency=64,
        max_restarts=-1,
    )
    actor = host.remote(limits, threads, data_dir, url)
    deadline = time.monotonic() + CALL_S * 4  # the first replica waits for the actor to start
    while True:
        try:
            return RemoteScheduler(actor)
        except SchedulerLost:
            if time.monotonic() > deadline:
                raise
