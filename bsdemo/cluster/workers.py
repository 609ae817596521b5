"""The course's training workers as Ray actors, spread over the cluster's nodes.

`RayWorkerPool` offers the scheduler what the local `WorkerPool` does (bsdemo.scheduler.pool):
warm workers, one job each at a time, their messages on one `results` queue, a stop between
two steps, a dead one replaced in its slot. Each worker is a `LabWorker` actor that runs the
embedded lab's own worker loop (bsdemo.engine.worker.main: torch imported once, a warm-up, then
jobs) on a thread of its own, so a run on the cluster is the same code as a run on a laptop.

Events come back as they happen: a thread of the pool's per worker long-polls the actor
(`drain`: whatever the loop has put, waiting at most POLL_S for the first message), so a step
reaches the scheduler one call (about a millisecond on a local network) after the engine filed
it. A worker whose actor is lost (its process died, its node went away) reads as a dead process:
the scheduler's reaper fails its job with a message naming what was lost and replaces it.

Each actor holds one CPU and, on a cluster with GPUs, 1/BSDEMO_WORKERS_PER_GPU of a GPU (Ray
sets CUDA_VISIBLE_DEVICES for it); the pool asks Ray to spread them over the nodes. Its hello
names its node and GPUs, so the scheduler admits runs device by device (scheduler.devices).
Imports Ray: loaded only in the scheduler actor (bsdemo.cluster.actor).
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from bsdemo.cluster import first_line
from bsdemo.limits import Limits
from bsdemo.scheduler.pool import Worker, WorkerPool
from bsdemo.units import setting

POLL_S = 0.2  # the longest one drain call waits for a first message
START_S = 600.0  # the longest a new actor may take to be placed and answer (a node starting)


class _Cancel:
    """The worker loop's stop flag (a shared int in a local pool)."""

    value = -1


class _Messages(queue.Queue):
    """The worker loop's results queue (a multiprocessing queue in a local pool)."""

    def cancel_join_thread(self) -> None:
        pass


def _lab_loop(*args) -> None:
    """The worker loop, in the actor's own process: its code, and torch, live in
    bsdemo.engine.worker (as for a local pool's spawned worker); its groups' members are placed
    on the cluster (bsdemo.cluster.groups)."""
    from bsdemo.cluster.groups import use_cluster_groups
    from bsdemo.engine.worker import main

    use_cluster_groups()  # a data-parallel or pipeline group spans the cluster's nodes
    main(*args)


class LabWorker:
    """The actor's body: the lab's worker loop on a thread, fed and drained through calls."""

    def __init__(self, index: int, threads: int, memory: tuple):
        niceness = os.nice(0)
        if niceness > 0:  # Ray starts workers at nice 15 unless RAY_worker_niceness=0: undo it
            try:
                os.nice(-niceness)
            except OSError:  # not permitted here: the node must be started with the setting
                pass
        self.tasks: queue.Queue = queue.Queue()
        self.results = _Messages()
        self.cancel = _Cancel()
        # where it runs: its node, and the GPUs Ray gave it (the device admission counts it on)
        self.where = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "gpus": [str(g) for g in ray.get_gpu_ids()],
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "nice": os.nice(0),
        }
        self.loop = threading.Thread(
            target=_lab_loop,
            name="bsdemo-worker",
            daemon=True,
            args=(index, self.tasks, self.results, self.cancel, threads, memory),
        )
        self.loop.start()

    def give(self, task: tuple | None) -> None:
        self.tasks.put(task)

    def stop(self, job_id: int) -> None:
        self.cancel.value = job_id

    def drain(self, wait_s: float = POLL_S) -> list[tuple]:
        """The loop's messages so far (at least one, unless wait_s passed first); a "hello"
        carries where this actor runs."""
        out = []
        try:
            out.append(self.results.get(timeout=wait_s))
            while True:
                out.append(self.results.get_nowait())
        except queue.Empty:
            pass
        for i, message in enumerate(out):
            if message[0] == "hello":
                out[i] = (message[0], message[1], {**message[2], **self.where})
        return out

    def pid(self) -> int:
        return os.getpid()


@dataclass
class ActorProcess:
    """A worker actor seen as the scheduler sees a worker process."""

    actor: Any
    alive: bool = True
    exitcode: Any = None  # what was lost, once it was
    pid: int | None = None
    placed: threading.Event = field(default_factory=threading.Event)

    def is_alive(self) -> bool:
        return self.alive

    def lost(self, why: str) -> None:
        if self.alive:
            self.alive, self.exitcode = False, why

    def kill(self) -> None:
        self.lost("ended by the scheduler")
        try:
            ray.kill(self.actor)
        except RayError:
            pass

    def join(self, timeout: float | None = None) -> None:
        pass


class RayWorkerPool(WorkerPool):
    """`size` LabWorker actors spread over the cluster: the local pool's bookkeeping (which
    worker is free, starting, alive; a lost one replaced in its slot), Ray's workers."""

    def __init__(self, size: int, threads: int, limits: Limits):
        self.results: queue.Queue = queue.Queue()
        self._threads = threads
        self._memory = (limits.device_memory, limits.memory_margin)
        gpus = ray.cluster_resources().get("GPU", 0)
        self._gpu_share = 1.0 / limits.workers_per_gpu if gpus else 0
        self.workers = [self._start(i) for i in range(size)]
        self.restarts = 0

    def _start(self, index: int) -> Worker:
        actor = (
            ray.remote(LabWorker)
            .options(
                num_cpus=1,
                num_gpus=self._gpu_share,
                max_concurrency=4,
                max_restarts=0,
                scheduling_strategy="SPREAD",
                name=None,
            )
            .remote(index, self._threads, self._memory)
        )
        process = ActorProcess(actor)
        worker = Worker(index, process, tasks=None, cancel=None)
        threading.Thread(
            target=self._forward, args=(worker,), daemon=True, name=f"bsdemo-ray-results-{index}"
        ).start()
        return worker

    def _forward(self, worker: Worker) -> None:
        """Move one actor's messages into `results` until it is retired or lost."""
        process: ActorProcess = worker.process
        started = time.monotonic()
        while not worker.retired.is_set() and process.alive:
            try:
                messages = ray.get(process.actor.drain.remote(), timeout=POLL_S + 30)
            except GetTimeoutError:
                if not process.placed.is_set() and time.monotonic() - started > START_S:
                    process.lost(f"its Ray actor was not placed on any node within {setting(START_S)} s")
                continue
            except RayActorError as exc:
                process.lost(f"its Ray actor was lost ({first_line(exc)})")
                return
            except RayError as exc:
                process.lost(f"its Ray actor failed ({first_line(exc)})")
                return
            for message in messages:
                if message[0] == "hello":
                    process.placed.set()
                    process.pid = message[2].get("pid")
                    worker.node = message[2].get("node_id")
                if not worker.retired.is_set():
                    self.results.put(message)

    def kill(self, index: int) -> None:
        """End the actor at index now and put a fresh one in its slot."""
        worker = self.workers[index]
        worker.retired.set()
        worker.process.kill()
        self.restarts += 1
        self.workers[index] = self._start(index)

    def give(self, worker: Worker, job_id: int, task: tuple) -> None:
        worker.jobs.append(job_id)
        worker.process.actor.give.remote(task)

    def stop(self, index: int, job_id: int) -> None:
        self.workers[index].process.actor.stop.remote(job_id)

    def close(self) -> None:
        for w in self.workers:
            w.retired.set()
            w.process.kill()
