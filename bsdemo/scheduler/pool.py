"""The worker pool: warm worker processes, each with its own task queue and stop flag.

Workers are started with the `spawn` context (CUDA forbids fork), import torch once, warm up and
then take jobs: one at a time, or on a CPU up to `limits.turns` training runs at once, stepped
in turns on the worker's one thread (bsdemo.engine.worker: no step ever beside another); every
worker sends its events back over the pool's one results queue. The workers' code is
bsdemo.engine.worker, imported only in the child (`_worker_main`), so the server process never
imports torch.

Each worker writes to a results queue of its own, read by a thread of the pool's that forwards
to one in-process queue (`results`): a worker killed in the middle of a message (its job over
its time cap, say) can break only its own pipe, never the lock or the pipe the other workers
write through. A worker dies with the server (the kernel's parent-death signal).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any

from bsdemo.lifetime import remove_orphan_folders
from bsdemo.limits import Limits


@dataclass
class Worker:
    index: int
    process: Any
    tasks: Any  # this worker's own task queue
    cancel: Any  # shared int: the id of a job to stop (checked between steps)
    results: Any = None  # its own results queue (read by the pool's forwarding thread)
    retired: threading.Event = field(default_factory=threading.Event)  # killed or replaced
    jobs: list[int] = field(default_factory=list)  # the jobs it holds (several: in turns)
    ready: bool = False
    started_at: float = field(default_factory=time.monotonic)
    node: str | None = None  # the cluster node it runs on (a Ray worker's; None: this machine)
    info: dict | None = None  # the device it trains on, as its hello said
    device: Any = None  # which device that is (scheduler.devices.device_key; None: the one here)


class WorkerPool:
    """`size` workers, started at once; a dead one is replaced in its slot (`replace`)."""

    turns = 1  # training runs a CPU worker may hold at once (the local pool: limits.turns)

    def __init__(self, size: int, threads: int, limits: Limits):
        self.turns = limits.turns
        self._ctx = mp.get_context("spawn")
        self.results: queue.Queue = queue.Queue()  # (kind, worker index, ...) from every worker
        self._threads = threads
        self._memory = (limits.device_memory, limits.memory_margin)  # its OS ceiling's basis
        self.workers = [self._start(i) for i in range(size)]
        self.restarts = 0  # workers replaced after dying

    def __len__(self) -> int:
        return len(self.workers)

    def __getitem__(self, index: int) -> Worker:
        return self.workers[index]

    def _start(self, index: int) -> Worker:
        tasks, results = self._ctx.Queue(), self._ctx.Queue()
        cancel = self._ctx.RawValue("q", -1)  # lock-free: one writer, read between steps
        process = self._ctx.Process(
            target=_worker_main,
            name=f"bsdemo-worker-{index}",
            args=(index, tasks, results, cancel, self._threads, self._memory),
            daemon=True,
        )
        start_spawned(process)
        worker = Worker(index, process, tasks, cancel, results)
        threading.Thread(
            target=self._forward, args=(worker,), daemon=True, name=f"bsdemo-results-{index}"
        ).start()
        return worker

    def _forward(self, worker: Worker) -> None:
        """Move one worker's messages into `results` until it is retired and drained."""
        while True:
            try:
                message = worker.results.get(timeout=0.2)
            except queue.Empty:
                if worker.retired.is_set() or not worker.process.is_alive():
                    return
                continue
            except (OSError, EOFError, ValueError):
                return  # its pipe was closed or broken (the worker was killed mid-message)
            self.results.put(message)

    def replace(self, index: int) -> None:
        """A fresh worker in a dead one's slot."""
        self.restarts += 1
        self.workers[index].retired.set()
        self.workers[index] = self._start(index)

    def kill(self, index: int) -> None:
        """End the worker at index now (with its process group's members, which die with it),
        and put a fresh one in its slot: the last resort for a job that does not stop."""
        worker = self.workers[index]
        worker.retired.set()
        worker.process.kill()
        worker.process.join(timeout=10)
        remove_orphan_folders()
        self.restarts += 1
        self.workers[index] = self._start(index)

    def room(self, worker: Worker) -> int:
        """Jobs the worker may hold at once: `turns` on a CPU (training runs, stepped in turn;
        admission keeps a measurement alone on its device), else one."""
        return self.turns if (worker.info or {}).get("type") == "cpu" else 1

    def free(self) -> list[Worker]:
        """Live, warmed-up workers with room for a job (a job's time cap starts when it is
        given one): the idle first, then the least busy, so runs spread over the workers
        before any takes turns."""
        return sorted(
            (w for w in self.workers if len(w.jobs) < self.room(w) and w.ready and w.process.is_alive()),
            key=lambda w: len(w.jobs),
        )

    def starting(self) -> int:
        """Live workers still warming up."""
        return sum(not w.ready and w.process.is_alive() for w in self.workers)

    def alive(self) -> int:
        return sum(w.process.is_alive() for w in self.workers)

    def give(self, worker: Worker, job_id: int, task: tuple) -> None:
        worker.jobs.append(job_id)
        worker.tasks.put(task)

    def release(self, index: int, job_id: int) -> None:
        """The worker at index is done with job_id (if it still had it)."""
        if job_id in self.workers[index].jobs:
            self.workers[index].jobs.remove(job_id)

    def stop(self, index: int, job_id: int) -> None:
        """Ask the worker at index to stop job_id between two steps: the flag a job checks
        within its turn, and a message for a worker that holds several (one flag, several
        jobs: the message is what keeps two quick Stops apart)."""
        self.workers[index].cancel.value = job_id
        self.workers[index].tasks.put(("stop", job_id))

    def close(self) -> None:
        """Ask every worker to exit; kill those that do not within 2 s."""
        for w in self.workers:
            try:
                w.tasks.put(None)
            except (OSError, ValueError):
                pass
        for w in self.workers:
            w.process.join(timeout=2)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(timeout=2)
            w.retired.set()


def start_spawned(process) -> None:
    """Start a spawn-context process without the parent's __main__.

    spawn re-runs the parent's __main__ in the child; under `streamlit run` (and after AppTest)
    that is the app script itself, which would start a scheduler inside the child. A bare
    stand-in while the child is prepared keeps the child to importing what its target needs.
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        process.start()
    finally:
        sys.modules["__main__"] = main


def _worker_main(index: int, tasks, results, cancel, threads: int, memory: tuple) -> None:
    """The worker process's entry point: its code, and torch, live in bsdemo.engine.worker."""
    from bsdemo.engine.worker import main

    main(index, tasks, results, cancel, threads, memory)
