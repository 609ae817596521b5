"""Model parallelism, shown at small scale (lesson 10): the MLP cut into two stages on two
processes of a gloo group, trained with a GPipe schedule.

Every step splits the batch into micro-batches. Stage 0 runs the forward pass of each and sends
its activations to stage 1, which finishes the forward pass and the loss; after the last forward
pass, stage 1 runs each micro-batch's backward pass (last first) and sends the gradient of its
input back to stage 0, which finishes the backward pass. Then both take the same SGD step. The
check measures:

- each stage's memory: its parameters, and the bytes autograd saved for the backward while every
  micro-batch was in flight (counted as the engine's memory accounting counts them: each storage
  once, parameters apart);
- each stage's forward and backward time per micro-batch, and the transfer of one micro-batch's
  activations between the processes (a ping-pong, halved);
- the step's wall time, set against the same steps in one process with the whole model;
- the parameters after the steps against that one process's (equal up to float32 rounding).

`gpipe_schedule` draws the idle "bubble" from the measured stage times. On two CPU processes of
one machine this is a demonstration of the mechanism, not a speed-up: the stages share the cores
and memory a real pipeline would spread over devices.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from bsdemo import bounds
from bsdemo.config import RunConfig
from bsdemo.engine.ddp import EQUIVALENT, compute_clock, flat_parameters, one_process, step_batches, timed
from bsdemo.engine.group import member_threads, run_group
from bsdemo.engine.measure import HostLoad
from bsdemo.engine.memory import SavedActivations, tensor_bytes
from bsdemo.engine.train import prepare
from bsdemo.jobkinds import check_pipeline
from bsdemo.tunables import PIPELINE_STAGES as STAGES
from bsdemo.units import fixed, percent, sig

PING_ROUNDS = 30


def split_stages(model: nn.Module) -> list[nn.Sequential]:
    """The MLP's layers in two halves: the first hidden layers, and the rest with the head."""
    layers = list(model.net)  # Flatten, then (Linear, norm, ReLU) per hidden layer, then Linear
    per_layer = 3
    hidden = (len(layers) - 2) // per_layer
    cut = 1 + per_layer * math.ceil(hidden / 2)
    return [nn.Sequential(*layers[:cut]), nn.Sequential(*layers[cut:])]


def member(rank: int, world: int, settings: dict, steps: int, micro_batches: int) -> dict:
    """One stage's process (bsdemo.engine.group runs it). Each micro-batch's forward and
    backward are timed by compute_clock (a busy machine does not lengthen them); the step, whose
    stages wait on each other, by the wall clock."""
    cfg = RunConfig(**settings)
    run = prepare(cfg)
    stage = split_stages(run.model)[rank]
    params = [p for p in stage.parameters() if p.requires_grad]
    x, y = run.data.x_train, run.data.y_train
    forward, backward, step_s, saved = [], [], [], 0
    tick, _ = compute_clock()
    for i, idx in enumerate(step_batches(len(y), cfg.batch_size, steps, cfg.seed)):
        chunks = idx.split(math.ceil(len(idx) / micro_batches))
        dist.barrier()  # both stages start the step together: its wall time is the pipeline's
        t_step = time.perf_counter()
        held = []
        # what is held is the same every step: counted in the first, the hooks off the others
        with SavedActivations(params) if i == 0 else contextlib.nullcontext() as counter:
            for c in chunks:
                if rank == 0:
                    t0 = tick()
                    out = stage(x[c])
                    forward.append(tick() - t0)
                    dist.send(out.detach().contiguous(), 1)
                    held.append(out)
                else:
                    inp = torch.empty(len(c), cfg.width)
                    dist.recv(inp, 0)
                    inp.requires_grad_()
                    t0 = tick()
                    loss = F.cross_entropy(stage(inp), y[c], reduction="sum") / len(idx)
                    forward.append(tick() - t0)
                    held.append((inp, loss))
        saved = counter.bytes if i == 0 else saved
        for m in reversed(range(len(chunks))):
            if rank == 1:
                inp, loss = held[m]
                t0 = tick()
                loss.backward()
                backward.append(tick() - t0)
                dist.send(inp.grad.contiguous(), 0)
            else:
                grad = torch.empty_like(held[m])
                dist.recv(grad, 1)
                t0 = tick()
                held[m].backward(grad)
                backward.append(tick() - t0)
        with torch.no_grad():
            for p in params:
                p.sub_(cfg.lr * p.grad)
                p.grad = None
        dist.barrier()
        step_s.append(time.perf_counter() - t_step)
    transfer = _ping(rank, (math.ceil(cfg.batch_size / micro_batches), cfg.width))
    return {
        "params": flat_parameters(stage).numpy().copy(),
        "parameter_bytes": tensor_bytes(params),
        "saved_activation_bytes": saved,
        "forward_s": statistics.median(forward),
        "backward_s": statistics.median(backward),
        "step_s": timed(step_s),
        "transfer_s": transfer,
    }


def _ping(rank: int, shape: tuple[int, int]) -> float:
    """One micro-batch's activations sent from stage 0 to stage 1: half the lower quartile of
    PING_ROUNDS round trips, timed on stage 0 (the stages start together; stage 1's own clock
    would count its wait for stage 0's first send). The lower quartile is the link's cost when
    both processes were running: on a busy machine most round trips also wait for a process to
    be scheduled again, which is not the transfer. Both stages return it."""
    buffer = torch.zeros(shape)
    rounds = []
    dist.barrier()
    for _ in range(PING_ROUNDS):
        t0 = time.perf_counter()
        if rank == 0:
            dist.send(buffer, 1)
            dist.recv(buffer, 1)
        else:
            dist.recv(buffer, 0)
            dist.send(buffer, 0)
        rounds.append(time.perf_counter() - t0)
    half = torch.tensor([statistics.quantiles(rounds, n=4)[0] / 2 if rank == 0 else 0.0], dtype=torch.float64)
    dist.broadcast(half, 0)
    return float(half)


def gpipe_schedule(
    forward: list[float], backward: list[float], transfer: float, micro_batches: int
) -> dict[str, Any]:
    """When each stage works on each micro-batch under GPipe, from per-micro-batch stage times
    (forward[s], backward[s]) and one transfer's time: the blocks, the step's length and the
    share of it the stages sit idle (the bubble)."""
    stages = len(forward)
    blocks, done = [], {}
    free = [0.0] * stages
    for m in range(micro_batches):  # forward: stage s takes micro-batch m after stage s-1 sent it
        for s in range(stages):
            ready = done[("F", s - 1, m)] + transfer if s else 0.0
            start = max(free[s], ready)
            done[("F", s, m)] = free[s] = start + forward[s]
            blocks.append({"stage": s, "pass": "forward", "micro_batch": m, "start": start, "end": free[s]})
    for m in reversed(range(micro_batches)):  # backward: the last stage first, last micro-batch first
        for s in reversed(range(stages)):
            ready = done[("B", s + 1, m)] + transfer if s < stages - 1 else 0.0
            start = max(free[s], ready)
            done[("B", s, m)] = free[s] = start + backward[s]
            blocks.append({"stage": s, "pass": "backward", "micro_batch": m, "start": start, "end": free[s]})
    length = max(free)
    busy = micro_batches * (sum(forward) + sum(backward))
    return {
        "blocks": blocks,
        "step_s": length,
        "bubble": 1 - busy / (stages * length),
        "ideal_bubble": (stages - 1) / (micro_batches + stages - 1),
    }


def pipeline_records(
    cfg: RunConfig, micro_batches: int = 4, steps: int = 5, should_stop: Callable[[], bool] | None = None
) -> Iterator[dict[str, Any]]:
    """Train `steps` steps in one process, then the same steps pipelined on two stage processes
    (bounds.in_turn). Yields a pipeline_progress record once the one process is timed, then the
    pipeline_check record."""
    cfg = dataclasses.replace(cfg.validated()[0], accumulation_steps=1, device="cpu")
    check_pipeline(cfg, micro_batches)
    load = HostLoad()
    threads = member_threads(STAGES)

    def single():
        # the wall clock, as the stages' step (they wait on each other), on one stage's cores
        return one_process(cfg, cfg.batch_size, steps, threads, should_stop, wall=True)

    def group():
        return run_group(
            "bsdemo.engine.pipeline:member",
            STAGES,
            {"settings": dataclasses.asdict(cfg), "steps": steps, "micro_batches": micro_batches},
            should_stop,
        )

    def breach(alone, reports) -> str | None:
        return bounds.speedup_breach(
            alone[1] / max(r["step_s"] for r in reports), STAGES, "the pipelined step"
        )

    def progress(alone) -> dict[str, Any]:
        return {
            "kind": "pipeline_progress",
            "batch_size": cfg.batch_size,
            "single_process_step_s": alone[1],
            "single_activation_bytes": alone[2],
            "message": f"The whole model in one process on {threads} thread(s): "
            f"{fixed(alone[1] * 1e3, 1)} ms a step at batch {cfg.batch_size}. Starting "
            f"the {STAGES} stage processes (each loads PyTorch)…",
        }

    (single, single_s, single_saved), reports, problem, twice = yield from bounds.in_turn(
        single, group, breach, progress
    )
    piped = torch.cat([torch.from_numpy(r["params"]) for r in reports])
    diff = float((piped - single).abs().max())
    transfer = max(r["transfer_s"] for r in reports)
    schedule = gpipe_schedule(
        [r["forward_s"] for r in reports], [r["backward_s"] for r in reports], transfer, micro_batches
    )
    step_s = max(r["step_s"] for r in reports)
    yield {
        "kind": "pipeline_check",
        "stages": STAGES,
        "micro_batches": micro_batches,
        "batch_size": cfg.batch_size,
        "steps": steps,
        "max_abs_param_diff": diff,
        "equivalent": diff <= EQUIVALENT,
        "stage_parameter_bytes": [r["parameter_bytes"] for r in reports],
        "stage_activation_bytes": [r["saved_activation_bytes"] for r in reports],
        "single_parameter_bytes": sum(r["parameter_bytes"] for r in reports),
        "single_activation_bytes": single_saved,
        "stage_forward_s": [r["forward_s"] for r in reports],
        "stage_backward_s": [r["backward_s"] for r in reports],
        "transfer_s": transfer,
        "transfer_bytes": math.ceil(cfg.batch_size / micro_batches) * cfg.width * 4,
        "step_s": step_s,
        "single_process_step_s": single_s,
        "remeasured": twice,
        "others_busy_share": (busy := load.others_share(children=True)),
        "too_noisy": bounds.too_noisy(problem, busy),
        "schedule": schedule["blocks"],
        "schedule_step_s": schedule["step_s"],
        "bubble": schedule["bubble"],
        "ideal_bubble": schedule["ideal_bubble"],
        "message": f"Two stages, {micro_batches} micro-batches of batch {cfg.batch_size}: "
        f"parameters after {steps} steps differ from one process's by at most "
        f"{sig(diff, 2)}; the stages sat idle {percent(schedule['bubble'], 0)} of a step.",
    }


def pipeline_check(
    cfg: RunConfig, micro_batches: int = 4, steps: int = 5, should_stop: Callable[[], bool] | None = None
) -> dict[str, Any]:
    """The pipeline_check record (pipeline_records' last)."""
    *_, record = pipeline_records(cfg, micro_batches, steps, should_stop)
    return record
