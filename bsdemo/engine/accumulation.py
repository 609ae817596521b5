"""Gradient accumulation, checked: one batch of k·b against k accumulated micro-batches of b.

From the same seed and the same samples, the two must give the same gradients up to float32
rounding (~1e-7 relative), and after N optimizer steps the same parameters. Three ways to break
it, each a switch here:
- unscaled_loss: summing k micro-batch *mean* losses without dividing by k (gradients k× too big);
- a BatchNorm model (norm="batch"): its statistics are per micro-batch, not per batch;
- variable_length: per-token mean loss over sequences of different lengths, averaged per
  micro-batch instead of over all the tokens of the batch (the arithmetic task with 1–4 scored
  answer digits per sample).
Also measured: peak memory and samples/s of both, to show memory stays at the micro-batch's
level and accumulation buys no throughput.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.data import IGNORE, epoch_batches
from bsdemo.engine.train import prepare, train
from bsdemo.jobkinds import JobStopped, accumulation_config
from bsdemo.tunables import ACCUM_MEASURE_STEPS

EQUIVALENT_REL = 1e-4  # float32 summation-order differences stay far below this
# after the steps, a parameter further apart than this is rounding that grew (seen with
# LayerNorm: gradients equal to 2e-7 at the first step, one weight 2e-4 apart five steps later)
PARAM_DRIFT = 1e-5


def _loss(model, xb, yb, scale: float, token_total: int | None) -> torch.Tensor:
    logits = model(xb)
    if logits.dim() > 2:
        logits, yb = logits.flatten(0, 1), yb.flatten()
        if token_total is not None:  # right: sum over tokens / tokens of the whole batch
            return F.cross_entropy(logits, yb, reduction="sum") / token_total
    return F.cross_entropy(logits, yb) * scale  # mean over this micro-batch (its tokens), scaled


def _variable_lengths(y: torch.Tensor, seed: int) -> torch.Tensor:
    """Keep 1–4 scored answer digits per sample (the rest ignored): unequal token counts."""
    g = torch.Generator().manual_seed(seed)
    keep = torch.randint(1, 5, (len(y),), generator=g)  # answer digits scored per sample
    y = y.clone()
    positions = torch.arange(y.shape[1])
    y[positions.unsqueeze(0) >= (7 + keep).unsqueeze(1)] = IGNORE
    return y


def accumulation_check(
    cfg: RunConfig,
    micro_batch: int,
    accum: int,
    steps: int = 5,
    *,
    unscaled_loss: bool = False,
    variable_length: bool = False,
    measure_steps: int = ACCUM_MEASURE_STEPS,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Compare both ways for `steps` optimizer steps; returns the accum_check record. Raises
    JobStopped between two steps when should_stop() says so (Stop, the job's time cap)."""
    cfg = accumulation_config(cfg, variable_length)
    base = dataclasses.replace(cfg, accumulation_steps=1, epochs=None, max_steps=steps)
    big_cfg = dataclasses.replace(base, batch_size=micro_batch * accum)
    checked, _ = big_cfg.validated()
    if checked.batch_size != micro_batch * accum:
        raise ConfigError(
            "micro_batch",
            micro_batch,
            f"micro-batch × accumulation at most the {checked.train_samples} "
            f"training samples (got {micro_batch} × {accum})",
        )
    big, small = prepare(big_cfg), prepare(dataclasses.replace(base, batch_size=micro_batch))
    x, y = big.data.x_train, big.data.y_train
    if variable_length:
        y = _variable_lengths(y, cfg.seed)
    generator = torch.Generator(device=big.device).manual_seed(cfg.seed)
    n = len(y)
    first_grads: list[tuple[str, float, float]] | None = None
    done = 0
    while done < steps:
        for idx in epoch_batches(n, micro_batch * accum, generator, big.device):
            if should_stop is not None and should_stop():
                raise JobStopped
            if len(idx) < micro_batch * accum:
                continue  # full batches only: the comparison is about k·b = one batch
            tokens = int((y[idx] != IGNORE).sum()) if y.dim() > 1 else None
            big.optimizer.zero_grad(set_to_none=True)
            _loss(big.model, x[idx], y[idx], 1.0, tokens).backward()
            small.optimizer.zero_grad(set_to_none=True)
            for micro in idx.split(micro_batch):
                scale = 1.0 if unscaled_loss else 1.0 / accum
                # the pitfall under test: per-micro-batch token mean (token_total=None)
                per_token = None if variable_length else tokens
                _loss(small.model, x[micro], y[micro], scale, per_token).backward()
            if first_grads is None:
                first_grads = [
                    (name, (p.grad - q.grad).abs().max().item(), p.grad.norm().item())
                    for (name, p), q in zip(
                        big.model.named_parameters(), small.model.parameters(), strict=True
                    )
                    if p.grad is not None
                ]
                num = sum(
                    ((p.grad - q.grad) ** 2).sum()
                    for p, q in zip(big.model.parameters(), small.model.parameters(), strict=True)
                    if p.grad is not None
                )
                den = sum((p.grad**2).sum() for p in big.model.parameters() if p.grad is not None)
                rel_grad = (num.sqrt() / den.sqrt().clamp_min(1e-30)).item()
            big.optimizer.step()
            small.optimizer.step()
            done += 1
            if done == steps:
                break
    param_diff = max(
        (p - q).abs().max().item()
        for p, q in zip(big.model.parameters(), small.model.parameters(), strict=True)
    )
    memory = _measure(big_cfg, small.cfg, accum, measure_steps, should_stop)
    return {
        "kind": "accum_check",
        "micro_batch": micro_batch,
        "accumulation_steps": accum,
        "effective_batch_size": micro_batch * accum,
        "steps": steps,
        "max_abs_grad_diff": max(d for _, d, _ in first_grads),
        "rel_grad_diff": rel_grad,
        "max_abs_param_diff": param_diff,
        "equivalent": rel_grad < EQUIVALENT_REL,
        "drift_grew": param_diff > PARAM_DRIFT,
        # the module's type beside its name: the page numbers layers, not module indices
        "per_layer": [
            {
                "layer": name,
                "module": type(big.model.get_submodule(name.rpartition(".")[0])).__name__,
                "max_abs_grad_diff": d,
                "grad_norm": g,
            }
            for name, d, g in first_grads
        ],
        "unscaled_loss": unscaled_loss,
        "norm": cfg.norm,
        "variable_length": variable_length,
        **memory,
    }


def _measure(
    big_cfg: RunConfig,
    small_cfg: RunConfig,
    accum: int,
    steps: int,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Peak memory and median samples/s of one big batch vs the accumulated micro-batches."""
    out = {}
    for name, cfg in (
        ("big", big_cfg),
        ("accumulated", dataclasses.replace(small_cfg, accumulation_steps=accum)),
    ):
        end = list(
            train(
                dataclasses.replace(cfg, epochs=None, max_steps=steps),
                evaluations=False,
                should_stop=should_stop,
            )
        )[-1]
        if end.status == "cancelled":
            raise JobStopped
        out[f"{name}_peak_memory_bytes"] = end.summary["peak_memory_bytes"]
        out[f"{name}_samples_per_sec"] = end.summary["samples_per_sec"]
        out["memory_source"] = end.summary["memory_source"]
    return out
