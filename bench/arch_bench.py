"""Lesson 11's default experiment over seeds: each architecture's measured range and agreement
with the rule of thumb, and the wall time of the whole study (the page's default must finish in
30 s on this CPU with two CPU hogs running). One torch thread, as a worker on a 2-core server has:
each run's budget is then the training thread's CPU time, so hogs make it slower, not shorter.

    python bench/arch_bench.py [--seeds 0,1,2,3,4] [--seconds 1] [--hogs 2] [--threads 1]

Prints a table per seed and a summary of how often each architecture agreed.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time

import torch

from bsdemo.architectures import ARCHITECTURES, DEFAULT_BATCHES, DEFAULT_SECONDS
from bsdemo.config import RunConfig
from bsdemo.engine.architectures import architecture_sweep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    ap.add_argument("--hogs", type=int, default=0, help="CPU-bound processes running beside it")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    try:
        study(args)
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def study(args: argparse.Namespace) -> None:
    seen: dict[str, list] = collections.defaultdict(list)
    print(
        f"{os.cpu_count()} cores, {args.threads} torch thread(s), {args.hogs} hog(s); batches "
        f"{DEFAULT_BATCHES}; {args.seconds:g} s per run"
    )
    for seed in (int(s) for s in args.seeds.split(",")):
        t = time.perf_counter()
        load = os.getloadavg()[0]
        records = list(
            architecture_sweep(RunConfig(seed=seed), list(ARCHITECTURES), list(DEFAULT_BATCHES), args.seconds)
        )
        took = time.perf_counter() - t
        print(f"\nseed {seed}: {took:.1f} s (load average at start {load:.1f})")
        print(
            f"{'architecture':<15} {'quality by batch':<44} {'samples/s by batch':<34} "
            f"{'range':>9} {'agreement':>10}"
        )
        points = [r for r in records if r["kind"] == "architecture_point"]
        for s in (r for r in records if r["kind"] == "architecture_summary"):
            mine = [p for p in points if p["architecture"] == s["architecture"]]
            quality = " ".join(f"{p['quality']:.3g}" for p in mine)
            speed = " ".join(f"{p['samples_per_sec']:,.0f}" for p in mine)
            span = f"{s['range'][0]}–{s['range'][1]}" if s["range"] else "–"
            print(f"{s['label']:<15} {quality:<44} {speed:<34} {span:>9} {s['agreement'] or '–':>10}")
            seen[s["label"]].append((span, s["agreement"]))
        clocks = {p["budget_clock"] for p in points}
        print(
            f"budget clock: {', '.join(sorted(clocks))}; steps per run "
            f"{min(p['steps'] for p in points)}–{max(p['steps'] for p in points)}"
        )
    print("\nover the seeds:")
    for label, runs in seen.items():
        print(
            f"  {label:<15} ranges {', '.join(r for r, _ in runs)}; "
            + ", ".join(f"{a} {n}×" for a, n in collections.Counter(a for _, a in runs).items())
        )


if __name__ == "__main__":
    main()
