"""Steps to a target loss against the batch size, and the critical batch (lesson 8).

For each batch size B, one run from the same initialisation trains with plain SGD (engine.descent)
until the training loss first reaches `target_loss`, its lr set by a rule from a reference batch
and lr: constant, lr·sqrt(B/B_ref) or lr·B/B_ref. Shallue et al. (2018) found three regimes in
such curves: perfect scaling (twice the batch, half the steps), diminishing returns, and maximal
data parallelism (more batch, no fewer steps). McCandlish et al. (2018) model them as
S(B) = S_min (1 + B_crit / B): at B = B_crit a run takes twice the fewest steps, so the critical
batch is read off the measured curve where it crosses 2 S_min (log-log interpolation), and set
beside the simple noise scale B_simple measured at the same initialisation.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from bsdemo.config import RunConfig
from bsdemo.engine.descent import descend
from bsdemo.engine.noise import flat_grad
from bsdemo.engine.train import prepare
from bsdemo.jobkinds import JobStopped, critical_steps, rule_lr
from bsdemo.tunables import CRITICAL_DRAWS
from bsdemo.units import setting


def critical_from_steps(
    batch_sizes: Sequence[int], steps: Sequence[int | None]
) -> tuple[float | None, float | None]:
    """(S_min, B_crit) from the steps each batch took (None: it never reached the target):
    S_min the fewest, B_crit where the curve first falls to 2 S_min, interpolated on log-log
    axes between the batches either side; None when no run reached the target or the smallest
    batch already took at most 2 S_min."""
    pairs = [(b, s) for b, s in zip(batch_sizes, steps, strict=True) if s]
    if not pairs:
        return None, None
    s_min = min(s for _, s in pairs)
    for (b0, s0), (b1, s1) in itertools.pairwise(pairs):
        if s0 > 2 * s_min >= s1:
            share = (math.log(s0) - math.log(2 * s_min)) / (math.log(s0) - math.log(s1))
            return float(s_min), math.exp(math.log(b0) + share * (math.log(b1) - math.log(b0)))
    return float(s_min), None


def simple_noise_scale(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, draws: int, seed: int
) -> float:
    """B_simple = tr(S) / |G|^2 at the model's parameters, tr(S) from batch-1 gradients (as
    engine.noise measures it directly)."""
    model.eval()
    full = flat_grad(model, x, y)
    gen = torch.Generator().manual_seed(seed + 7)
    picks = torch.randperm(len(y), generator=gen)[:draws].to(x.device)
    trace = (
        sum(float((flat_grad(model, x[i : i + 1], y[i : i + 1]) - full).pow(2).sum()) for i in picks) / draws
    )
    model.train()
    return trace / float(full.pow(2).sum())


def critical_batch(
    cfg: RunConfig,
    batch_sizes: Sequence[int] = (1, 4, 16, 64, 256, 4096),
    target_loss: float = 0.1,
    rule: str = "sqrt",
    reference_batch: int = 32,
    max_steps: int = 20_000,
    lr_cap: float | None = 0.8,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """critical_point records (one per batch, smallest first), then the critical_result."""
    base = prepare(dataclasses.replace(cfg, accumulation_steps=1, epochs=None, max_steps=max_steps))
    n = len(base.data.y_train)
    b_simple = simple_noise_scale(base.model, base.data.x_train, base.data.y_train, CRITICAL_DRAWS, cfg.seed)
    sizes = sorted({min(b, n) for b in batch_sizes})
    points = []
    for b in sizes:
        if should_stop is not None and should_stop():
            raise JobStopped("Stopped before it finished.")
        run = prepare(
            dataclasses.replace(cfg, batch_size=b, accumulation_steps=1, epochs=None, max_steps=max_steps)
        )
        lr = min(rule_lr(cfg.lr, reference_batch, b, rule), lr_cap or math.inf)
        done = descend(
            run.model,
            run.data.x_train,
            run.data.y_train,
            batch=b,
            lr=lr,
            target_loss=target_loss,
            max_steps=critical_steps(max_steps, b, n),
            seed=cfg.seed,
            batch_stats=cfg.norm == "batch",
            should_stop=should_stop,
        )
        point = {
            "kind": "critical_point",
            "batch_size": b,
            "lr": lr,
            "steps": done.steps,
            "reached_at": done.reached_at,
            "status": done.status,
            "samples": done.reached_at * b if done.reached_at else None,
        }
        points.append(point)
        yield point
    s_min, b_crit = critical_from_steps(sizes, [p["reached_at"] for p in points])
    yield {
        "kind": "critical_result",
        "batch_sizes": sizes,
        "steps": [p["reached_at"] for p in points],
        "lrs": [p["lr"] for p in points],
        "statuses": [p["status"] for p in points],
        "s_min": s_min,
        "b_crit": b_crit,
        "b_simple": b_simple,
        "ratio": b_crit / b_simple if b_crit and b_simple > 0 else None,
        "rule": rule,
        "reference_batch": reference_batch,
        "reference_lr": cfg.lr,
        "lr_cap": lr_cap,
        "target_loss": target_loss,
        "train_samples": n,
        "max_steps": max_steps,
        "message": f"Trained {len(sizes)} batch sizes to a training loss of {setting(target_loss)} "
        f"(lr rule: {rule} from batch {reference_batch} at {setting(cfg.lr)}): "
        + (f"critical batch {b_crit:.0f}" if b_crit else "no critical batch found")
        + f", B_simple {b_simple:.0f} at initialisation.",
    }
