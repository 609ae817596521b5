"""bench/gpu_check.py's parts after its sweeps and finder: predicted memory against the CUDA
allocator, the scheduler's worker on the device, lessons 7-12's engines and the profile (from
gpu_lesson_parts.py), the user's own model, a room through the scheduler, and the suite's gpu tests
(its docstring lists them). Each prints a short table; `check` (gpu_failures.py) keeps what failed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from gpu_failures import FAILURES, check  # bench/'s own: gpu_check.py puts bench/ on sys.path
from gpu_lesson_parts import lessons_part, profile_part, systems_part

from bsdemo.config import RunConfig, sized
from bsdemo.engine.train import train
from bsdemo.units import format_bytes, powers_of_two

__all__ = [
    "FAILURES",
    "check",
    "footprint_part",
    "lessons_part",
    "own_model_part",
    "profile_part",
    "room_part",
    "scheduler_part",
    "systems_part",
    "tests_part",
]


def footprint_part(device: str, dry: bool) -> None:
    from bsdemo.footprint import predict
    from bsdemo.scheduler import CUDA_CONTEXT_BYTES

    print("\npredicted device memory (footprint) vs the allocator's peak over a whole run:")
    cases = [
        RunConfig(dataset="synthetic", model="mlp", batch_size=256, samples=20_000),
        RunConfig(dataset="synthetic", model="cnn", batch_size=128, samples=20_000),
        RunConfig(dataset="arithmetic", model="transformer", batch_size=512, samples=20_000),
    ]
    for base in cases:
        cfg = RunConfig(
            **{**vars(sized(base, "S" if dry else "L")), "device": device, "epochs": None, "max_steps": 5}
        )
        if not dry:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        end = list(train(cfg))[-1]
        measured = torch.cuda.max_memory_allocated() if not dry else end.summary["peak_memory_bytes"]
        predicted = predict(cfg).device if not dry else predict(cfg).peak
        ratio = measured / predicted
        print(
            f"  {cfg.model:>11} {cfg.width}x{cfg.depth} batch {cfg.batch_size:>4}: predicted "
            f"{format_bytes(predicted):>11}, measured {format_bytes(measured):>11}, "
            f"measured/predicted {ratio:.2f} {check(0.5 <= ratio <= 2.0, f'footprint {cfg.model}')}"
        )
    if not dry:
        free, total = torch.cuda.mem_get_info()
        outside = total - free - torch.cuda.memory_reserved()
        print(
            f"  held outside torch's counters (this context, and any other process): "
            f"{format_bytes(outside)}; admission assumes {format_bytes(CUDA_CONTEXT_BYTES)} "
            f"per worker {check(outside <= 4 * CUDA_CONTEXT_BYTES, 'context size')}"
        )


def scheduler_part(device: str) -> None:
    """The worker process on this device, as the lab runs it (bsdemo.scheduler.Scheduler)."""
    from bsdemo.limits import Limits
    from bsdemo.scheduler import Scheduler

    t = time.perf_counter()
    sched = Scheduler(workers=1, limits=Limits(max_wall_s=2.0))
    try:
        while not sched.workers_ready():
            time.sleep(0.05)
        info = sched.device_info
        ceiling = info.get("memory_ceiling_bytes")
        expected = "none" if info["type"] == "cuda" else "set"
        print(
            f"\nscheduler worker on {info.get('name')} ({info['type']}): address-space ceiling "
            f"{format_bytes(ceiling) if ceiling else 'none'} (expected {expected}) "
            f"{check((ceiling is None) == (info['type'] == 'cuda'), 'worker ceiling policy')}"
        )
        cfg = RunConfig(device=device)
        job = sched.submit(
            cfg, "gpu-check", kind="sweep", options={"batch_sizes": powers_of_two(1024), "min_timed_s": 0.5}
        )
        snap = sched.wait(job, timeout=120)
        print(
            f"  sweep under a 2 s cap for the whole job: {snap.status}, "
            f"{sum(p['status'] == 'ok' for p in snap.points)} points measured "
            f"{check(snap.status == 'cancelled' and 'time cap' in snap.end['message'], 'sweep cap')}"
        )
        job = sched.submit(
            cfg, "gpu-check", kind="accum_check", options={"micro_batch": 1, "accum": 1024, "steps": 300}
        )
        time.sleep(0.5)
        sched.cancel(job, owner="gpu-check")
        snap = sched.wait(job, timeout=60)
        print(
            f"  accumulation check stopped mid-way: {snap.status} "
            f"{check(snap.status == 'cancelled', 'stop of a check')}"
        )
        snap = sched.wait(sched.submit(RunConfig(device=device, epochs=1), "gpu-check"), 60)
        print(
            f"  a run after both: {snap.status} ({time.perf_counter() - t:.1f} s in all) "
            f"{check(snap.status == 'completed', 'run after stops')}"
        )
    finally:
        sched.close()


def own_model_part(device: str, dry: bool) -> None:
    """The user's own model (bsdemo.api, issue 29) on this device: the example ResNet's finder
    under a real allocator cap (real OOMs), the example GPT's sweep by CUDA events and its
    fit-batch with fp16's gradient scaler; the user's model untouched, memory given back."""
    from bsdemo import api

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from own_model import SmallResNet, gpt, resnet

    t = time.perf_counter()
    budget = "48MiB" if dry else "1GiB"
    base = torch.cuda.memory_allocated() if not dry else 0
    found = api.find_batch_size(resnet(), memory_budget=budget, max_batch=4096, device=device)
    r = found.result
    kinds = {p["status"] for p in found.probes}
    print(
        f"\nown model: ResNet finder under {budget} ({time.perf_counter() - t:.1f} s): largest "
        f"{r['max_batch_size']}, use {r['batch_size']}, {len(found.probes)} probes "
        f"{[(p['batch_size'], p['status']) for p in found.probes]}"
    )
    ran = {p["batch_size"] for p in found.probes if p["status"] == "ok"}
    print(f"  the largest it names ran: {check(r['max_batch_size'] in ran, 'own finder ran it')}")
    if not dry:
        real = all(not p["simulated"] for p in found.probes)
        print(
            f"  out-of-memory errors real, not simulated: {check(real, 'own finder real OOM')}"
            f" (statuses {sorted(kinds)})"
        )
        back = torch.cuda.memory_allocated()
        print(
            f"  memory given back ({format_bytes(back - base)} above the start): "
            f"{check(back <= base + 2**20, 'own finder memory back')}"
        )
    mine = SmallResNet()
    before = [p.detach().clone() for p in mine.parameters()]
    api.find_batch_size(
        api.Workload(mine, batch=resnet().batch), memory_budget=budget, max_batch=256, device=device
    )
    print(
        "  a module passed in is left untrained: "
        + check(
            all(torch.equal(a, b) for a, b in zip(before, mine.parameters(), strict=True)),
            "own model untouched",
        )
    )
    t = time.perf_counter()
    s = api.sweep(gpt(), [8, 64, 512], rounds=2, device=device)
    clock = s.end.get("clock")
    print(
        f"  GPT sweep ({time.perf_counter() - t:.1f} s): "
        + ", ".join(f"{p['batch_size']}: {p['samples_per_sec'] or 0:,.0f}/s" for p in s.points)
        + f"; timed by {clock} "
        + check(dry or clock == "CUDA event time", "own sweep clock")
    )
    t = time.perf_counter()
    techniques = ["fp32", "bf16"] + ([] if dry else ["fp16"])
    fit = api.fit_batch(gpt(), "24MiB" if dry else "512MiB", techniques=techniques, device=device)
    print(
        f"  GPT fit-batch ({time.perf_counter() - t:.1f} s): "
        + ", ".join(f"{row['technique']} {row['max_batch_size']}" for row in fit.techniques)
        + " "
        + check(all(row["max_batch_size"] > 0 for row in fit.techniques), "own fit-batch")
    )


def tests_part(dry: bool) -> None:
    """The suite's tests marked gpu, in a process of their own: on CUDA each must pass (a skip
    is a failure here); in a dry run on the CPU each is skipped."""
    import subprocess

    t = time.perf_counter()
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/gpu", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    last = (done.stdout.strip().splitlines() or ["no output"])[-1]
    ok = done.returncode == 0 and (dry or "skipped" not in last)
    print(f"\nthe suite's gpu tests: {last} {check(ok, 'gpu tests')} ({time.perf_counter() - t:.1f} s)")


def room_part(device: str, dry: bool) -> None:
    """A room pressing Run at once, through the scheduler as the pages use it (see 11. above)."""
    import random
    import threading

    from bsdemo.scheduler import Scheduler

    sessions, workers = (20, 2) if dry else (100, 4)
    rng = random.Random(0)
    sched = Scheduler(workers=workers)
    try:
        while sched.workers_ready() < workers:
            time.sleep(0.05)
        presses = sorted(rng.uniform(0, 5) for _ in range(sessions))
        sizes = [None if rng.random() < 1 / 3 else rng.choice(powers_of_two(1024)) for _ in range(sessions)]
        jobs, first, done, errors = {}, {}, {}, []
        start = time.perf_counter()

        def watch() -> None:  # every session's page: heartbeat and poll, as a fragment does
            while len(done) < sessions and time.perf_counter() - start < 300:
                for i, (job, pressed) in list(jobs.items()):
                    sched.heartbeat(f"student-{i}")
                    snap = sched.snapshot(job)
                    now = time.perf_counter() - start
                    if snap.latest is not None and i not in first:
                        first[i] = now - pressed
                    if snap.done and i not in done:
                        done[i] = now - pressed
                        if snap.status != "completed":
                            errors.append(f"{i}: {snap.status}")
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        for i, (at, size) in enumerate(zip(presses, sizes, strict=True)):
            time.sleep(max(0.0, at - (time.perf_counter() - start)))
            cfg = RunConfig(device=device) if size is None else RunConfig(device=device, batch_size=size)
            try:
                jobs[i] = (sched.submit(cfg, f"student-{i}"), time.perf_counter() - start)
            except Exception as exc:  # noqa: BLE001 - a refusal is this check's finding
                errors.append(f"{i}: {exc}")
                done[i] = float("nan")
        watcher.join(timeout=320)

        def pct(values: list[float], q: float) -> float:
            values = sorted(values)
            return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")

        firsts, ends = list(first.values()), [v for v in done.values() if v == v]
        print(
            f"\na room: {sessions} sessions within 5 s, {workers} workers on {device} "
            f"({len({s for s in sizes})} distinct settings)"
        )
        print(
            f"  first point p50 {pct(firsts, 0.5):.2f} s, p95 {pct(firsts, 0.95):.2f} s "
            f"(target <= 5 s); completion p50 {pct(ends, 0.5):.2f} s, "
            f"p95 {pct(ends, 0.95):.2f} s"
        )
        print(
            f"  {len(firsts)}/{sessions} saw a first point, errors: {errors[:3] or 'none'} "
            f"{check(not errors and len(done) == sessions, 'room: every run completed')}"
        )
    finally:
        sched.close()
