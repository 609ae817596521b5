"""The worker process's loop: import torch once, warm up, then run jobs until told to stop.

Started by bsdemo.scheduler.Scheduler (spawn context); talks to it only through queues: a task queue
of its own, a shared results queue, and a shared value naming a job to cancel. Every job kind is
stopped the same way: `should_stop()` is asked between steps, and says stop when the job was
cancelled (Stop, or the unattended-run reaper) or, for the kinds other than training (whose
engine keeps its own cap), when the whole job reached its time cap.
"""

from __future__ import annotations

import gc
import importlib
import multiprocessing as mp
import queue
import time

import torch

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.flops import device_peak_flops
from bsdemo.engine.measure import RunClock, device_info, limit_address_space, resolve_device
from bsdemo.engine.train import is_out_of_memory, train
from bsdemo.jobkinds import KINDS, RESULT_KINDS, JobStopped
from bsdemo.lifetime import die_with
from bsdemo.units import setting

FLUSH_INTERVAL_S = 0.05  # step events are batched: one queue message per 50 ms, not per step


def main(index: int, tasks, results, cancel, threads: int, memory: tuple = (None, 0.1)) -> None:
    """Run jobs from `tasks` until a None arrives or the server process is gone.

    memory: (the limits' device_memory or None, memory_margin): on the CPU the worker's address
    space is capped at what it holds after warm-up plus the memory admission shares out (and a
    slack), so a run the memory model underestimates ends as an out-of-memory result instead of
    taking the host down.
    """
    parent = mp.parent_process()
    if parent is not None:
        die_with(parent.pid)  # a server killed outright takes its workers with it
    # a full results pipe nobody reads must not keep this process from exiting
    results.cancel_join_thread()
    torch.set_num_threads(threads)
    # warm-up: first use of the optimizer, autograd and the digits data costs ~1 s once
    for _ in train(RunConfig(epochs=None, max_steps=2)):
        pass
    info = device_info(resolve_device("auto"))
    device_memory, margin = memory
    share = device_memory or info.get("total_memory_bytes")
    info["memory_ceiling_bytes"] = (
        limit_address_space(int(share * (1 - margin))) if info["type"] == "cpu" and share else None
    )
    # the peak (on the CPU its first probe, while this worker is idle): admission bounds the
    # time of a job's largest step by it. The higher of the fp32 and TF32 peaks, so the bound
    # stays a lower bound whatever math mode a model runs in.
    info["peak_flops"] = device_peak_flops(info, ["matmuls", "convolutions"])[0]
    results.put(("hello", index, info))
    turns: dict[int, _Turn] = {}  # the jobs it holds, in the order their turns come
    while True:
        try:  # nothing to step: wait for a task; else only look
            task = tasks.get(timeout=1.0) if not turns else tasks.get_nowait()
        except queue.Empty:
            task = False
            if not turns and parent is not None and not parent.is_alive():
                return  # the server died without telling us: do not linger holding a GPU
        if task is None:
            return
        if task:
            if task[0] == "stop":  # one of its jobs is to stop at its next turn
                if task[1] in turns:
                    turns[task[1]].stop.requested = True
                continue
            turn = _Turn(index, task, results, cancel)
            turns = {turn.job_id: turn, **turns}  # a new job's first turn comes first
            continue  # more may be waiting: each starts before anyone's next turn
        alone = len(turns) == 1
        for job_id, turn in list(turns.items()):
            if turn.go(alone):
                del turns[job_id]
                _settle()


# a job's turn (~100 steps at batch 1, ~20 at 256): between two, the worker looks for new jobs
# and stops, and when it holds several, the next one has its turn. Each switch finds the caches
# cold: bench/turns_bench.py (12 runs, 1 thread) measured steps 7-9 % slower than alone with
# 20 ms turns, within the runs' spread (0.98-1.03) with 50 ms and 100 ms; a turn per step cost
# +30 % at batch 1
TURN_S = 0.05


class _StopCheck:
    """should_stop() for one job: its stop (the shared flag naming it, or a stop message while
    its worker holds several jobs), or the whole job's time cap."""

    def __init__(self, cancel, job_id: int, wall_s: float | None):
        self.cancel, self.job_id, self.wall_s = cancel, job_id, wall_s
        self.deadline = time.monotonic() + wall_s if wall_s else None
        self.reason: str | None = None
        self.requested = False

    def __call__(self) -> bool:
        if self.reason is None:
            if self.requested or self.cancel.value == self.job_id:
                self.reason = "Stopped before it finished."
            elif self.deadline is not None and time.monotonic() >= self.deadline:
                self.reason = (
                    f"Stopped at this server's time cap of {setting(self.wall_s)} s for the "
                    "whole job; what it measured until then is shown."
                )
        return self.reason is not None


def engine_function(kind: str):
    """The engine function a job kind declares (bsdemo.jobkinds.Kind.entry), imported."""
    module, name = KINDS[kind].entry.split(":")
    return getattr(importlib.import_module(module), name)


def _events(kind: str, cfg: RunConfig, options: dict, should_stop, clock: RunClock):
    """The job's records as dicts, from the engine function its kind names."""
    if kind == "train":  # a training run may take turns with others (a CPU worker holds several)
        for event in train(cfg, should_stop=should_stop, clock=clock):
            yield event.to_dict()
        return
    run = engine_function(kind)
    if KINDS[kind].one_record:
        yield run(cfg, should_stop=should_stop, **options)
    else:
        yield from run(cfg, should_stop=should_stop, **options)


class _Turn:
    """One job the worker holds: its records, stepped a turn at a time.

    A job is stepped in turns of about TURN_S (its first turn ends at its first step). When the
    scheduler has given the worker several (training runs on a CPU, bsdemo.scheduler.pool),
    their turns come in order: one step at a time on the one thread, so no step is ever timed
    beside another, and each run's clocks (measure.RunClock) count its own turns only.
    """

    def __init__(self, index: int, task: tuple, results, cancel):
        job_id, self.kind, self.settings, self.options, wall_s = task
        self.index, self.job_id, self.results = index, job_id, results
        self.stop = _StopCheck(cancel, job_id, wall_s)
        self.clock = RunClock()
        self.clock.leave()  # its clocks start at its first turn
        self.records = None  # the engine's generator, made on the first turn
        self.batch: list[dict] = []
        self.last_flush = time.monotonic()
        self.result: dict | None = None

    def go(self, alone: bool) -> bool:
        """Step the job for a turn; whether it has ended. Its records go at the turn's end,
        unless it is `alone` (the next turn is its own: they go every FLUSH_INTERVAL_S)."""
        self.clock.back()
        end, done = None, False
        try:
            if self.records is None:
                self.records = _events(
                    self.kind, RunConfig(**self.settings), self.options, self.stop, self.clock
                )
            until = time.monotonic() + TURN_S
            for event in self.records:
                self._file(event)
                # a job's first turn ends at its first step: every student who pressed Run
                # sees a first point before anyone's run takes a second turn
                if time.monotonic() >= until or (
                    event["kind"] == "step" and event["step"] == 1 and not alone
                ):
                    break
            else:
                done = True
                end = (
                    None if self.kind == "train" else _measured_end(self.kind, self.result, self.stop.reason)
                )
        except JobStopped:
            done, end = (
                True,
                {
                    "kind": "end",
                    "status": "cancelled",
                    "summary": {},
                    "message": self.stop.reason or "Stopped before it finished.",
                },
            )
        except ConfigError as exc:
            done, end = True, {"kind": "end", "status": "failed", "message": str(exc), "summary": {}}
        except Exception as exc:  # noqa: BLE001 - any engine failure becomes a failed job, not a dead worker
            text = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:400] if str(exc) else ''}"
            done = True
            if is_out_of_memory(exc):  # e.g. building the model or data past the worker's ceiling
                end = {
                    "kind": "end",
                    "status": "oom",
                    "summary": {},
                    "message": f"Out of memory before training started: {text}",
                }
            else:
                end = {"kind": "end", "status": "failed", "summary": {}, "message": f"The run failed: {text}"}
        finally:
            self.clock.leave()
        # a shared turn's records go at its end (its page must not wait for its next turn)
        if end or (self.batch and not alone):
            self.results.put(("events", self.index, self.job_id, self.batch + ([end] if end else [])))
            self.batch, self.last_flush = [], time.monotonic()
        return done

    def _file(self, event: dict) -> None:
        """Batch a record: one queue message per FLUSH_INTERVAL_S, not per step."""
        self.batch.append(event)
        if event["kind"] in RESULT_KINDS:
            self.result = event
        now = time.monotonic()
        # the first step goes at once: it is the one a student is waiting to see
        if event["kind"] != "step" or event["step"] == 1 or now - self.last_flush >= FLUSH_INTERVAL_S:
            self.results.put(("events", self.index, self.job_id, self.batch))
            self.batch, self.last_flush = [], now


def _settle() -> None:
    """After a job: an idle warm worker holds no cached device memory, so admission counts only
    running jobs (gc first: a cycle, e.g. through an exception's frames, can keep tensors
    alive). Not on the CPU, where nothing is cached and a full collection costs ~0.1 s a job."""
    if torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()


def _measured_end(kind: str, result: dict | None, stopped: str | None) -> dict:
    """The end record of a sweep, finder or accumulation check."""
    if stopped is not None:
        return {"kind": "end", "status": "cancelled", "summary": {}, "message": stopped}
    name = KINDS[kind].ended
    return {
        "kind": "end",
        "status": "completed",
        "summary": {},
        "message": (result or {}).get("message") or f"{name} completed.",
    }
