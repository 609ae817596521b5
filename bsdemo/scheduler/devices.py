"""Where the queue's head may start: admission device by device.

Every worker reports the device it trains on when it starts (its "hello"). The embedded lab's
workers all share one device; a course's workers on a Ray cluster sit on many: each GPU of each
node (the GPUs Ray gave the worker's actor), or a CPU-only node's own memory. A run is admitted
on one device with what runs there: a measurement (a sweep, the finder, …) starts only on a
device nothing else uses and then holds that device alone — the other devices go on — and a
training run starts beside others only when its predicted memory and theirs fit that device's
own memory. Pure Python: the scheduler calls it under its lock.
"""

from __future__ import annotations

import collections
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from bsdemo.limits import Limits
from bsdemo.scheduler import admission
from bsdemo.scheduler.job import Job


def device_key(info: dict[str, Any] | None) -> Hashable | None:
    """Which device a worker's hello names: None for this machine's one device; on a cluster,
    (node, the GPUs it holds) — the node alone for a worker without a GPU."""
    info = info or {}
    node = info.get("node_id")
    return (node, tuple(sorted(str(g) for g in info.get("gpus") or ()))) if node else None


@dataclass
class Placement:
    worker: Any | None  # the free worker to give the job to; None: it waits
    reason: str | None  # why it waits (admission's words)
    beside: list[Job]  # the running jobs on that device (or those it waits for)
    usable: int | None  # that device's memory shared among its runs


def place(
    job: Job, free: Sequence[Any], running: Sequence[Job], workers: Sequence[Any], limits: Limits
) -> Placement:
    """The first free worker (in worker order) on whose device `job` may start now, or why it
    must wait: the reason of the first free worker's device, or — no worker free — the whole
    pool's."""
    device_of = {w.index: w.device for w in workers}
    on: dict[Hashable | None, list[Job]] = collections.defaultdict(list)
    for j in running:
        on[device_of.get(j.worker)].append(j)

    def usable(worker) -> int | None:
        sharing = sum(w.device == worker.device for w in workers)
        return admission.usable_memory(limits, worker.info, sharing)

    def blocker(there: Sequence[Job], free_workers: int, memory: int | None) -> str | None:
        return admission.blocker(
            job,
            len(there),
            sum(j.exclusive for j in there),
            sum(j.claim() for j in there),
            free_workers,
            len(workers),
            memory,
        )

    if not free:
        memory = usable(workers[0]) if workers else None
        return Placement(None, blocker(running, 0, memory), list(running), memory)
    first = None
    for worker in free:
        there, memory = on[worker.device], usable(worker)
        reason = blocker(there, 1, memory)
        if reason is None:
            return Placement(worker, None, there, memory)
        first = first or Placement(None, reason, there, memory)
    return first
