"""Plain SGD to a target training loss: the loop lessons 7 and 8 share.

Every step is one batch of the same size drawn without replacement (the ragged end of an epoch
is dropped), updated as p -= lr * g with no optimizer state. The loss over the whole training set
is checked CHECKS_PER_EPOCH times an epoch (after every step for the full batch, whose own loss
is that loss for free), and the run stops the first time it is at or below the target — or at
`max_steps`, on divergence, or when asked.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from bsdemo.engine.train import DIVERGENCE_FACTOR, evaluate
from bsdemo.jobkinds import JobStopped
from bsdemo.tunables import CHECKS_PER_EPOCH

Vector = list[torch.Tensor]  # one tensor per parameter
CURVE_POINTS = 200  # a run's loss curve is thinned to about this many points


def summed_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over (x, y): samples, or the scored tokens of sequences."""
    logits = model(x)
    if logits.dim() > 2:
        logits, y = logits.flatten(0, 1), y.flatten()
    return F.cross_entropy(logits, y, reduction="sum")


@dataclass
class Descent:
    """How one run went: steps taken, when it first reached the target, how it ended."""

    steps: int = 0
    reached_at: int | None = None
    status: str = "completed"  # "completed" (reached), "capped" or "diverged"
    last_lr: float = 0.0
    curve: list[list[float]] = field(default_factory=list)  # [step, training loss]

    def thinned(self) -> list[list[float]]:
        every = max(1, len(self.curve) // CURVE_POINTS)
        return self.curve[::every] + ([self.curve[-1]] if (len(self.curve) - 1) % every else [])


def descend(*args, **kwargs) -> Descent:
    """descending() to its end: the finished run."""
    # every item is the same Descent, updated in place: keep only the last, not a list of them
    (run,) = collections.deque(descending(*args, **kwargs), maxlen=1)
    return run


def descending(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    batch: int,
    lr: float,
    target_loss: float,
    max_steps: int,
    seed: int,
    batch_stats: bool = False,
    warmup_steps: int = 0,
    extend: int = 1,
    extra_gradient: Callable[[], Vector] | None = None,
    after_step: Callable[[int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[Descent]:
    """Train model in place with plain SGD until the training loss first reaches target_loss,
    then on to `extend` times that many steps; yields the run (one Descent, updated in place)
    each time its training loss is checked, and once more when it ends. warmup_steps: a linear
    lr ramp; extra_gradient: added to each step's gradient; after_step(step): called after each
    update. batch_stats: the model normalises with its batch (BatchNorm), so a full step's loss
    is not the evaluation loss and the full batch is checked like any other."""
    n = len(y)
    batch = min(batch, n)
    params = [p for p in model.parameters() if p.requires_grad]
    batches = torch.Generator(device=x.device).manual_seed(seed)
    full = batch == n and not batch_stats  # a full step's own loss is the training loss
    check = 1 if full else max(1, n // (batch * CHECKS_PER_EPOCH))
    run = Descent(last_lr=lr, curve=[[0, evaluate(model, x, y)[0]]])
    stop_at = max_steps

    def filed(train_loss: float) -> bool:
        """File the training loss at this step; whether the run stops here."""
        nonlocal stop_at
        run.curve.append([run.steps, train_loss])
        if not math.isfinite(train_loss) or train_loss > DIVERGENCE_FACTOR * run.curve[0][1]:
            run.status, stop_at = "diverged", run.steps
        elif run.reached_at is None and train_loss <= target_loss:
            run.reached_at = run.steps
            stop_at = run.steps * extend
        return run.steps >= stop_at

    model.train()
    while run.steps < stop_at:
        order = torch.randperm(n, generator=batches, device=x.device)
        for idx in order.split(batch):
            if len(idx) < batch:
                break  # drop the ragged end: every step sees a batch of the same size
            if should_stop is not None and should_stop():
                raise JobStopped("Stopped before it finished.")
            loss = summed_loss(model, x[idx], y[idx]) / len(idx)
            if full and run.steps:
                if filed(loss.item()):
                    break
                yield run
            run.last_lr = lr * min(1.0, (run.steps + 1) / warmup_steps) if warmup_steps else lr
            grads = torch.autograd.grad(loss, params)
            if extra_gradient is not None:
                grads = [g + e for g, e in zip(grads, extra_gradient(), strict=True)]
            with torch.no_grad():
                for p, g in zip(params, grads, strict=True):
                    p.sub_(run.last_lr * g)
            run.steps += 1
            if after_step is not None:
                after_step(run.steps)
            if not full and run.steps % check == 0:
                if filed(evaluate(model, x, y)[0]):
                    break
                yield run
            if run.steps >= stop_at:
                break
    if run.reached_at is None and run.status == "completed":
        run.status = "capped"
    yield run
