"""Data parallelism for real (lesson 10): P processes in a torch.distributed process group (gloo
on the CPU), each computing the gradient of its share of one global batch, the gradients
averaged by all-reduce, every process taking the same optimizer step.

`ddp_check` trains `steps` steps that way and, in this process, the same steps with the whole
global batch at once; the two end with the same parameters up to float32 rounding (the mean of
P shard means of equal shards is the mean of the batch). Each step's time is split into compute
(forward and backward on the shard) and the all-reduce, and the group's samples/s is set
against one process's on the same global batch: the scaling efficiency.

The processes are fresh interpreters (bsdemo.engine.group), so a scheduler worker can start
them too; they have exited, or been killed, when the check returns or raises: none outlives it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist

from bsdemo import bounds
from bsdemo.config import RunConfig
from bsdemo.engine.descent import summed_loss
from bsdemo.engine.group import member_threads, run_group
from bsdemo.engine.measure import THREAD_CLOCK, WALL_CLOCK, HostLoad, step_clock
from bsdemo.engine.memory import SavedActivations
from bsdemo.engine.train import prepare
from bsdemo.jobkinds import check_global_batch, check_stop
from bsdemo.units import fixed, sig

EQUIVALENT = 1e-5  # largest parameter difference that counts as float32 rounding


def step_batches(n: int, global_batch: int, steps: int, seed: int) -> list[torch.Tensor]:
    """The sample indices of each step's global batch: one fixed draw every process shares."""
    order = torch.Generator().manual_seed(seed + 3)
    return [torch.randperm(n, generator=order)[:global_batch] for _ in range(steps)]


def flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def compute_clock() -> tuple[Callable[[], float], str]:
    """(clock, its name) for a process's own compute: its thread's CPU time where one torch
    thread does all the work (a busy machine does not lengthen it), else the wall clock."""
    return step_clock(torch.device("cpu"))


def timed(values: list[float]) -> float:
    """The median of a check's per-step times, the first step (warm-up) left out."""
    return statistics.median(values[1:] or values)


def member(rank: int, world: int, settings: dict, steps: int) -> dict:
    """One process of the group (bsdemo.engine.group runs it): its shard of every step,
    all-reduce, the same SGD step; rank 0 also returns the parameters (as numpy). Compute is
    timed by compute_clock; the all-reduce by the wall clock from the moment both processes
    reached it (a barrier first, untimed), so a process the machine kept waiting does not count
    as communication."""
    cfg = RunConfig(**settings)
    run = prepare(cfg)
    model, x, y = run.model, run.data.x_train, run.data.y_train
    params = [p for p in model.parameters() if p.requires_grad]
    global_batch = cfg.batch_size * world
    tick, _ = compute_clock()
    compute, reduce = [], []
    for idx in step_batches(len(y), global_batch, steps, cfg.seed):
        shard = idx[rank * cfg.batch_size : (rank + 1) * cfg.batch_size]
        t0 = tick()
        loss = summed_loss(model, x[shard], y[shard]) / len(shard)
        grads = torch.autograd.grad(loss, params)
        compute.append(tick() - t0)
        flat = torch.cat([g.flatten() for g in grads])
        dist.barrier()
        t1 = time.perf_counter()
        dist.all_reduce(flat)  # one bucket: the sum over the group
        flat /= world
        reduce.append(time.perf_counter() - t1)
        with torch.no_grad():
            offset = 0
            for p in params:
                p.sub_(cfg.lr * flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
    dist.barrier()
    return {
        "params": flat_parameters(model).numpy().copy() if rank == 0 else None,
        "compute_s": timed(compute),
        "allreduce_s": timed(reduce),
    }


def one_process(
    cfg: RunConfig,
    global_batch: int,
    steps: int,
    threads: int,
    should_stop: Callable[[], bool] | None = None,
    wall: bool = False,
) -> tuple[torch.Tensor, float, int]:
    """A group's steps in this process with the whole global batch, on `threads` torch threads
    (one member's share of the cores: the one worker a group's speed-up is counted against):
    (parameters, median step seconds by compute_clock — the wall clock if `wall` —, bytes
    saved for the backward, counted in the first step only, so the hooks stay off the
    others)."""
    run = prepare(cfg)
    model, x, y = run.model, run.data.x_train, run.data.y_train
    params = [p for p in model.parameters() if p.requires_grad]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    tick = time.perf_counter if wall else compute_clock()[0]
    try:
        times, saved = [], 0
        for i, idx in enumerate(step_batches(len(y), global_batch, steps, cfg.seed)):
            check_stop(should_stop)  # a step of the global batch is long
            t0 = tick()
            with SavedActivations(params) if i == 0 else contextlib.nullcontext() as counter:
                loss = summed_loss(model, x[idx], y[idx]) / len(idx)
            saved = counter.bytes if i == 0 else saved
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for p, g in zip(params, grads, strict=True):
                    p.sub_(cfg.lr * g)
            times.append(tick() - t0)
    finally:
        torch.set_num_threads(before)
    return flat_parameters(model), timed(times), saved


def ddp_records(
    cfg: RunConfig, processes: int = 2, steps: int = 5, should_stop: Callable[[], bool] | None = None
) -> Iterator[dict[str, Any]]:
    """Train `steps` steps in one process, then the same steps data-parallel in a group of
    `processes` (bounds.in_turn: the other way round once more if the pair breaks its bound).
    Yields a ddp_progress record as soon as the one process is timed — the group's fresh
    interpreters take seconds to start —, then the ddp_check record."""
    cfg = dataclasses.replace(cfg.validated()[0], accumulation_steps=1, device="cpu")
    check_global_batch(cfg, processes)
    load = HostLoad()
    threads = member_threads(processes)
    global_batch = cfg.batch_size * processes

    def single():
        return one_process(cfg, global_batch, steps, threads, should_stop)

    def group():
        return run_group(
            "bsdemo.engine.ddp:member",
            processes,
            {"settings": dataclasses.asdict(cfg), "steps": steps},
            should_stop,
        )

    def breach(alone, reports) -> str | None:
        step = max(r["compute_s"] for r in reports) + max(r["allreduce_s"] for r in reports)
        return bounds.speedup_breach(alone[1] / step, processes, "the group")

    def progress(alone) -> dict[str, Any]:
        return {
            "kind": "ddp_progress",
            "global_batch_size": global_batch,
            "single_process_step_s": alone[1],
            "single_process_threads": threads,
            "message": f"One process on {threads} thread(s): {fixed(alone[1] * 1e3, 1)} ms a step "
            f"for the global batch of {global_batch}. Starting the group's "
            f"{processes} processes (each loads PyTorch)…",
        }

    (single, single_s, _), reports, problem, twice = yield from bounds.in_turn(
        single, group, breach, progress
    )
    ddp_params = torch.from_numpy(reports[0]["params"])
    compute = max(r["compute_s"] for r in reports)  # a step waits for the slowest process
    allreduce = max(r["allreduce_s"] for r in reports)
    diff = float((ddp_params - single).abs().max())
    step_s = compute + allreduce
    yield {
        "kind": "ddp_check",
        "processes": processes,
        "backend": "gloo",
        "per_process_batch_size": cfg.batch_size,
        "global_batch_size": global_batch,
        "steps": steps,
        "max_abs_param_diff": diff,
        "equivalent": diff <= EQUIVALENT,
        "gradient_bytes": single.numel() * single.element_size(),  # what each all-reduce sums
        "compute_s": compute,
        "allreduce_s": allreduce,
        "step_s": step_s,
        "single_process_step_s": single_s,
        "single_process_threads": threads,
        "clock": THREAD_CLOCK if threads == 1 else WALL_CLOCK,  # compute_clock's, there
        "samples_per_sec": global_batch / step_s,
        "single_process_samples_per_sec": global_batch / single_s,
        "scaling_efficiency": single_s / step_s / processes,
        "remeasured": twice,
        "others_busy_share": (busy := load.others_share(children=True)),
        "too_noisy": bounds.too_noisy(problem, busy),
        "message": f"{processes} processes × batch {cfg.batch_size} = global batch "
        f"{global_batch}: parameters after {steps} steps differ from one process's "
        f"by at most {sig(diff, 2)}; a step {fixed(step_s * 1e3, 1)} ms "
        f"({fixed(allreduce * 1e3, 1)} ms all-reduce) against {fixed(single_s * 1e3, 1)} ms "
        f"in one process on {threads} thread(s).",
    }


def ddp_check(
    cfg: RunConfig, processes: int = 2, steps: int = 5, should_stop: Callable[[], bool] | None = None
) -> dict[str, Any]:
    """The ddp_check record (ddp_records' last)."""
    *_, record = ddp_records(cfg, processes, steps, should_stop)
    return record
