"""Normalisation at tiny batches: none, BatchNorm, GroupNorm and LayerNorm on one model, trained
at several batch sizes for the same epochs, and what each does at evaluation.

Per (normalisation, batch size) cell: train and test accuracy (evaluation mode: BatchNorm uses
its running statistics), the test accuracy in training mode with the test set in batches of the
training batch (BatchNorm then normalises with each batch's own statistics: its train-vs-eval
gap), and the "same sample, different partners" test: the test set run in training mode in
batches of the training batch twice, shuffled two ways; the share of predictions that change
with the batch-mates alone (at batch 2, each feature of a pair normalises to ±1).
GroupNorm, LayerNorm and no normalisation compute each sample alone, so none of theirs change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from bsdemo.config import RunConfig
from bsdemo.engine.train import prepare, train
from bsdemo.jobkinds import NORMS, JobStopped, norms_configs


@torch.no_grad()
def _train_mode_predictions(
    model: torch.nn.Module, x: torch.Tensor, batch: int, order: torch.Tensor
) -> torch.Tensor:
    """Predictions for x (in its own order) with the model in training mode, x taken in
    batches of `batch` in the given order; running statistics are left as they were."""
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    model.train()
    preds = torch.empty(len(x), dtype=torch.int64, device=x.device)
    for chunk in order.split(batch):
        if len(chunk) < 2 and batch >= 2:  # a lone sample cannot be batch-normalised
            chunk = torch.cat([chunk, order[:1]])
            preds[chunk[:1]] = model(x[chunk]).argmax(1)[:1]
            continue
        preds[chunk] = model(x[chunk]).argmax(1)
    model.load_state_dict(saved)
    return preds


def norms_cell(run_cfg: RunConfig, should_stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Train one cell's config; returns its norms_result record."""
    run = prepare(run_cfg)
    end = None
    for event in train(run_cfg, should_stop=should_stop, prepared=run):
        if event.kind == "end":
            end = event
    if end.status == "cancelled":
        raise JobStopped(end.message)
    s, data, model = end.summary, run.data, run.model
    g = torch.Generator().manual_seed(run_cfg.seed + 1)
    n = len(data.y_test)
    first = torch.randperm(n, generator=g).to(data.x_test.device)
    second = torch.randperm(n, generator=g).to(data.x_test.device)
    batch = min(run.cfg.batch_size, n)
    shuffled = [_train_mode_predictions(model, data.x_test, batch, order) for order in (first, second)]
    return {
        "kind": "norms_result",
        "norm": run_cfg.norm,
        "batch_size": run_cfg.batch_size,
        "status": end.status,
        "test_accuracy": s.get("test_accuracy"),
        "train_accuracy": s.get("final_train_accuracy"),
        "train_mode_test_accuracy": (shuffled[0] == data.y_test).float().mean().item(),
        "partner_changed": (shuffled[0] != shuffled[1]).float().mean().item(),
        "steps": s.get("steps"),
        "wall_time_s": s.get("wall_time_s"),
        "message": end.message,
    }


def norms_grid(
    cfg: RunConfig,
    batch_sizes: Sequence[int],
    norms: Sequence[str] = NORMS,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """Every (norm, batch size) cell, norm by norm, smallest batch first; then norms_end."""
    runs = norms_configs(cfg, {"batch_sizes": list(batch_sizes), "norms": list(norms)})
    for run_cfg in runs:
        if should_stop is not None and should_stop():
            raise JobStopped("Stopped before it finished.")
        yield norms_cell(run_cfg, should_stop)
    yield {
        "kind": "norms_end",
        "cells": len(runs),
        "message": f"Trained {len(runs)} runs: {len(norms)} normalisations × "
        f"{len(batch_sizes)} batch sizes, {cfg.epochs} epochs each.",
    }
