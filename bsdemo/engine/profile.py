"""Where a step's time goes: the lab's own training step under torch.profiler at a small and a
large batch, and the same step with its fixed cost cut (torch.compile on a CPU, CUDA graphs on
a GPU), timed against plain eager steps.

Per batch size: unprofiled steps of the lab's loop (`train`), a few steps under the profiler,
unprofiled steps again (the profiler makes every operator slower, so profiled steps are never
a throughput: the unprofiled ones are, and their difference is the profiler's own cost). The
trace is read by bsdemo.profiling; it travels with the record, gzipped, for the page's download
(and is written to a folder for the CLI's --trace-dir).

The overhead cut: eager steps and cut steps of the same model on the same batch, in alternating
blocks (so load that comes and goes falls on both), timed by the step's own clock. Compiling or
capturing is timed apart and never enters a samples/s.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import gzip
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import torch

from bsdemo import profiling
from bsdemo.config import RunConfig
from bsdemo.engine.measure import (
    HostLoad,
    device_info,
    resolve_device,
    step_clock,
    synchronize,
)
from bsdemo.engine.models import make_optimizer
from bsdemo.engine.own import active
from bsdemo.engine.steps import micro_loss
from bsdemo.engine.train import prepare, train
from bsdemo.jobkinds import JobStopped, sweep_config
from bsdemo.profiling import technique_name
from bsdemo.timing import spread
from bsdemo.tunables import (
    PROFILE_CUT_BLOCKS,
    PROFILE_CUT_STEPS,
    PROFILE_PLAIN_STEPS,
    PROFILE_STEPS,
    PROFILE_WARMUP,
)

MAX_TRACE_BYTES = 4 * 2**20  # a gzipped trace carried in a record (larger: --trace-dir only)


def technique_for(device: torch.device) -> str:
    return "cuda_graphs" if device.type == "cuda" else "compile"


def profile_steps(
    cfg: RunConfig,
    batch_sizes: Sequence[int],
    *,
    steps: int = PROFILE_STEPS,
    cut: bool = True,
    trace_dir: str | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield profile_start, a profile_point per batch size, a cut_point per batch size (when
    `cut`), then profile_end."""
    cfg = sweep_config(cfg, batch_sizes)
    device = resolve_device(cfg.device)
    technique = technique_for(device)
    yield {
        "kind": "profile_start",
        "batch_sizes": list(batch_sizes),
        "steps": steps,
        "config": vars(cfg).copy(),
        "device": device_info(device),
        "technique": technique,
        "train_samples": cfg.train_samples,
        "exclusive": True,
    }
    points = []
    for b in batch_sizes:
        _check(should_stop)
        point = _profile_point(cfg, b, steps, device, trace_dir, should_stop)
        points.append(point)
        yield point
    cuts = []
    if cut:
        for b in batch_sizes:
            _check(should_stop)
            cuts.append(_cut_point(cfg, b, technique, should_stop))
            yield cuts[-1]
    yield _end(points, cuts, technique)


def _check(should_stop: Callable[[], bool] | None) -> None:
    if should_stop is not None and should_stop():
        raise JobStopped()


class Block(NamedTuple):
    """Steps of the lab's loop at one batch size: how they ended, and per full-batch step its
    0-based index, wall seconds, own-clock seconds (thread CPU time on a one-thread CPU, CUDA
    event time on a GPU, else the wall clock) and thread CPU seconds (None where not kept)."""

    status: str
    message: str
    full: list[int]
    wall: list[float]
    own: list[float]
    cpu: list[float | None]


def _lab_steps(
    cfg: RunConfig,
    b: int,
    steps: int,
    on_step: Callable[[], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Block:
    """PROFILE_WARMUP + steps + 1 steps of the lab's loop at batch b; an epoch's partial last
    batch is a different step, left out. on_step runs after each step."""
    run_cfg = dataclasses.replace(
        cfg, batch_size=b, accumulation_steps=1, epochs=None, max_steps=PROFILE_WARMUP + steps + 1
    )
    block = Block("failed", "", [], [], [], [])
    seen, end = 0, None
    for event in train(run_cfg, evaluations=False, should_stop=should_stop):
        if event.kind == "step":
            index = event.step - 1
            if index >= PROFILE_WARMUP and event.samples_seen - seen == b:
                block.full.append(index)
                block.wall.append(event.step_time_s)
                block.own.append(
                    event.cpu_time_s
                    if event.cpu_time_s is not None
                    else event.device_time_s
                    if event.device_time_s is not None
                    else event.step_time_s
                )
                block.cpu.append(event.cpu_time_s)
            seen = event.samples_seen
            if on_step is not None:
                on_step()
        elif event.kind == "end":
            end = event
    status = end.status if end is not None else "failed"
    if status in ("completed", "cancelled") and block.wall:
        status = "ok"
    return block._replace(status=status, message=end.message if end is not None else "")


def fastest_half(profiles: list, block: Block) -> list:
    """The profiled steps to read: the faster half by the wall clock (at least three). A trace
    is in wall time, so a step another process interrupted, or one where the profiler did its
    own bookkeeping, has operators and gaps that look slower than the step's work was; noise
    only ever adds time, so the faster steps are the truer ones."""
    wall = dict(zip(block.full, block.wall, strict=True))
    if len(profiles) <= 3:
        return profiles
    ordered = sorted(profiles, key=lambda p: wall.get(p.index, float("inf")))
    return sorted(ordered[: max(3, -(-len(ordered) // 2))], key=lambda p: p.index)


def _profile_point(
    cfg: RunConfig,
    b: int,
    steps: int,
    device: torch.device,
    trace_dir: str | None,
    should_stop: Callable[[], bool] | None,
) -> dict[str, Any]:
    load = HostLoad()
    first = _lab_steps(cfg, b, PROFILE_PLAIN_STEPS, should_stop=should_stop)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    schedule = torch.profiler.schedule(wait=0, warmup=PROFILE_WARMUP, active=steps, repeat=1)
    with torch.profiler.profile(activities=activities, schedule=schedule) as prof:
        profiled = _lab_steps(cfg, b, steps, on_step=prof.step, should_stop=should_stop)
    if profiled.status != "ok":
        return {
            "kind": "profile_point",
            "batch_size": b,
            "status": profiled.status,
            "message": profiled.message,
        }
    with tempfile.TemporaryDirectory(prefix="bsdemo-trace-") as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, "rb") as f:
            raw = f.read()
    if trace_dir is not None:
        os.makedirs(trace_dir, exist_ok=True)
        with open(os.path.join(trace_dir, f"trace_batch{b}.json"), "wb") as f:
            f.write(raw)
    second = _lab_steps(cfg, b, PROFILE_PLAIN_STEPS, should_stop=should_stop)
    trace = json.loads(raw)
    recorded = [p for p in profiling.steps(trace) if p.index in profiled.full]
    if not recorded:
        return {
            "kind": "profile_point",
            "batch_size": b,
            "status": "failed",
            "message": "The profiler recorded no full step.",
        }
    traced = {p.index for p in recorded}
    profiles = fastest_half(recorded, profiled)
    chosen = {p.index for p in profiles}
    shown = profiling.typical(profiles)
    packed = gzip.compress(raw, 6)
    kernels = [len(p.kernels) for p in profiles]
    point = {
        "kind": "profile_point",
        "batch_size": b,
        "status": "ok",
        "message": "",
        "profiled_steps": len(recorded),
        "steps_read": sorted(chosen),
        "profiled_step_s": spread([p.dur / 1e6 for p in profiles]).as_dict(),  # the trace's
        # the profiled steps by the step's own clock (those in the trace: the step after them
        # carries the profiler's stopping), and the unprofiled ones around them
        "profiled_own_s": spread(
            [o for i, o in zip(profiled.full, profiled.own, strict=True) if i in traced]
        ).as_dict(),
        "plain_step_s": spread(first.wall + second.wall).as_dict(),  # wall
        "plain_own_s": spread(first.own + second.own).as_dict(),  # the throughput's clock
        "rows_us": profiling.per_step_rows(profiles),
        "parts_us": shown.by_part(),
        "timeline": [[s.name, s.part, round(s.start, 2), round(s.dur, 2)] for s in shown.spans],
        "kernel_timeline": [[s.name, s.part, round(s.start, 2), round(s.dur, 2)] for s in shown.kernels][
            :2000
        ],
        "shown_step_us": shown.dur,
        "operators_per_step": sum(1 for s in shown.spans if s.part != "gap"),
        "kernels_per_step": (sorted(kernels)[(len(kernels) - 1) // 2] if device.type == "cuda" else None),
        "gpu_busy_share": (shown.kernel_busy / shown.dur if device.type == "cuda" and shown.dur else None),
        "others_cpu_share": load.others_share(),
        "trace_bytes": len(raw),
        "trace_gz_b64": (
            base64.b64encode(packed).decode("ascii") if len(packed) <= MAX_TRACE_BYTES else None
        ),
    }
    return point


def _cut_point(
    cfg: RunConfig, b: int, technique: str, should_stop: Callable[[], bool] | None
) -> dict[str, Any]:
    """Eager steps against the same steps with the fixed cost cut, at batch b."""
    run = prepare(dataclasses.replace(cfg, batch_size=b, accumulation_steps=1))
    device = run.device
    xb, yb = run.data.x_train[:b].to(device), run.data.y_train[:b].to(device)
    base = {"kind": "cut_point", "batch_size": b, "technique": technique}
    eager_model, eager_opt = run.model, run.optimizer
    cut_model = copy.deepcopy(run.model)
    own = active()  # a model the user brought: its own optimizer for the copy
    cut_opt = own.optimizer(cut_model.parameters()) if own else make_optimizer(cfg, cut_model.parameters())
    loss_fn = run.loss
    load = HostLoad()
    began = time.perf_counter()
    try:
        if technique == "cuda_graphs":
            cut_model = _graphed(cut_model, xb)
        else:
            cut_model = torch.compile(cut_model, dynamic=False)
        _step(cut_model, cut_opt, xb, yb, b, loss_fn)  # compiles (or replays the capture once)
        synchronize(device)
    except Exception as exc:  # noqa: BLE001 - a technique this machine cannot run is a result
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return base | {
            "status": "unavailable",
            "message": f"{technique_name(technique)} did not run here: {type(exc).__name__}: {first}",
        }
    prepare_s = time.perf_counter() - began
    clock, clock_name = step_clock(device)
    times: dict[str, list[float]] = {"eager": [], "cut": []}
    bodies = {"eager": (eager_model, eager_opt), "cut": (cut_model, cut_opt)}
    for model, opt in bodies.values():  # warm both before any timing
        for _ in range(PROFILE_WARMUP):
            _step(model, opt, xb, yb, b, loss_fn)
    for r in range(PROFILE_CUT_BLOCKS):  # alternating blocks, the first one taking turns
        for name in ("eager", "cut") if r % 2 == 0 else ("cut", "eager"):
            _check(should_stop)
            model, opt = bodies[name]
            for _ in range(PROFILE_CUT_STEPS):
                synchronize(device)
                t = clock()
                _step(model, opt, xb, yb, b, loss_fn)
                synchronize(device)
                times[name].append(clock() - t)
    eager, cutted = spread(times["eager"]), spread(times["cut"])
    return base | {
        "status": "ok",
        "message": "",
        "clock": clock_name,
        "eager_step_s": eager.as_dict(),
        "cut_step_s": cutted.as_dict(),
        "eager_samples_per_sec": b / eager.median,
        "cut_samples_per_sec": b / cutted.median,
        "speedup": eager.median / cutted.median,
        "prepare_s": prepare_s,  # compiling or capturing: never inside a samples/s
        "others_cpu_share": load.others_share(),
    }


def _step(model, opt, xb, yb, b: int, loss_fn=None) -> None:
    opt.zero_grad(set_to_none=True)
    micro_loss(model, xb, yb, b, loss_fn).backward()
    opt.step()


def _graphed(model: torch.nn.Module, xb: torch.Tensor) -> torch.nn.Module:
    """The model's forward and backward captured as CUDA graphs for batches shaped like xb (the
    optimizer step stays eager): each step replays two graphs instead of launching every
    kernel."""
    return torch.cuda.make_graphed_callables(model, (xb,))


def _end(points: list[dict], cuts: list[dict], technique: str) -> dict[str, Any]:
    ok = [p for p in points if p["status"] == "ok"]
    end: dict[str, Any] = {"kind": "profile_end", "technique": technique, "split": None, "plain_fit": None}
    if len(ok) >= 2:
        parted = profiling.split({p["batch_size"]: p["rows_us"] for p in ok})
        plain = {p["batch_size"]: p["plain_own_s"]["median"] * 1e6 for p in ok}
        t0, t1 = profiling.two_point_fit(plain)
        end["split"] = {
            "t0_us": parted.t0,
            "t1_us": parted.t1,
            "fixed_us": dict(sorted(parted.fixed.items(), key=lambda kv: -kv[1])),
            "per_sample_us": dict(sorted(parted.per_sample.items(), key=lambda kv: -kv[1])),
        }
        # the unprofiled steps' own t0 + t1·B (the step's own clock, medians): the split the
        # page states; the trace's says where that time goes
        end["plain_fit"] = {"t0_us": max(t0, 0.0), "t1_us": t1}
        # how much longer profiled steps took (the step's own clock): the profiler's cost and
        # whatever else ran meanwhile; the trace's t0 and t1 over the steps' say how far its
        # (wall-clock, profiled) times can be read as the step's
        end["profiler_cost_us"] = [
            [p["batch_size"], p["profiled_own_s"]["median"] * 1e6 - p["plain_own_s"]["median"] * 1e6]
            for p in ok
        ]
        end["t0_agreement"] = parted.t0 / t0 if t0 > 0 else None
        end["t1_agreement"] = parted.t1 / t1 if t1 > 0 else None
    good = [c for c in cuts if c.get("status") == "ok"]
    if len(good) >= 2:
        end["cut_fit"] = {
            "eager": profiling.two_point_fit(
                {c["batch_size"]: c["eager_step_s"]["median"] * 1e6 for c in good}
            ),
            "cut": profiling.two_point_fit({c["batch_size"]: c["cut_step_s"]["median"] * 1e6 for c in good}),
        }
    end["message"] = "Profile completed."
    return end
