"""Candidate defaults for the learning-rate page, over explicit seeds: which demonstrate the
lesson in every seed?

For each candidate (optimizer, reference batch and lr, k, epochs, warm-up epochs) it trains the
page's five runs (bsdemo.recipes.lr_variants: the reference, the batch k× with the lr unchanged,
the linear rule, the square-root rule, the linear rule after a warm-up) on one torch thread
(accuracies are then the same on a busy machine) and prints, per candidate, in how many seeds:
the unchanged lr trains worse (> 1 point below the reference); the linear rule comes within 2
points; the square-root rule does; the linear rule without warm-up spikes (peak step loss >=
recipes.SPIKE x its first, or diverges); with warm-up it does not spike and comes within 2
points. Then each seed's accuracies.

    .venv/bin/python bench/lr_presets.py [--seed-list 0,1,...] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from lessons_bench import run as summary  # a run's summary with its status

from bsdemo import recipes
from bsdemo.config import RunConfig

CANDIDATES = {  # name -> (optimizer, reference batch, reference lr, k, epochs, warm-up epochs)
    "sgd 16/0.05 k8 10ep": ("sgd", 16, 0.05, 8, 10, 1),
    "sgd 16/0.05 k8 20ep": ("sgd", 16, 0.05, 8, 20, 1),
    "sgd 16/0.02 k8 10ep": ("sgd", 16, 0.02, 8, 10, 1),
    "momentum 16/0.01 k8 10ep": ("momentum", 16, 0.01, 8, 10, 1),
    "adam 16/0.002 k32 10ep": ("adam", 16, 0.002, 32, 10, 1),
    "momentum 16/0.05 k16 20ep w1": ("momentum", 16, 0.05, 16, 20, 1),
    "momentum 16/0.05 k16 20ep w5": ("momentum", 16, 0.05, 16, 20, 5),
    "momentum 16/0.1 k16 20ep w5": ("momentum", 16, 0.1, 16, 20, 5),
    "sgd 16/0.1 k16 20ep w5": ("sgd", 16, 0.1, 16, 20, 5),
    "momentum 16/0.02 k16 20ep w5": ("momentum", 16, 0.02, 16, 20, 5),
    "momentum 16/0.03 k16 20ep w5": ("momentum", 16, 0.03, 16, 20, 5),
    "momentum 16/0.02 k16 20ep w2": ("momentum", 16, 0.02, 16, 20, 2),
    "adam 16/0.001 k16 20ep w5": ("adam", 16, 0.001, 16, 20, 5),
    "adam 16/0.002 k32 20ep w5": ("adam", 16, 0.002, 32, 20, 5),
    "adam 16/0.001 k32 20ep w5": ("adam", 16, 0.001, 32, 20, 5),
}


def acc(r: dict) -> float:
    return r["test_accuracy"] if r["status"] == "completed" and r["test_accuracy"] else 0.0


def spike(r: dict) -> float:
    if r["status"] == "diverged" or not r.get("first_step_loss"):
        return math.inf
    return r["peak_step_loss"] / r["first_step_loss"]


def one_seed(candidate: tuple, seed: int) -> dict:
    optimizer, ref_batch, ref_lr, k, epochs, warm_epochs = candidate
    base = RunConfig(seed=seed, optimizer=optimizer, epochs=epochs, time_limit_s=120.0)
    runs = recipes.lr_variants(base, ref_batch, ref_lr, k)
    label, warm_cfg = runs[4]
    runs[4] = (label, dataclasses.replace(warm_cfg, warmup_steps=warm_cfg.warmup_steps * warm_epochs))
    ref, same, linear, root, warm = (summary(c) for _, c in runs)
    return {
        "ref": acc(ref),
        "same": acc(same),
        "linear": acc(linear),
        "root": acc(root),
        "warm": acc(warm),
        "spike": spike(linear),
        "warm_spike": spike(warm),
        "warm_steps": runs[4][1].warmup_steps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed-list", default="0,1,2,3,4,5,6,7,8,9")
    ap.add_argument("--only", help="comma-separated candidate names")
    args = ap.parse_args()
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seed_list.split(",")]
    names = args.only.split(",") if args.only else list(CANDIDATES)
    print(f"seeds {args.seed_list}; torch {torch.__version__}, 1 thread")
    print(
        f"{'candidate':<30} {'same<ref-1':>10} {'lin>=ref-2':>10} {'sqrt>=ref-2':>11} "
        f"{'lin spikes':>10} {'warm ok':>8} {'s':>5}"
    )
    for name in names:
        t = time.perf_counter()
        rows = [one_seed(CANDIDATES[name], s) for s in seeds]
        n = len(rows)

        def count(test, rows=rows, n=n) -> str:
            return f"{sum(map(test, rows))}/{n}"

        print(
            f"{name:<30} {count(lambda r: r['same'] < r['ref'] - 0.01):>10} "
            f"{count(lambda r: r['linear'] >= r['ref'] - 0.02):>10} "
            f"{count(lambda r: r['root'] >= r['ref'] - 0.02):>11} "
            f"{count(lambda r: r['spike'] >= recipes.SPIKE):>10} "
            f"{count(lambda r: r['warm_spike'] < recipes.SPIKE and r['warm'] >= r['ref'] - 0.02):>8} "
            f"{time.perf_counter() - t:>5.0f}",
            flush=True,
        )
        for s, r in zip(seeds, rows, strict=True):
            print(
                f"    seed {s}: ref {r['ref']:.1%} same {r['same']:.1%} linear {r['linear']:.1%}"
                f" sqrt {r['root']:.1%} warm {r['warm']:.1%} (over {r['warm_steps']} steps);"
                f" spike {r['spike']:.1f}x, with warm-up {r['warm_spike']:.1f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
