"""Training-dynamics lessons, timed through the real scheduler and worker on this machine.

Targets (CPU, defaults): the three-regime comparison <= 30 s, the 4 x 5 batch x lr grid
<= 60 s, the accumulation check <= 5 s — from submit to the last result.

    .venv/bin/python bench/dynamics_bench.py [--workers 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from bsdemo.config import RunConfig
from bsdemo.recipes import regime_configs
from bsdemo.scheduler import Scheduler


def timed_group(sched: Scheduler, cfgs: list[RunConfig], owner: str) -> tuple[float, list]:
    t = time.perf_counter()
    ids = sched.submit_group(cfgs, owner)
    snaps = [sched.wait(j, timeout=600) for j in ids]
    return time.perf_counter() - t, snaps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    sched = Scheduler(workers=args.workers)
    while sched.workers_ready() < args.workers:
        time.sleep(0.05)
    try:
        seconds, snaps = timed_group(sched, [c for _, c in regime_configs(RunConfig(), epochs=5)], "regimes")
        print(f"three regimes (digits MLP, batch 1 / full / 32, 5 epochs): {seconds:.1f} s (target <= 30 s)")
        for s in snaps:
            summary = s.end["summary"]
            print(
                f"   batch {s.config['batch_size']:>5}: {summary['steps']:>5} updates, "
                f"{summary['wall_time_s']:.2f} s training, test accuracy "
                f"{summary['test_accuracy']:.1%}, shared device: {s.shared_device}"
            )
        grid = [
            dataclasses.replace(RunConfig(), batch_size=b, lr=lr, epochs=3, time_limit_s=10.0)
            for b in (8, 32, 128, 512)
            for lr in (0.01, 0.03, 0.1, 0.3, 1.0)
        ]
        seconds, snaps = timed_group(sched, grid, "grid")
        statuses = [s.status for s in snaps]
        print(
            f"lr grid (4 batch sizes x 5 learning rates, 3 epochs each): {seconds:.1f} s "
            f"(target <= 60 s); {statuses.count('completed')} completed, "
            f"{statuses.count('diverged')} diverged"
        )
        t = time.perf_counter()
        job = sched.submit(
            RunConfig(), "accum", kind="accum_check", options={"micro_batch": 32, "accum": 4, "steps": 5}
        )
        result = sched.wait(job, timeout=120).result
        print(
            f"accumulation check (4 x 32 vs 128, 5 steps, memory and speed): "
            f"{time.perf_counter() - t:.2f} s (target <= 5 s); relative gradient difference "
            f"{result['rel_grad_diff']:.2e}, equivalent {result['equivalent']}"
        )
    finally:
        sched.close()


if __name__ == "__main__":
    main()
