"""Gradient noise against the batch size, measured on the student's own model (lesson 8).

At the model's current parameters (its initialisation, or after `after_steps` optimizer steps):
the full-batch gradient G over the whole training set, then `draws` mini-batch gradients g_B per
batch size, each batch drawn without replacement. For sampling without replacement from N
samples the variance of a mini-batch mean is exactly

    E|g_B - G|^2 = tr(S) / B * (N - B) / (N - 1)

with tr(S) the per-sample gradients' (population) variance, so the measured variance should fall
as 1/B, and faster near B = N. The simple noise scale B_simple = tr(S) / |G|^2 (McCandlish et
al. 2018) is the batch at which the noise in g_B is as large as the signal. It is measured two
ways: directly (tr(S) from the batch-1 draws, |G|^2 from G itself) and by their two-batch
estimator from |g_B|^2 at a small and a large batch only — what a real training run can afford,
here with the finite-population factor in (so it is unbiased for draws without replacement).
Uncertainties are bootstrap 16-84 % ranges over the draws.

Gradients are taken with the model in evaluation mode: a BatchNorm model's gradient then does
not depend on which samples share the batch, and every other model is the same in both modes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bsdemo.config import RunConfig
from bsdemo.engine.train import prepare, train
from bsdemo.jobkinds import JobStopped
from bsdemo.tunables import NOISE_CHUNK, NOISE_TWO_BATCH
from bsdemo.units import fixed

BOOTSTRAP = 400


def flat_grad(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    chunk: int = NOISE_CHUNK,
    loss_fn: Callable | None = None,
) -> torch.Tensor:
    """The gradient of the mean loss over (x, y), flattened; in chunks for a large set.
    loss_fn(outputs, targets) -> mean loss: a model the user brought (None: the lab's)."""
    model.zero_grad(set_to_none=True)
    for xb, yb in zip(x.split(chunk), y.split(chunk), strict=True):
        logits = model(xb)
        if loss_fn is not None:  # its mean over the chunk, weighted by the chunk's share
            loss = loss_fn(logits, yb) * (len(yb) / len(y))
        elif logits.dim() > 2:
            logits, yb = logits.flatten(0, 1), yb.flatten()
            loss = F.cross_entropy(logits, yb, reduction="sum") / int((y >= 0).sum())
        else:
            loss = F.cross_entropy(logits, yb, reduction="sum") / len(y)
        loss.backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def _range(
    values: np.ndarray, estimate: Callable[[np.ndarray], float], rng: np.random.Generator
) -> tuple[float, float]:
    """16-84 % bootstrap range of estimate() over resampled rows of values."""
    picks = rng.integers(0, len(values), size=(BOOTSTRAP, len(values)))
    boots = np.array([estimate(values[p]) for p in picks])
    boots = boots[np.isfinite(boots)]
    if not len(boots):
        return (math.nan, math.nan)
    return float(np.percentile(boots, 16)), float(np.percentile(boots, 84))


def slope(batch_sizes: Sequence[int], variances: Sequence[float]) -> float:
    """Least-squares slope of log(variance) against log(batch)."""
    x, y = np.log(np.asarray(batch_sizes, float)), np.log(np.asarray(variances, float))
    return float(np.polyfit(x, y, 1)[0])


def two_batch(sq_small: float, sq_big: float, small: int, big: int, n: int) -> tuple[float, float]:
    """(tr(S), |G|^2) from E|g_B|^2 = |G|^2 + tr(S) * (N - B) / (B (N - 1)) at two batches."""
    a_small, a_big = (n - small) / (small * (n - 1)), (n - big) / (big * (n - 1))
    trace = (sq_small - sq_big) / (a_small - a_big)
    return trace, sq_small - trace * a_small


def noise_measure(
    cfg: RunConfig,
    batch_sizes: Sequence[int] = (1, 4, 16, 64, 256),
    draws: int = 32,
    after_steps: int = 0,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """noise_point records (one per batch size), then the noise_result."""
    run_cfg = dataclasses.replace(
        cfg, max_steps=after_steps or None, epochs=None if after_steps else cfg.epochs
    )
    run = prepare(run_cfg)
    if after_steps:
        for event in train(run_cfg, should_stop=should_stop, prepared=run, evaluations=False):
            if event.kind == "end" and event.status != "completed":
                raise JobStopped(event.message)
    model, x, y = run.model, run.data.x_train, run.data.y_train
    n = len(y)
    model.eval()
    grad = functools.partial(flat_grad, loss_fn=run.loss)
    full = grad(model, x, y)
    g2 = float(full.pow(2).sum())
    gen = torch.Generator().manual_seed(cfg.seed + 7)

    def draw(b: int) -> torch.Tensor:
        if should_stop is not None and should_stop():
            raise JobStopped("Stopped before it finished.")
        idx = torch.randperm(n, generator=gen)[:b].to(x.device)
        return grad(model, x[idx], y[idx])

    sizes = sorted({min(b, n) for b in batch_sizes})
    per_size: dict[int, np.ndarray] = {}
    variances, cosines = [], []
    for b in sizes:
        grads = [draw(b) for _ in range(draws)]
        dev = np.array([float((g - full).pow(2).sum()) for g in grads])
        cos = np.array([float(F.cosine_similarity(g, full, dim=0)) for g in grads])
        per_size[b] = dev
        variances.append(float(dev.mean()))
        cosines.append(float(cos.mean()))
        yield {
            "kind": "noise_point",
            "batch_size": b,
            "variance": variances[-1],
            "variance_sem": float(dev.std(ddof=1) / math.sqrt(draws)) if draws > 1 else None,
            "cosine": cosines[-1],
        }
    rng = np.random.default_rng(cfg.seed)
    # direct: tr(S) from batch-1 draws (E|g_1 - G|^2 = tr(S)), |G|^2 from G itself
    ones = per_size.get(1)
    if ones is None:
        ones = np.array([float((draw(1) - full).pow(2).sum()) for _ in range(draws)])
    trace = float(ones.mean())
    direct = trace / g2 if g2 > 0 else math.nan
    direct_range = _range(ones, lambda v: float(v.mean()) / g2, rng)
    # two-batch: only |g_B|^2 at a small and a large batch
    small, big = (min(b, n - 1) for b in NOISE_TWO_BATCH)
    sq = np.array([[float(draw(small).pow(2).sum()), float(draw(big).pow(2).sum())] for _ in range(draws)])

    def estimate(rows: np.ndarray) -> float:
        t, g = two_batch(float(rows[:, 0].mean()), float(rows[:, 1].mean()), small, big, n)
        return t / g if g > 0 else math.nan

    two = estimate(sq)
    fit = slope(sizes, variances)
    yield {
        "kind": "noise_result",
        "batch_sizes": sizes,
        "variances": variances,
        "cosines": cosines,
        "variance_slope": fit,
        "trace_sigma": trace,
        "grad_norm_sq": g2,
        "train_samples": n,
        "b_simple": direct,
        "b_simple_range": list(direct_range),
        "b_simple_two_batch": two,
        "b_simple_two_batch_range": list(_range(sq, estimate, rng)),
        "two_batch_sizes": [small, big],
        "draws": draws,
        "after_steps": after_steps,
        "message": f"Measured {draws} gradients at each of {len(sizes)} batch sizes "
        f"({'at initialisation' if not after_steps else f'after {after_steps} steps'}"
        f"): variance slope {fixed(fit, 2)}, B_simple {direct:.0f} (direct) and "
        f"{two:.0f} (two-batch).",
    }
