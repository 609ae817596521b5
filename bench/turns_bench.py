"""Runs in turns against runs one at a time: does taking turns change what a run measures?

Through bsdemo.scheduler.Scheduler with one real worker: the same N different runs (the
Training Lab's model at a few batch sizes, distinct seeds) submitted together, once with the
worker stepping them in turns (limits.turns = N) and once a run at a time (turns = 1), the two
alternated round by round (who goes first alternates). Per run: its median step time on the
training thread's CPU clock (what the device did) and on the wall clock, its first point's
wait from the submit, and its summary's run time (its own turns only). Printed per batch size:
turns ÷ one-at-a-time of the step times (1.00: the same), the first points' p50/p95/max, and
the rounds' total wall time.

    .venv/bin/python bench/turns_bench.py [--runs 12] [--rounds 3] [--batch-sizes 1,8,64]
        [--epochs 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

from bsdemo.config import RunConfig
from bsdemo.limits import Limits
from bsdemo.scheduler import Scheduler


def _ready(sched: Scheduler) -> Scheduler:
    deadline = time.monotonic() + 120
    while sched.workers_ready() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    return sched


def one_round(turns: int, cfgs: list[RunConfig]) -> dict:
    """Submit cfgs together on a fresh one-worker scheduler; what each run measured."""
    sched = _ready(
        Scheduler(
            workers=1,
            threads_per_worker=1,
            limits=Limits(turns=turns, max_active_per_address=1000, max_queued=1000, submits_per_minute=1000),
        )
    )
    try:
        began = time.monotonic()
        ids = [sched.submit(cfg, owner=f"student-{i}") for i, cfg in enumerate(cfgs)]
        first: dict[int, float] = {}
        while len(first) < len(ids) or not all(sched.snapshot(j).done for j in ids):
            for j in ids:
                sched.heartbeat(sched.snapshot(j).owner)
                if j not in first and sched.snapshot(j).latest:
                    first[j] = time.monotonic() - began
            time.sleep(0.02)
        wall = time.monotonic() - began
        snaps = [sched.snapshot(j) for j in ids]
        assert all(s.status == "completed" for s in snaps), [s.end for s in snaps]
        return {
            "wall": wall,
            "first": [first[j] for j in ids],
            "cpu": [s.summary["step_cpu_time_s"] for s in snaps],
            "step": [s.summary["step_time_s"] for s in snaps],
            "own": [s.summary["run_time_s"] for s in snaps],
            "turns_with": max(s.turns_with for s in snaps),
        }
    finally:
        sched.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-sizes", default="1,8,64")
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args()
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    cfgs = [RunConfig(batch_size=sizes[i % len(sizes)], epochs=args.epochs, seed=i) for i in range(args.runs)]
    results: dict[str, list[dict]] = {"turns": [], "one at a time": []}
    for r in range(args.rounds):
        order = ("turns", "one at a time") if r % 2 == 0 else ("one at a time", "turns")
        for name in order:
            results[name].append(one_round(args.runs if name == "turns" else 1, cfgs))
    print(
        f"{args.runs} runs (batch {args.batch_sizes}, {args.epochs} epoch(s), distinct seeds), "
        f"one worker, one thread; {args.rounds} rounds alternated"
    )
    print(f"{'mode':<14} {'first p50':>9} {'p95':>6} {'max':>6} {'all done':>9} {'took turns with':>15}")
    for name, rounds in results.items():
        firsts = [f for rnd in rounds for f in rnd["first"]]
        print(
            f"{name:<14} {pct(firsts, 0.5):>8.2f}s {pct(firsts, 0.95):>5.2f}s "
            f"{max(firsts):>5.2f}s {statistics.median(r['wall'] for r in rounds):>8.2f}s "
            f"{max(r['turns_with'] for r in rounds):>15}"
        )
    print(
        f"\n{'batch':>5} {'CPU step, turns ÷ alone':>24} {'wall step, turns ÷ alone':>25} "
        f"{'own run time, turns ÷ alone':>28}"
    )
    for b in sizes:
        picks = [i for i, c in enumerate(cfgs) if c.batch_size == b]

        def ratio(key: str, picks=picks) -> tuple[float, float, float]:
            pairs = sorted(
                t[key][i] / a[key][i]
                for t, a in zip(results["turns"], results["one at a time"], strict=True)
                for i in picks
            )
            return statistics.median(pairs), pairs[0], pairs[-1]

        cells = [f"{m:.3f} ({lo:.3f}–{hi:.3f})" for m, lo, hi in (ratio("cpu"), ratio("step"), ratio("own"))]
        print(f"{b:>5} {cells[0]:>24} {cells[1]:>25} {cells[2]:>28}")


if __name__ == "__main__":
    main()
