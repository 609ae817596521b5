"""The training loop: one function that yields events (start, step, eval, end).

One optimizer step = `accumulation_steps` micro-batches of `batch_size` samples. Each micro-batch's
loss is its mean loss times (its size / the effective batch's size), so the summed gradients are
exactly those of the mean loss over the effective batch — the textbook "scale by 1/k" when the
micro-batches are equal, and still right for a partial last batch.
"""

from __future__ import annotations

import gc
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.data import IGNORE, Dataset, epoch_batches, load_dataset
from bsdemo.engine.measure import (
    MemoryMeter,
    NvmlSampler,
    SavedActivations,
    SimulatedOutOfMemoryError,
    device_info,
    optimizer_state_bytes,
    resolve_device,
    set_cuda_budget,
    synchronize,
    tensor_bytes,
)
from bsdemo.engine.models import build_model, make_optimizer
from bsdemo.events import EndEvent, EvalEvent, StartEvent, StepEvent
from bsdemo.footprint import EVAL_CHUNK, expected_optimizer_state_bytes
from bsdemo.units import format_bytes

MEASURE_WARMUP_STEPS = 3  # first steps excluded from throughput summaries (allocator, caches)
DIVERGENCE_FACTOR = 1000.0  # a loss this many times the first one counts as diverged


def lr_at(cfg: RunConfig, step_index: int) -> float:
    """Learning rate for the optimizer step with 0-based index step_index (linear warm-up)."""
    if cfg.warmup_steps and step_index < cfg.warmup_steps:
        return cfg.lr * (step_index + 1) / cfg.warmup_steps
    return cfg.lr


def _simulated_oom_text(size: int, need: int, fixed: int, activations: int, workspace: int,
                        budget: int) -> str:
    return (f"Simulated out of memory: a micro-batch of {size} needs {format_bytes(need)} "
            f"(parameters + gradients + optimizer state {format_bytes(fixed)}, saved activations "
            f"{format_bytes(activations)}, workspace {format_bytes(workspace)}) but the budget is "
            f"{format_bytes(budget)}. The CPU has no allocator limit, so the budget is enforced "
            f"on accounted memory.")


def micro_loss(model: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor,
               effective: int) -> torch.Tensor:
    """This micro-batch's share of the mean loss over an effective batch of `effective` samples.

    mean x (b / effective) = sum / effective; a whole batch skips the extra multiply (hot path).
    """
    logits = model(xb)
    if logits.dim() > 2:  # a sequence model: (B, T, V) logits against (B, T) targets
        logits, yb_flat = logits.flatten(0, 1), yb.flatten()
        loss = F.cross_entropy(logits, yb_flat)  # mean over the scored tokens (same per sample)
    else:
        loss = F.cross_entropy(logits, yb)
    return loss if len(yb) == effective else loss * (len(yb) / effective)


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
    cfg: RunConfig  # validated, with clamping applied
    notices: list[str]
    device: torch.device
    data: Dataset
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer


def prepare(cfg: RunConfig) -> Prepared:
    """Validate cfg, load the data onto the device, seed and build the model and optimizer.

    Raises ConfigError for an invalid cfg (or a device that is not there).
    """
    cfg, notices = cfg.validated()
    device = resolve_device(cfg.device)
    data = load_dataset(cfg, device)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, data.input_shape, data.n_classes).to(device)
    return Prepared(cfg, notices, device, data, model, make_optimizer(cfg, model.parameters()))


def check_budget(run: Prepared, budget: int) -> int:
    """The bytes the model needs with no batch at all (parameters, gradients, optimizer state);
    a ConfigError when that alone exceeds the budget."""
    param_bytes = tensor_bytes(p for p in run.model.parameters() if p.requires_grad)
    fixed = 2 * param_bytes + expected_optimizer_state_bytes(run.cfg.optimizer, param_bytes)
    if fixed > budget:
        raise ConfigError("memory_budget", format_bytes(budget),
                          f"at least {format_bytes(fixed)}: the model alone (parameters, "
                          f"gradients and {run.cfg.optimizer} state) needs that much")
    return fixed


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether exc is a device or host allocation failure (a result to show, not a crash)."""
    text = str(exc)
    return (isinstance(exc, (torch.OutOfMemoryError, MemoryError))
            or "out of memory" in text or "can't allocate memory" in text)


def train(cfg: RunConfig, should_stop: Callable[[], bool] | None = None,
          prepared: Prepared | None = None, evaluations: bool = True,
          memory_budget_bytes: int | None = None) -> Iterator:
    """Run cfg to completion (or divergence, OOM, cancellation), yielding events as it goes.

    Raises ConfigError for an invalid cfg before anything runs; every other outcome ends with
    an EndEvent. Pass `prepared` (from prepare(cfg)) to keep hold of the trained model;
    evaluations=False skips the train/test evaluations (sweeps time steps only).
    memory_budget_bytes caps memory: on CUDA the allocator itself (a real OOM), elsewhere the
    accounted memory (a *simulated* OOM).
    """
    run = prepared or prepare(cfg)
    meter = MemoryMeter(run.device)
    info = device_info(run.device)
    notices = list(run.notices)
    if memory_budget_bytes is not None:
        check_budget(run, memory_budget_bytes)
        if run.device.type == "cuda":
            memory_budget_bytes, notice = set_cuda_budget(run.device, memory_budget_bytes)
            notices += [notice] if notice else []
    yield StartEvent(
        config=vars(run.cfg).copy(), notices=notices, device=info,
        train_samples=len(run.data.y_train), test_samples=len(run.data.y_test),
        parameters=sum(p.numel() for p in run.model.parameters() if p.requires_grad),
        effective_batch_size=run.cfg.effective_batch_size,
        tokens_per_sample=run.data.tokens_per_sample,
        updates_per_epoch=run.cfg.updates_per_epoch, planned_steps=run.cfg.planned_steps,
        memory_source=meter.source)
    sampler = NvmlSampler(run.device)
    try:
        yield from _loop(run.cfg, run.data, run.model, run.optimizer, meter, sampler, run.device,
                         info, should_stop, evaluations, memory_budget_bytes)
    finally:
        sampler.close()
        if memory_budget_bytes is not None and run.device.type == "cuda":
            set_cuda_budget(run.device, None)


def _loop(cfg: RunConfig, data: Dataset, model, optimizer, meter: MemoryMeter,
          sampler: NvmlSampler, device: torch.device, info: dict, should_stop,
          evaluations: bool, budget: int | None) -> Iterator:
    params = [p for p in model.parameters() if p.requires_grad]
    param_bytes = tensor_bytes(params)
    # optimizer state is allocated lazily by the first step (Adam): predicted until then
    state_bytes = expected_optimizer_state_bytes(cfg.optimizer, param_bytes)
    # micro-batch size -> bytes autograd saves for backward, and our workspace estimate (the
    # largest saved tensor: backward allocates gradient buffers of that size). Counted once per
    # size with saved-tensor hooks: the same shapes save the same bytes every step.
    activation_bytes: dict[int, int] = {}
    workspace_bytes: dict[int, int] = {}
    largest_micro = 0
    accounting = meter.source == "accounted"
    on_device = device.type != "cpu"  # the CPU needs no sync and has no peak counter to reset
    current_lr = None
    step_baseline = last_allocated = last_reserved = None
    # locals, not attribute look-ups, on the per-step path (it runs 10^5 times at batch 1)
    batch_size, warmup_steps, max_steps = cfg.batch_size, cfg.warmup_steps, cfg.max_steps
    time_limit = cfg.time_limit_s
    eval_interval, x_train, y_train = cfg.eval_interval, data.x_train, data.y_train
    generator = torch.Generator(device=device).manual_seed(cfg.seed)
    n_train = len(data.y_train)
    full_size = min(cfg.effective_batch_size, n_train)  # the summary's medians: full batches
    step = samples_seen = 0
    first_loss: float | None = None
    rates: list[float] = []
    step_times: list[float] = []
    peak_memory = 0
    eval_time = 0.0
    t_origin = time.perf_counter()
    done = False
    last = dict.fromkeys(("step", "train_loss", "train_accuracy", "test_loss", "test_accuracy"))

    def run_eval(epoch_done: float) -> EvalEvent:
        nonlocal eval_time
        t = time.perf_counter()
        train_loss, train_acc = evaluate(model, data.x_train, data.y_train)
        test_loss, test_acc = evaluate(model, data.x_test, data.y_test)
        eval_time += time.perf_counter() - t
        last.update(step=step, train_loss=train_loss, train_accuracy=train_acc, test_loss=test_loss,
                    test_accuracy=test_acc)
        return EvalEvent(step=step, epoch=epoch_done, samples_seen=samples_seen,
                         wall_time_s=wall_time(), train_loss=train_loss, train_accuracy=train_acc,
                         test_loss=test_loss, test_accuracy=test_acc)

    def wall_time() -> float:  # training time: evaluations are excluded
        return time.perf_counter() - t_origin - eval_time

    def summary() -> dict:
        steady = slice(min(MEASURE_WARMUP_STEPS, max(len(rates) - 1, 0)), None)
        act, ws = activation_bytes.get(largest_micro, 0), workspace_bytes.get(largest_micro, 0)
        breakdown = {"parameters": param_bytes, "gradients": param_bytes,
                     "optimizer_state": state_bytes, "activations": act,
                     "workspace": ws if accounting else None, "micro_batch": largest_micro}
        if not accounting and peak_memory:
            breakdown["workspace"] = max(peak_memory - 2 * param_bytes - state_bytes - act, 0)
            if last_reserved is not None and last_allocated is not None:
                breakdown["allocator_cache"] = max(last_reserved - last_allocated, 0)
        return {"steps": step, "epochs": samples_seen / n_train, "samples_seen": samples_seen,
                "memory_breakdown": breakdown, "memory_budget_bytes": budget,
                "effective_batch_size": cfg.effective_batch_size,
                "samples_per_sec": statistics.median(rates[steady]) if rates else None,
                "step_time_s": statistics.median(step_times[steady]) if step_times else None,
                "wall_time_s": wall_time(), "peak_memory_bytes": peak_memory or None,
                "memory_source": meter.source, "final_train_loss": last["train_loss"],
                "final_train_accuracy": last["train_accuracy"], "test_loss": last["test_loss"],
                "test_accuracy": last["test_accuracy"], "evaluated_at_step": last["step"],
                "device": info.get("name", device.type),
                "warmup_steps_excluded": steady.start}

    if evaluations:
        yield run_eval(0.0)
    t_origin = time.perf_counter()
    eval_time = 0.0
    epochs = range(cfg.epochs) if cfg.epochs is not None else itertools.count()
    oom_text: str | None = None
    for epoch in epochs:
        batches = epoch_batches(n_train, cfg.effective_batch_size, generator, device)
        last_index = len(batches) - 1
        for batch_index, idx in enumerate(batches):
            if should_stop is not None and should_stop():
                yield EndEvent("cancelled", f"Stopped after {step} steps.", summary())
                return
            if time_limit is not None and step and wall_time() >= time_limit:
                if evaluations and last["step"] != step:  # the result is what it reached
                    yield run_eval(samples_seen / n_train)
                yield EndEvent("cancelled", f"Stopped at the time cap of {time_limit:g} s after "
                               f"{step} steps ({samples_seen / n_train:.3g} epochs).",
                               summary() | {"time_capped": True})
                return
            n_eff = len(idx)
            if step < warmup_steps or current_lr is None:  # after warm-up the hot path stays bare
                current_lr = lr_at(cfg, step)
                for group in optimizer.param_groups:
                    group["lr"] = current_lr
            if on_device:
                synchronize(device)
                meter.begin_step()
                step_baseline = meter.current()  # what an OOM in this step must return to
            t0 = time.perf_counter()
            try:
                optimizer.zero_grad(set_to_none=True)
                loss_sum = None
                step_activations = 0
                micro_batches = idx.split(batch_size) if n_eff > batch_size else (idx,)
                for micro in micro_batches:
                    xb, yb = x_train[micro], y_train[micro]
                    size = len(micro)
                    if size not in activation_bytes:  # first step of this size: count
                        with SavedActivations(params) as saved:
                            loss = micro_loss(model, xb, yb, n_eff)
                        activation_bytes[size] = saved.bytes
                        workspace_bytes[size] = saved.largest
                        largest_micro = max(largest_micro, size)
                    else:
                        loss = micro_loss(model, xb, yb, n_eff)
                    if accounting:
                        step_activations = max(step_activations,
                                               activation_bytes[size] + workspace_bytes[size])
                        if budget is not None:
                            need = 2 * param_bytes + state_bytes + step_activations
                            if need > budget:  # where a real allocator would fail: forward done
                                raise SimulatedOutOfMemoryError(_simulated_oom_text(
                                    size, need, 2 * param_bytes + state_bytes,
                                    activation_bytes[size], workspace_bytes[size], budget))
                    loss.backward()
                    # .item() below needs no detach for a lone micro-batch (hot path at batch 1)
                    loss_sum = loss if loss_sum is None else loss_sum.detach() + loss.detach()
                optimizer.step()
                loss_value = loss_sum.item()  # device sync point
                if on_device:
                    synchronize(device)
            except (torch.cuda.OutOfMemoryError, SimulatedOutOfMemoryError) as exc:
                oom_text = str(exc).strip().splitlines()[0][:400]  # keep text, not the traceback
                simulated = isinstance(exc, SimulatedOutOfMemoryError)
            except (RuntimeError, MemoryError) as exc:  # MPS, and the CPU allocator under
                # the worker's address-space ceiling, report OOM as plain errors
                if not is_out_of_memory(exc):
                    raise
                oom_text, simulated = (str(exc).strip().splitlines() or ["MemoryError"])[0][:400], False
            if oom_text is not None:
                # recover outside the except block, where the frames holding tensors are gone
                loss = loss_sum = xb = yb = None
                optimizer.zero_grad(set_to_none=True)
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                s = summary()
                after = meter.current()
                s.update(simulated=simulated, oom_error=oom_text, oom_batch_size=cfg.batch_size,
                         memory_after_recovery_bytes=after,
                         memory_baseline_bytes=step_baseline if on_device else None,
                         # on the CPU nothing was allocated: accounted memory is a model
                         memory_returned_to_baseline=(after <= step_baseline) if on_device
                         else None)
                yield EndEvent("oom", f"Out of memory at step {step + 1} (micro-batch "
                               f"{cfg.batch_size}){' — simulated' if simulated else ''}: "
                               f"{oom_text} Try a smaller batch size, or keep the effective batch "
                               f"with gradient accumulation.", s)
                return
            t_end = time.perf_counter()
            step_time = t_end - t0
            if step == 0:
                state_bytes = optimizer_state_bytes(optimizer)
            step += 1
            samples_seen += n_eff
            if not math.isfinite(loss_value) or (
                    first_loss is not None and loss_value > DIVERGENCE_FACTOR * first_loss):
                yield EndEvent("diverged", f"Diverged at step {step}: loss {loss_value:.4g} "
                               f"(first step {first_loss or float('nan'):.4g}). Lower the learning "
                               f"rate ({cfg.lr:g}) or add warm-up steps.", summary())
                return
            if first_loss is None:
                first_loss = loss_value
            persistent = 2 * param_bytes + state_bytes  # parameters + gradients + optimizer state
            if on_device:
                allocated, reserved, peak = meter.read(persistent, persistent + step_activations)
                last_allocated, last_reserved = allocated, reserved
                nvml = sampler.latest()
                utilization = nvml["utilization_pct"] if nvml else None
            else:  # accounted: plain arithmetic, no calls on the hot path
                allocated, reserved, peak = persistent, None, persistent + step_activations
                utilization = None
            if peak is not None and peak > peak_memory:
                peak_memory = peak
            rate = n_eff / step_time
            if n_eff == full_size:  # an epoch's partial last batch is a different, shorter step
                rates.append(rate)
                step_times.append(step_time)
            epoch_done = epoch + (batch_index + 1) / (last_index + 1)
            yield StepEvent(step=step, epoch=epoch_done, samples_seen=samples_seen,
                            wall_time_s=t_end - t_origin - eval_time, loss=loss_value, lr=current_lr,
                            step_time_s=step_time, samples_per_sec=rate,
                            memory_allocated_bytes=allocated, memory_reserved_bytes=reserved,
                            peak_memory_bytes=peak, utilization_pct=utilization)
            done = max_steps is not None and step >= max_steps
            if evaluations and ((eval_interval and step % eval_interval == 0) or (
                    not eval_interval and batch_index == last_index) or done):
                yield run_eval(epoch_done)
            if done:
                break
        if done:
            break
    if evaluations and last["step"] != step:  # a budget or interval that did not end on an eval
        yield run_eval(samples_seen / n_train)
    s = summary()
    acc = s["test_accuracy"]
    accuracy = f"; test accuracy {acc:.1%}" if acc is not None else ""
    yield EndEvent("completed", f"Completed {step} steps ({s['epochs']:.3g} epochs) in "
                   f"{s['wall_time_s']:.2f} s; median {s['samples_per_sec'] or 0:,.0f} samples/s"
                   f"{accuracy}.", s)
