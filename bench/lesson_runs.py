"""What the lessons' benchmarks share: a claim's shape, and the runs behind the lr page's
presets (bench/lessons_bench.py states the claims, bench/words_audit.py traces the words)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from bsdemo import recipes
from bsdemo.config import RunConfig
from bsdemo.engine.train import train

Claim = tuple[str, bool, str]  # (what the page says, held in this seed, the numbers)
REPORT = "[report] "  # a claim's text starting so: the page reports it per run, never promises it


def run(cfg: RunConfig) -> dict:
    """A training run's summary, with its status."""
    end = None
    for event in train(cfg):
        if event.kind == "end":
            end = event
    return end.summary | {"status": end.status}


def lr_runs(seed: int, preset: str) -> list[dict]:
    """The lr page's comparison for one of its presets: reference, lr kept, linear, sqrt, warm."""
    p = recipes.LR_PRESETS[preset]
    base = dataclasses.replace(
        RunConfig(seed=seed), epochs=p["epochs"], time_limit_s=30.0, optimizer=p["optimizer"]
    )
    return [run(c) for _, c in recipes.lr_variants(base, p["ref_batch"], p["ref_lr"], p["k"], p["warmup"])]
