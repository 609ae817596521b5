"""Fitting a bigger batch (lesson 10): under one memory budget, the largest batch each technique
lets a training step fit, and the samples per second it reaches — measured, not estimated.

Techniques (TECHNIQUES; `available` says which run on a device):
- fp32: the model as it is.
- bf16: the forward pass under autocast to bfloat16 (CPU and CUDA): activations are saved in
  half the bytes; parameters, gradients and optimizer state stay fp32.
- fp16: autocast to float16 with a gradient scaler (CUDA only).
- checkpointing: each block's forward is run again in the backward (torch.utils.checkpoint,
  non-reentrant): only each block's input is kept, plus one block's activations at a time.
- bf16+checkpointing: both.
- accumulation: k micro-batches of the largest fp32 batch per optimizer step: the effective
  batch grows k times at the micro-batch's memory (and time per sample).

A step's memory: on CUDA the allocator's peak; elsewhere the accounted bytes, as the engine counts
them (parameters, gradients, optimizer state, the activations autograd saves, counted with
saved-tensor hooks, and a workspace the size of the largest of them; for checkpointing, what is
saved outside the blocks, each block's input, and the largest block's own activations, which is
what the backward holds while it recomputes that block). The CPU has no allocator limit to fail
against, so the budget is applied to the accounting there; beside it each technique's *real*
peak — what torch's CPU allocator held during a step, from the profiler's memory events — is
read at one common batch (fp32's largest), and a saving is only real where that is lower. Each
technique's memory is measured at two probe batches and fitted M(B) = M0 + m·B; the largest
batch under the budget is predicted, then verified by a real step (halved until it fits).
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.fitstep import Stepper
from bsdemo.engine.steps import is_out_of_memory
from bsdemo.engine.train import check_budget
from bsdemo.fits import linear_fit
from bsdemo.jobkinds import FIT_TECHNIQUES, check_stop
from bsdemo.tunables import FIT_BUDGET_BATCH, FIT_BUDGET_STEPS, FIT_PROBES, FIT_TIMED_STEPS

TECHNIQUES = FIT_TECHNIQUES

__all__ = ["TECHNIQUES", "Stepper", "available", "fit_batch", "loss_after"]


def available(device: torch.device, checkpointable: bool = True) -> list[str]:
    """The techniques this device runs (fp16 needs CUDA) on a model (checkpointing needs its
    blocks: own_segments)."""
    return [
        t
        for t in TECHNIQUES
        if (t != "fp16" or device.type == "cuda") and (checkpointable or "checkpointing" not in t)
    ]


def _peak(stepper: Stepper, batch: int, technique: str) -> int | None:
    """The peak of one step of `batch`, or None when the device itself ran out of memory (a
    CUDA out-of-memory error, the CPU allocator's "can't allocate memory"): the step's tensors
    are let go and the search goes on below it, as the sweep and the finder do."""
    try:
        return stepper.step(batch, technique)[0]
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
    stepper.model.zero_grad(set_to_none=True)
    gc.collect()
    if stepper.device.type == "cuda":
        torch.cuda.empty_cache()
    return None


def loss_after(
    cfg: RunConfig,
    technique: str,
    steps: int,
    batch: int,
    accumulation: int = 4,
    should_stop: Callable[[], bool] | None = None,
) -> float:
    """The training loss (fp32, whole set) after `steps` plain-SGD steps of `batch` samples from
    the seed's initialisation, each step taken with the technique (accumulation: `accumulation`
    micro-batches making up the same batch): what mixed precision or accumulation did to the
    result."""
    stepper = Stepper(cfg)
    model, params = stepper.model, stepper.params
    x, y = stepper.run.data.x_train, stepper.run.data.y_train
    order = torch.Generator(device=x.device).manual_seed(cfg.seed)
    base = "fp32" if technique == "accumulation" else technique
    parts = accumulation if technique == "accumulation" else 1
    optimizer = torch.optim.SGD(params, lr=cfg.lr)
    for _ in range(steps):
        check_stop(should_stop)
        idx = torch.randperm(len(y), generator=order, device=x.device)[:batch]
        optimizer.zero_grad(set_to_none=True)
        for chunk in idx.chunk(parts):
            with stepper._autocast(base):
                loss = stepper.loss(stepper._forward(x[chunk], base), y[chunk]) * len(chunk) / len(idx)
            (stepper.scaler.scale(loss) if base == "fp16" else loss).backward()
        if base == "fp16":  # unscale, and skip a step whose gradients overflowed
            stepper.scaler.step(optimizer)
            stepper.scaler.update()
        else:
            optimizer.step()
    with torch.no_grad():
        model.eval()
        return stepper.loss(model(x), y).item()


def _loss_or_none(cfg: RunConfig, technique: str, *args) -> float | None:
    """loss_after, or None when the device ran out of memory taking it (its batch, or the
    whole set's loss, larger than the device holds)."""
    try:
        return loss_after(cfg, technique, *args)
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return None


def fit_batch(
    cfg: RunConfig,
    memory_budget_bytes: int,
    techniques: Sequence[str] | None = None,
    accumulation: int = 4,
    max_batch: int = 65536,
    budget_steps: int = FIT_BUDGET_STEPS,
    budget_batch: int = FIT_BUDGET_BATCH,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """One fit_batch_result per technique, then the fit_batch_end. Each result also carries the
    training loss after `budget_steps` steps of `budget_batch` from the same start with that
    technique, and its difference from fp32's."""
    stepper = Stepper(cfg)
    check_budget(stepper.run, memory_budget_bytes)  # the model alone must fit
    runs_here = available(stepper.device, stepper.checkpointable)
    names = list(techniques or runs_here)
    missing = [t for t in names if t not in runs_here]
    if missing:
        raise ConfigError(
            "techniques",
            missing[0],
            ", ".join(runs_here)
            + (
                " (checkpointing needs the model's blocks: a torch.nn.Sequential, or a segments() "
                "method returning (stem, blocks, head))"
                if "checkpointing" in missing[0]
                else " (fp16 needs a CUDA device; bf16 runs here)"
            ),
        )
    n = len(stepper.run.data.y_train)
    reference = _loss_or_none(cfg, "fp32", budget_steps, budget_batch, accumulation, should_stop)
    results = {}
    common = None  # on the CPU: the batch (fp32's largest) every technique's real peak is read at
    for name in names:
        check_stop(should_stop)
        base = "fp32" if name == "accumulation" else name
        if base in results:
            line, probe_oom = results[base]["fit"], results[base].get("device_oom_batch")
        else:
            peaks = [check_stop(should_stop) or _peak(stepper, b, base) for b in FIT_PROBES]
            probe_oom = next((b for b, p in zip(FIT_PROBES, peaks, strict=True) if p is None), None)
            fit = linear_fit(FIT_PROBES, peaks) if probe_oom is None else None
            line = (fit.intercept, fit.slope) if fit else None
        device_oom = None  # the batch the device itself ran out of memory at, if it did
        if line is None:  # a probe ran out of the device's own memory: nothing to fit
            m0 = slope = predicted = peak = None
            batch, device_oom = 0, probe_oom
        else:
            m0, slope = line
            predicted = max(
                1, min(max_batch, math.floor((memory_budget_bytes - m0) / slope) if slope > 0 else max_batch)
            )
            batch, peak = predicted, None
        while batch >= 1:  # verify with a real step; step down in proportion until it fits
            check_stop(should_stop)
            peak = _peak(stepper, batch, base)
            if peak is None:  # the device ran out before the budget did: halve
                device_oom, batch = batch, batch // 2
                continue
            if peak <= memory_budget_bytes:
                break
            # memory grows at most in proportion to the batch past the fixed part, so this lands
            # at or under the budget in a step or two (halving gave up a third of the batch)
            batch = min(batch - 1, math.floor(batch * memory_budget_bytes / peak))
        oom = {"device_oom_batch": device_oom} if device_oom is not None else {}
        if batch < 1:
            record = {
                "kind": "fit_batch_result",
                "technique": name,
                "max_batch_size": 0,
                "effective_batch_size": 0,
                "samples_per_sec": None,
                "peak_memory_bytes": peak,
                "predicted_max": predicted,
                "fixed_bytes": None if m0 is None else round(m0),
                "bytes_per_sample": slope,
                **oom,
            }
        else:
            k = accumulation if name == "accumulation" else 1
            times = sorted(
                check_stop(should_stop) or stepper.step(batch, base, k, memory=False)[1]
                for _ in range(FIT_TIMED_STEPS)
            )
            record = {
                "kind": "fit_batch_result",
                "technique": name,
                "max_batch_size": batch,
                "effective_batch_size": batch * k,
                "accumulation_steps": k,
                "samples_per_sec": batch * k / times[len(times) // 2],
                "clock": stepper.clock,
                "peak_memory_bytes": peak,
                "predicted_max": predicted,
                "fixed_bytes": round(m0),
                "bytes_per_sample": slope,
                **oom,
            }
        after = (
            reference
            if name == "fp32"
            else _loss_or_none(cfg, name, budget_steps, budget_batch, accumulation, should_stop)
        )
        record |= {
            "loss_after": after,
            "loss_vs_fp32": None if after is None or reference is None else after - reference,
            "budget_steps": budget_steps,
            "budget_batch": budget_batch,
        }
        if name == "fp32" and batch >= 1:
            common = batch
        if common is not None:  # accumulation: micro-batches of that size
            check_stop(should_stop)
            real = stepper.allocator_peak(common, base, record.get("accumulation_steps", 1))
            if real is not None:
                record |= {"real_peak_bytes": real, "real_batch": common}
        results[name] = record | {"fit": line}
        yield record
    yield {
        "kind": "fit_batch_end",
        "techniques": names,
        "train_samples": n,
        "memory_budget_bytes": memory_budget_bytes,
        "message": "Largest batch under the budget: "
        + ", ".join(f"{name} {results[name]['max_batch_size']}" for name in names)
        + ".",
    }
