"""The worker process's loop: import torch once, warm up, then run jobs until told to stop.

Started by bsdemo.jobs.Scheduler (spawn context); talks to it only through queues: a task queue
of its own, a shared results queue, and a shared value naming a job to cancel.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import queue
import time

import torch

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.accumulation import accumulation_check
from bsdemo.engine.finder import find_batch_size
from bsdemo.engine.measure import device_info, resolve_device
from bsdemo.engine.sweep import sweep
from bsdemo.engine.train import train

FLUSH_INTERVAL_S = 0.05  # step events are batched: one queue message per 50 ms, not per step


def main(index: int, tasks, results, cancel, threads: int) -> None:
    """Run jobs from `tasks` until a None arrives or the server process is gone."""
    torch.set_num_threads(threads)
    # warm-up: first use of the optimizer, autograd and the digits data costs ~1 s once
    for _ in train(RunConfig(epochs=None, max_steps=2)):
        pass
    results.put(("hello", index, device_info(resolve_device("auto"))))
    parent = mp.parent_process()
    while True:
        try:
            task = tasks.get(timeout=1.0)
        except queue.Empty:
            if parent is not None and not parent.is_alive():
                return  # the server died without telling us: do not linger holding a GPU
            continue
        if task is None:
            return
        job_id, kind, settings, options = task
        _run_job(index, job_id, kind, settings, options, results, cancel)


def _events(kind: str, cfg: RunConfig, options: dict, should_stop):
    """The job's records as dicts, from the engine function its kind names."""
    if kind == "sweep":
        yield from sweep(cfg, should_stop=should_stop, **options)
    elif kind == "find":
        yield from find_batch_size(cfg, **options)
    elif kind == "accum_check":
        yield accumulation_check(cfg, **options)
    else:
        for event in train(cfg, should_stop=should_stop):
            yield event.to_dict()


def _run_job(index: int, job_id: int, kind: str, settings: dict, options: dict, results,
             cancel) -> None:
    batch: list[dict] = []
    last_flush = time.monotonic()
    try:
        cfg = RunConfig(**settings)
        for event in _events(kind, cfg, options, lambda: cancel.value == job_id):
            batch.append(event)
            now = time.monotonic()
            # the first step goes at once: it is the one a student is waiting to see
            if event["kind"] != "step" or event["step"] == 1 or now - last_flush >= FLUSH_INTERVAL_S:
                results.put(("events", index, job_id, batch))
                batch, last_flush = [], now
        end = None
    except ConfigError as exc:
        end = {"kind": "end", "status": "failed", "message": str(exc), "summary": {}}
    except Exception as exc:  # noqa: BLE001 - any engine failure becomes a failed job, not a dead worker
        end = {"kind": "end", "status": "failed", "summary": {},
               "message": f"The run failed: {type(exc).__name__}: {exc}"}
    if batch or end:
        results.put(("events", index, job_id, batch + ([end] if end else [])))
    # an idle warm worker holds no cached device memory: admission counts only running jobs
    # (gc first: a cycle, e.g. through an exception's frames, can keep tensors alive). Not on
    # the CPU, where nothing is cached and a full collection costs ~0.1 s per job.
    if torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()
