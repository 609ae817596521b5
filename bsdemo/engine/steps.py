"""What a run is made of, torch-side: its prepared model, data and optimizer (`prepare`), the
learning rate at a step (warm-up), a micro-batch's share of the loss, an evaluation over a split,
and what counts as out of memory. Shared by the training loop and the lessons' studies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bsdemo.config import CheckedRunConfig, ConfigError, RunConfig
from bsdemo.engine.data import IGNORE, Dataset, load_dataset
from bsdemo.engine.measure import (
    resolve_device,
)
from bsdemo.engine.memory import (
    SimulatedOutOfMemoryError,
    tensor_bytes,
)
from bsdemo.engine.models import GAN, build_model, make_optimizer
from bsdemo.engine.own import active
from bsdemo.footprint import EVAL_CHUNK, expected_optimizer_state_bytes
from bsdemo.units import format_bytes


def lr_at(cfg: RunConfig, step_index: int) -> float:
    """Learning rate for the optimizer step with 0-based index step_index (linear warm-up)."""
    if cfg.warmup_steps and step_index < cfg.warmup_steps:
        return cfg.lr * (step_index + 1) / cfg.warmup_steps
    return cfg.lr


def micro_loss(
    model: torch.nn.Module,
    xb: torch.Tensor,
    yb: torch.Tensor,
    effective: int,
    loss_fn: Callable | None = None,
) -> torch.Tensor:
    """This micro-batch's share of the mean loss over an effective batch of `effective` samples.

    mean x (b / effective) = sum / effective; a whole batch skips the extra multiply (hot path).
    loss_fn(outputs, targets) -> mean loss: a model the user brought (bsdemo.api); None: the
    lab's own losses.
    """
    if isinstance(model, GAN):  # both players' losses, each moving only its own player
        d_loss, g_loss = model.losses(xb)
        model.parts.append((d_loss.detach(), g_loss.detach(), len(yb)))
        loss = d_loss + g_loss
        return loss if len(yb) == effective else loss * (len(yb) / effective)
    logits = model(xb)
    if loss_fn is not None:
        loss = loss_fn(logits, yb)
    elif logits.dim() > 2:  # a sequence model: (B, T, V) logits against (B, T) targets
        logits, yb_flat = logits.flatten(0, 1), yb.flatten()
        loss = F.cross_entropy(logits, yb_flat)  # mean over the scored tokens (same per sample)
    else:
        loss = F.cross_entropy(logits, yb)
    size = yb.shape[0]  # not len(): Tensor.__len__ is Python, and this runs every step
    return loss if size == effective else loss * (size / effective)


@torch.no_grad()
def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(mean loss, accuracy) over a whole split, in chunks; the model is put back in train mode."""
    model.eval()
    loss_sum = torch.zeros((), device=x.device)
    correct = torch.zeros((), device=x.device, dtype=torch.int64)
    for xb, yb in zip(x.split(EVAL_CHUNK), y.split(EVAL_CHUNK), strict=True):
        logits = model(xb)
        if logits.dim() > 2:  # sequence: score the targeted tokens only
            logits, yb = logits.flatten(0, 1), yb.flatten()
        loss_sum += F.cross_entropy(logits, yb, reduction="sum")
        correct += (logits.argmax(1) == yb).sum()
    model.train()
    n = int((y != IGNORE).sum())  # samples, or scored tokens of a sequence task
    return loss_sum.item() / n, correct.item() / n  # .item(): one device sync per split


@dataclass
class Prepared:
    """Everything a run trains: kept by callers (tests, lessons) that inspect the model after."""

    cfg: CheckedRunConfig  # oversize batches clamped
    notices: list[str]
    device: torch.device
    data: Dataset
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    # a model the user brought (bsdemo.engine.own): its loss(outputs, targets), and its
    # optimizer keeps the learning rates it was made with (None: the lab's own model and loss)
    loss: Callable | None = None


def prepare(cfg: RunConfig) -> Prepared:
    """Validate cfg, load the data onto the device, seed and build the model and optimizer: the
    lab's own model and dataset, or the user's (bsdemo.engine.own.using) with cfg's settings.

    Raises ConfigError for an invalid cfg (or a device that is not there).
    """
    own = active()
    if own is not None:
        return Prepared(*own.parts(cfg), loss=own.loss)
    cfg, notices = cfg.validated()
    device = resolve_device(cfg.device)
    data = load_dataset(cfg, device)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, data.input_shape, data.n_classes).to(device)
    if isinstance(model, GAN):
        model.fit_range(data.x_train)
    return Prepared(cfg, notices, device, data, model, make_optimizer(cfg, model.parameters()))


def check_budget(run: Prepared, budget: int) -> int:
    """The bytes the model needs with no batch at all (parameters, gradients, optimizer state);
    a ConfigError when that alone exceeds the budget."""
    param_bytes = tensor_bytes(p for p in run.model.parameters() if p.requires_grad)
    fixed = 2 * param_bytes + expected_optimizer_state_bytes(run.cfg.optimizer, param_bytes)
    if fixed > budget:
        raise ConfigError(
            "memory_budget",
            format_bytes(budget),
            f"at least {format_bytes(fixed)}: the model alone (parameters, "
            f"gradients and {run.cfg.optimizer} state) needs that much",
        )
    return fixed


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether exc is a device or host allocation failure, or a simulated one past the budget
    (a result to show, not a crash). MPS, and the CPU allocator under the worker's address-space
    ceiling, report theirs as plain errors."""
    text = str(exc)
    return (
        isinstance(exc, (torch.OutOfMemoryError, MemoryError, SimulatedOutOfMemoryError))
        or "out of memory" in text
        or "can't allocate memory" in text
    )
