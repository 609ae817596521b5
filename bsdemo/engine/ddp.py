"""Data parallelism for real (lesson 10): P processes in a torch.distributed process group (gloo
on the CPU), each computing the gradient of its share of one global batch, the gradients
averaged by all-reduce, every process taking the same optimizer step.

`ddp_check` trains `steps` steps that way and, in this process, the same steps with the whole
global batch at once; the two end with the same parameters up to float32 rounding (the mean of
P shard means of equal shards is the mean of the batch). Each step's time is split into compute
(forward and backward on the shard) and the all-reduce, and the group's samples/s is set
against one process's on the same global batch: the scaling efficiency.

The processes are started here (spawn), joined before it returns, and killed if anything fails
or the caller stops it: none outlives the check.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.descent import summed_loss
from bsdemo.engine.train import prepare
from bsdemo.jobkinds import JobStopped

EQUIVALENT = 1e-5  # largest parameter difference that counts as float32 rounding
JOIN_S = 30.0  # how long a finished group may take to exit before it is killed


def _batches(n: int, global_batch: int, steps: int, seed: int) -> list[torch.Tensor]:
    """The sample indices of each step's global batch: one fixed draw every process shares."""
    order = torch.Generator().manual_seed(seed + 3)
    return [torch.randperm(n, generator=order)[:global_batch] for _ in range(steps)]


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _member(rank: int, world: int, init: str, settings: dict, steps: int, results) -> None:
    """One process of the group: its shard of every step, all-reduce, the same SGD step."""
    try:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        cfg = RunConfig(**settings)
        run = prepare(cfg)
        model, x, y = run.model, run.data.x_train, run.data.y_train
        params = [p for p in model.parameters() if p.requires_grad]
        global_batch = cfg.batch_size * world
        compute, reduce = [], []
        for idx in _batches(len(y), global_batch, steps, cfg.seed):
            shard = idx[rank * cfg.batch_size:(rank + 1) * cfg.batch_size]
            t0 = time.perf_counter()
            loss = summed_loss(model, x[shard], y[shard]) / len(shard)
            grads = torch.autograd.grad(loss, params)
            t1 = time.perf_counter()
            flat = torch.cat([g.flatten() for g in grads])
            dist.all_reduce(flat)  # one bucket: the sum over the group
            flat /= world
            t2 = time.perf_counter()
            with torch.no_grad():
                offset = 0
                for p in params:
                    p.sub_(cfg.lr * flat[offset:offset + p.numel()].view_as(p))
                    offset += p.numel()
            compute.append(t1 - t0)
            reduce.append(t2 - t1)
        dist.barrier()
        # a numpy copy, pickled by value: a tensor would travel as a shared-memory handle that
        # dies with this process
        results.put((rank, "ok", _flat(model).numpy().copy() if rank == 0 else None,
                     statistics.median(compute), statistics.median(reduce)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the check
        results.put((rank, "failed", f"{type(exc).__name__}: {exc}"[:300], None, None))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _single(cfg: RunConfig, world: int, steps: int) -> tuple[torch.Tensor, float]:
    """The same steps in this process with the whole global batch: (parameters, median s)."""
    run = prepare(cfg)
    model, x, y = run.model, run.data.x_train, run.data.y_train
    params = [p for p in model.parameters() if p.requires_grad]
    times = []
    for idx in _batches(len(y), cfg.batch_size * world, steps, cfg.seed):
        t0 = time.perf_counter()
        grads = torch.autograd.grad(summed_loss(model, x[idx], y[idx]) / len(idx), params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p.sub_(cfg.lr * g)
        times.append(time.perf_counter() - t0)
    return _flat(model), statistics.median(times)


def ddp_check(cfg: RunConfig, processes: int = 2, steps: int = 5,
              should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Train `steps` data-parallel steps in a group of `processes`, and the same steps in one
    process; the ddp_check record."""
    cfg = dataclasses.replace(cfg.validated()[0], accumulation_steps=1, device="cpu")
    if cfg.batch_size * processes > cfg.train_samples:  # every shard must be a full one
        raise ConfigError("batch_size", cfg.batch_size,
                          f"at most {cfg.train_samples // processes} with {processes} processes: "
                          f"the global batch must fit the {cfg.train_samples:,} training samples")
    context = mp.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory(prefix="bsdemo-ddp-") as folder:
        init = f"file://{os.path.join(folder, 'rendezvous')}"
        members = [context.Process(target=_member, daemon=True, name=f"bsdemo-ddp-{rank}",
                                   args=(rank, processes, init, dataclasses.asdict(cfg), steps,
                                         results)) for rank in range(processes)]
        for member in members:
            member.start()
        try:
            reports = _collect(members, results, processes, should_stop)
        finally:
            for member in members:
                member.join(timeout=JOIN_S)
                if member.is_alive():
                    member.kill()
                    member.join()
    failed = [r for r in reports if r[1] != "ok"]
    if failed:
        raise RuntimeError(f"process {failed[0][0]} failed: {failed[0][2]}")
    ddp_params = torch.from_numpy(next(r[2] for r in reports if r[0] == 0))
    compute = max(r[3] for r in reports)  # a step waits for the slowest process
    allreduce = max(r[4] for r in reports)
    single, single_s = _single(cfg, processes, steps)
    diff = float((ddp_params - single).abs().max())
    global_batch = cfg.batch_size * processes
    step_s = compute + allreduce
    return {"kind": "ddp_check", "processes": processes, "backend": "gloo",
            "per_process_batch_size": cfg.batch_size, "global_batch_size": global_batch,
            "steps": steps, "max_abs_param_diff": diff, "equivalent": diff <= EQUIVALENT,
            "compute_s": compute, "allreduce_s": allreduce, "step_s": step_s,
            "single_process_step_s": single_s,
            "samples_per_sec": global_batch / step_s,
            "single_process_samples_per_sec": global_batch / single_s,
            "scaling_efficiency": single_s / step_s / processes,
            "message": f"{processes} processes × batch {cfg.batch_size} = global batch "
                       f"{global_batch}: parameters after {steps} steps differ from one process's "
                       f"by at most {diff:.2g}; a step {step_s * 1e3:.1f} ms "
                       f"({allreduce * 1e3:.1f} ms all-reduce) against {single_s * 1e3:.1f} ms "
                       "in one process."}


def _collect(members, results, processes: int, should_stop) -> list[tuple]:
    """Every member's report; JobStopped if asked to stop, RuntimeError if one died."""
    reports: list[tuple] = []
    while len(reports) < processes:
        if should_stop is not None and should_stop():
            for member in members:
                member.kill()
            raise JobStopped("Stopped before it finished.")
        try:
            reports.append(results.get(timeout=0.2))
        except queue.Empty:
            dead = [m for m in members if not m.is_alive() and m.exitcode not in (0, None)]
            if dead and len(reports) < processes:
                time.sleep(0.5)  # a report may still be in the pipe
                while True:
                    try:
                        reports.append(results.get_nowait())
                    except queue.Empty:
                        break
                if len(reports) < processes:
                    raise RuntimeError(f"a process of the group exited with code "
                                       f"{dead[0].exitcode} before reporting") from None
    return reports
