"""The generalisation gap and sharpness (lesson 7): a small and a large batch trained with plain
SGD from one initialisation to the same training loss, then how sharp each solution is.

Each run trains until the loss over the whole training set first reaches `target_loss` (checked
after every step), or `max_steps`. Then, at its solution:
- train and test loss and accuracy, and the gap between them;
- the Hessian's top eigenvalue over the training set, by power iteration on Hessian-vector
  products (double backward; `top_eigenvalue` works on any symmetric operator);
- the mean rise of the training loss at random points a small step away, each direction scaled
  row by row to the weights' own norms (Li et al. 2018's filter normalisation: a rescaled
  network does not look flatter);
- during training, a trace of the top eigenvalue (a few power iterations, warm-started), against
  2/lr: gradient descent on a quadratic diverges along any direction sharper than 2/lr.
Then a 1-D slice of the train and test loss along the line from the small batch's solution to
the large batch's, and past both ends.

The remedies (Goyal et al. 2017; Hoffer et al. 2017) each add one more run of the large batch:
`scale_lr` multiplies its lr by sqrt(large / small); `warmup` reaches that lr by a linear ramp;
`longer` trains on past the target to LONGER_FACTOR times the steps it needed; `noise` adds to
each full step the noise of a small batch: (g_a - g_b) / sqrt(2) for two independent small
batches a, b, whose covariance is that of one small batch's gradient about its mean.

Measurements are taken in evaluation mode (a BatchNorm model uses its running statistics).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from bsdemo.config import RunConfig
from bsdemo.engine.data import IGNORE
from bsdemo.engine.descent import Vector, descending, summed_loss
from bsdemo.engine.train import evaluate, prepare
from bsdemo.jobkinds import check_stop, remedy_lr
from bsdemo.tunables import (
    HESSIAN_ITERS,
    HESSIAN_SAMPLES,
    LONGER_FACTOR,
    NEIGHBOURHOOD_DIRECTIONS,
    NEIGHBOURHOOD_RADIUS,
    SLICE_POINTS,
    TRACE_ITERS,
    TRACE_POINTS,
    TRACE_SAMPLES,
    WARMUP_SHARE,
)
from bsdemo.units import setting, sig


def _dot(a: Vector, b: Vector) -> torch.Tensor:
    return sum((x * y).sum() for x, y in zip(a, b, strict=True))


def top_eigenvalue(
    hvp: Callable[[Vector], Vector],
    like: Vector,
    iters: int,
    generator: torch.Generator,
    start: Vector | None = None,
) -> tuple[float, Vector]:
    """(eigenvalue of largest magnitude, its unit eigenvector) of the symmetric operator hvp,
    by power iteration from `start` (or a random vector) for `iters` products."""
    v = start or [torch.randn(p.shape, generator=generator).to(p) for p in like]
    norm = _dot(v, v).sqrt()
    v = [x / norm for x in v]
    value = 0.0
    for _ in range(iters):
        hv = hvp(v)
        value = float(_dot(hv, v))  # Rayleigh quotient of the unit vector v
        norm = _dot(hv, hv).sqrt()
        if not torch.isfinite(norm) or float(norm) == 0.0:
            break
        v = [x / norm for x in hv]
    return value, v


def hessian_product(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[Vector], Vector]:
    """v -> H v, H the Hessian of the mean loss over (x, y) in the parameters at their present
    values. The gradient's graph is built once, here, and each product is one more backward
    through it (double backward): build a new one after the parameters change."""
    params = [p for p in model.parameters() if p.requires_grad]
    count = int((y != IGNORE).sum())  # samples, or scored tokens
    grads = torch.autograd.grad(summed_loss(model, x, y) / count, params, create_graph=True)

    def product(v: Vector) -> Vector:
        return list(torch.autograd.grad(_dot(grads, v), params, retain_graph=True))

    return product


def hessian_set(
    x: torch.Tensor, y: torch.Tensor, seed: int, samples: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The training set, or `samples` of it drawn once: what a Hessian is taken over."""
    if len(y) <= samples:
        return x, y
    pick = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))[:samples]
    pick = pick.to(x.device)
    return x[pick], y[pick]


def _rows(p: torch.Tensor) -> torch.Tensor:
    """p as (rows, rest): a weight's output units, or a bias as one row."""
    return p.reshape(p.shape[0], -1) if p.dim() > 1 else p.reshape(1, -1)


def neighbourhood_rise(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    generator: torch.Generator,
    radius: float = NEIGHBOURHOOD_RADIUS,
    directions: int = NEIGHBOURHOOD_DIRECTIONS,
) -> float:
    """Mean rise of the loss over (x, y) from the model's parameters to random points at
    `radius` times each weight row's norm (filter-normalised directions); parameters restored."""
    params = [p for p in model.parameters() if p.requires_grad]
    base = evaluate(model, x, y)[0]
    saved = [p.detach().clone() for p in params]
    rises = []
    with torch.no_grad():
        for _ in range(directions):
            for p, s in zip(params, saved, strict=True):
                d = torch.randn(s.shape, generator=generator).to(s)
                rows, d_rows = _rows(s), _rows(d)
                scale = rows.norm(dim=1, keepdim=True) / d_rows.norm(dim=1, keepdim=True)
                p.copy_(s + radius * (d_rows * scale).reshape(s.shape))
            rises.append(evaluate(model, x, y)[0] - base)
        for p, s in zip(params, saved, strict=True):
            p.copy_(s)
    model.eval()
    return sum(rises) / len(rises)


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _load_flat(model: torch.nn.Module, flat: torch.Tensor) -> None:
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(flat[offset : offset + p.numel()].view_as(p))
            offset += p.numel()


PROGRESS_S = 1.0  # a run in training shows its loss curve so far this often


def run_to_target(
    cfg: RunConfig,
    batch: int,
    *,
    label: str,
    remedy: str | None,
    target_loss: float,
    max_steps: int,
    small_batch: int,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """Train one run of the study with plain SGD, yielding a sharpness_progress record (its
    loss curve so far) every PROGRESS_S while it trains; returns (its sharpness_run record,
    model, data)."""
    run = prepare(
        dataclasses.replace(cfg, batch_size=batch, accumulation_steps=1, epochs=None, max_steps=max_steps)
    )
    model, data = run.model, run.data
    x, y = data.x_train, data.y_train
    batch = min(batch, len(y))
    lr = remedy_lr(cfg.lr, small_batch, batch, remedy)
    params = [p for p in model.parameters() if p.requires_grad]
    noise_draws = torch.Generator(device=x.device).manual_seed(cfg.seed + 11)
    probe = torch.Generator().manual_seed(cfg.seed + 5)
    sets = {
        iters: hessian_set(x, y, cfg.seed, samples)
        for iters, samples in ((TRACE_ITERS, TRACE_SAMPLES), (HESSIAN_ITERS, HESSIAN_SAMPLES))
    }
    trace: list[list[float]] = []
    vector = None
    every = 1  # the trace's spacing, doubled whenever it fills up, so it spans the whole run

    def sharpness(iters: int) -> float:
        nonlocal vector
        model.eval()
        value, vector = top_eigenvalue(hessian_product(model, *sets[iters]), params, iters, probe, vector)
        model.train()
        return value

    def traced(step: int) -> None:
        nonlocal trace, every
        if step % every == 0:
            trace.append([step, sharpness(TRACE_ITERS)])
            if len(trace) >= 2 * TRACE_POINTS:
                trace, every = trace[1::2], 2 * every

    warmup_steps = round(WARMUP_SHARE * max_steps) if remedy == "warmup" else 0
    shown = time.perf_counter()
    for done in descending(
        model,
        x,
        y,
        batch=batch,
        lr=lr,
        target_loss=target_loss,
        max_steps=max_steps,
        seed=cfg.seed,
        batch_stats=cfg.norm == "batch",
        warmup_steps=warmup_steps,
        extend=LONGER_FACTOR if remedy == "longer" else 1,
        extra_gradient=(lambda: _small_batch_noise(model, params, x, y, small_batch, noise_draws))
        if remedy == "noise"
        else None,
        after_step=traced,
        should_stop=should_stop,
    ):
        if time.perf_counter() - shown >= PROGRESS_S:
            shown = time.perf_counter()
            # `replaces`: a job keeps only the latest curve of a run (bsdemo.runs.add_point)
            yield {
                "kind": "sharpness_progress",
                "replaces": True,
                "label": label,
                "remedy": remedy,
                "batch_size": batch,
                "lr": lr,
                "steps": done.steps,
                "reached_at": done.reached_at,
                "train_loss": done.curve[-1][1],
                "target_loss": target_loss,
                "train_samples": len(y),
                "curve": done.thinned(),
                "message": f"Training {label} run (batch {batch}): step {done.steps:,}, "
                f"training loss {sig(done.curve[-1][1])} (target {setting(target_loss)}).",
            }
    check_stop(should_stop)  # between the long phases after training: Hessian, neighbourhood
    model.eval()
    train_loss, train_acc = evaluate(model, x, y)
    test_loss, test_acc = evaluate(model, data.x_test, data.y_test)
    model.eval()
    top = rise = math.nan
    if done.status != "diverged":
        check_stop(should_stop)
        top = sharpness(HESSIAN_ITERS)
        check_stop(should_stop)
        rise = neighbourhood_rise(model, x, y, probe)
        model.eval()
    record = {
        "kind": "sharpness_run",
        "label": label,
        "remedy": remedy,
        "batch_size": batch,
        "lr": lr,
        "warmup_steps": warmup_steps,
        "last_lr": done.last_lr,
        "steps": done.steps,
        "reached_at": done.reached_at,
        "status": done.status,
        "train_loss": train_loss,
        "test_loss": test_loss,
        "train_accuracy": train_acc,
        "test_accuracy": test_acc,
        "loss_gap": test_loss - train_loss,
        "accuracy_gap": train_acc - test_acc,
        "top_hessian_eigenvalue": top,
        "two_over_lr": 2 / lr,
        "neighbourhood_rise": rise,
        "trace": trace,
        "curve": done.thinned(),
    }
    return record, model, data


def _small_batch_noise(model, params, x, y, small: int, generator) -> Vector:
    """(g_a - g_b) / sqrt(2) for two independent batches of `small` samples: zero mean, the
    covariance of one small batch's gradient."""
    pick = torch.randperm(len(y), generator=generator, device=x.device)[: 2 * small]
    a, b = pick[:small], pick[small:]
    g_a = torch.autograd.grad(summed_loss(model, x[a], y[a]) / small, params)
    g_b = torch.autograd.grad(summed_loss(model, x[b], y[b]) / small, params)
    return [(u - v) / math.sqrt(2) for u, v in zip(g_a, g_b, strict=True)]


@torch.no_grad()
def loss_slice(
    model: torch.nn.Module,
    start: torch.Tensor,
    end: torch.Tensor,
    data,
    points: int = SLICE_POINTS,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, list[float]]:
    """Train and test loss at start + t (end - start), t from -0.5 to 1.5."""
    ts = [-0.5 + 2.0 * i / (points - 1) for i in range(points)]
    train, test = [], []
    for t in ts:
        check_stop(should_stop)
        _load_flat(model, start + t * (end - start))
        train.append(evaluate(model, data.x_train, data.y_train)[0])
        test.append(evaluate(model, data.x_test, data.y_test)[0])
    model.eval()
    return {"t": ts, "train_loss": train, "test_loss": test}


def sharpness_study(
    cfg: RunConfig,
    batch_sizes: Sequence[int] = (16, 4096),
    target_loss: float = 0.01,
    max_steps: int = 3000,
    remedies: Sequence[str] = (),
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """sharpness_run records (small, large, then one per remedy), each after sharpness_progress
    records while it trains, then the sharpness_result."""
    small, large = batch_sizes
    runs, solutions = [], {}
    model = data = None
    plan = [("small", small, None), ("large", large, None)] + [(f"large + {r}", large, r) for r in remedies]
    for label, batch, remedy in plan:
        record, model, data = yield from run_to_target(
            cfg,
            batch,
            label=label,
            remedy=remedy,
            target_loss=target_loss,
            max_steps=max_steps,
            small_batch=small,
            should_stop=should_stop,
        )
        if remedy is None:
            solutions[label] = _flat(model)
        runs.append(record)
        yield record
    check_stop(should_stop)
    cut = loss_slice(model, solutions["small"], solutions["large"], data, should_stop=should_stop)
    first, second = runs[0], runs[1]
    yield {
        "kind": "sharpness_result",
        "runs": runs,
        "slice": cut,
        "lr": cfg.lr,
        "target_loss": target_loss,
        "train_samples": len(data.y_train),
        "radius": NEIGHBOURHOOD_RADIUS,
        "trace_samples": min(TRACE_SAMPLES, len(data.y_train)),
        "hessian_samples": min(HESSIAN_SAMPLES, len(data.y_train)),
        "message": f"Trained batch {first['batch_size']} and {second['batch_size']} to a "
        f"training loss of {setting(target_loss)}: top Hessian eigenvalue "
        f"{sig(first['top_hessian_eigenvalue'])} against "
        f"{sig(second['top_hessian_eigenvalue'])}, test loss "
        f"{sig(first['test_loss'])} against {sig(second['test_loss'])}.",
    }
