"""Time caps, measured: the issue's repro link and jobs of several kinds made to hold a worker,
each under a short cap, with a small run queued behind it — how long each ran, how it ended
(stopped on its own, or its worker killed at cap + grace), and how long the small run waited.
Optionally with CPU hogs running beside it. Prints a table for bench/RESULTS.md.

    python bench/caps_bench.py [--cap 10] [--grace 5] [--hogs 2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bsdemo.config import ConfigError, RunConfig
from bsdemo.limits import Limits
from bsdemo.scheduler import Scheduler

WIDE = {"dataset": "synthetic", "model": "mlp", "width": 2048, "depth": 8, "samples": 20000}
JOBS = [
    (
        "train (the repro link)",
        "train",
        dict(WIDE, batch_size=64, accumulation_steps=250, epochs=None, max_steps=3, seed=21),
        {},
    ),
    (
        "train, 24 micro-batches",
        "train",
        dict(WIDE, batch_size=64, accumulation_steps=24, epochs=None, max_steps=50),
        {},
    ),
    ("fit_batch", "fit_batch", dict(WIDE, epochs=1), {"memory_budget_bytes": 2**33}),
    ("sharpness", "sharpness", dict(WIDE, width=1024, epochs=1, lr=0.01), {"batch_sizes": [16, 4000]}),
    ("ddp", "ddp", dict(WIDE, width=1024, batch_size=2048, epochs=1), {"processes": 2, "steps": 200}),
    (
        "pipeline",
        "pipeline",
        dict(WIDE, width=1024, batch_size=4096, epochs=1),
        {"micro_batches": 4, "steps": 200},
    ),
]


def _hog() -> None:
    while True:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cap", type=float, default=10.0)
    ap.add_argument("--grace", type=float, default=5.0)
    ap.add_argument("--hogs", type=int, default=0)
    args = ap.parse_args()
    hogs = [mp.Process(target=_hog, daemon=True) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    sched = Scheduler(
        workers=1, limits=Limits(max_wall_s=args.cap, stop_grace_s=args.grace, submits_per_minute=1000)
    )
    try:
        while not sched.workers_ready():
            time.sleep(0.05)
        print(
            f"cap {args.cap:g} s, grace {args.grace:g} s, {args.hogs} CPU hog(s); peak "
            f"{sched.device_info['peak_flops'] / 1e9:.0f} GFLOP/s"
        )
        print("| job | ran (s) | ended | small run queued behind it waited (s) |")
        print("|---|---|---|---|")
        for name, kind, settings, options in JOBS:
            try:
                job = sched.submit(RunConfig(**settings), owner="heavy", kind=kind, options=options)
            except ConfigError as exc:
                print(f"| {name} | — | refused before queueing: {exc.field} | — |")
                continue
            small = sched.submit(RunConfig(epochs=None, max_steps=3), owner="small")
            snap = sched.wait(job, timeout=600)
            how = (
                "worker killed at cap + grace"
                if "worker was ended" in snap.end["message"]
                else "stopped on its own at the cap"
            )
            waited = sched.wait(small, timeout=600)
            print(
                f"| {name} | {snap.finished_at - snap.started_at:.1f} | {how} | "
                f"{waited.started_at - waited.submitted_at:.1f} |"
            )
    finally:
        sched.close()
        for h in hogs:
            h.kill()


if __name__ == "__main__":
    main()
