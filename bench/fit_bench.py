"""Lesson 10's techniques against plain fp32, per workload: the activation memory a step holds
(accounted on the CPU, the allocator's peak on CUDA, less the fixed part) and the step's time.

    .venv/bin/python bench/fit_bench.py [--batch 256] [--repeats 3]

Prints a table: workload, technique, activations, saving against fp32, median step time, and
its cost against fp32 (checkpointing recomputes each block's forward in the backward).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bsdemo.config import RunConfig, sized
from bsdemo.engine.fitbatch import Stepper, available
from bsdemo.units import format_bytes

WORKLOADS = {  # the deepest CPU-sized presets of each model
    "mlp L (2048 x 4)": sized(RunConfig(), "L"),
    "cnn M (digits)": sized(RunConfig(model="cnn"), "M"),
    "transformer M": sized(
        RunConfig(dataset="arithmetic", model="transformer", optimizer="adamw", lr=0.003), "M"
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", help="comma-separated workload names (a prefix each)")
    args = ap.parse_args()
    print(
        f"batch {args.batch}; torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{'CUDA' if torch.cuda.is_available() else 'CPU'}"
    )
    print(f"{'workload':<18} {'technique':<19} {'activations':>12} {'saving':>7} {'step s':>8} {'time':>6}")
    for name, cfg in WORKLOADS.items():
        if args.only and not any(name.startswith(o) for o in args.only.split(",")):
            continue
        stepper = Stepper(cfg)
        base_bytes = base_time = None
        for technique in available(stepper.device):
            if technique == "accumulation":
                continue  # its memory is fp32's at the micro-batch (the lesson shows it)
            stepper.step(args.batch, technique)  # warm-up
            runs = [stepper.step(args.batch, technique) for _ in range(args.repeats)]
            held = runs[0][0] - stepper.fixed
            seconds = statistics.median(r[1] for r in runs)
            if technique == "fp32":
                base_bytes, base_time = held, seconds
            print(
                f"{name:<18} {technique:<19} {format_bytes(held):>12} "
                f"{1 - held / base_bytes:>7.0%} {seconds:>8.3f} {seconds / base_time:>5.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
