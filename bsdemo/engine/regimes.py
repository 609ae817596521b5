"""One regime of the three (SGD, full batch, mini-batch; their configs: bsdemo.recipes), trained
to its result record.

The three runs differ only in the batch size, so their weight updates per epoch are
ceil(N / B) x epochs — many cheap noisy ones, a few expensive smooth ones, or the balance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bsdemo.config import RunConfig
from bsdemo.engine.train import train


def run_regime(name: str, cfg: RunConfig, emit: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Train one regime; returns its regime_result record (emit sees every event, tagged)."""
    end = None
    for event in train(cfg):
        record = event.to_dict()
        if emit is not None:
            emit(record | {"regime": name})
        if event.kind == "end":
            end = event
    s = end.summary
    return {
        "kind": "regime_result",
        "name": name,
        "batch_size": cfg.batch_size,
        "weight_updates": s["steps"],
        "wall_time_s": s["wall_time_s"],
        "samples_per_sec": s["samples_per_sec"],
        "peak_memory_bytes": s["peak_memory_bytes"],
        "final_train_accuracy": s["final_train_accuracy"],
        "test_accuracy": s["test_accuracy"],
        "status": end.status,
        "time_capped": bool(s.get("time_capped")),
        "message": end.message,
    }
