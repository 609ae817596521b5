"""The training loop: one function that yields events (start, step, eval, end).

One optimizer step = `accumulation_steps` micro-batches of `batch_size` samples. Each micro-batch's
loss is its mean loss times (its size / the effective batch's size), so the summed gradients are
exactly those of the mean loss over the effective batch — the textbook "scale by 1/k" when the
micro-batches are equal, and still right for a partial last batch.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Iterator

import torch

from bsdemo.config import RunConfig
from bsdemo.engine.data import epoch_batches
from bsdemo.engine.measure import NvmlSampler, RunClock, device_info
from bsdemo.engine.memory import MemoryBook, MemoryMeter, set_cuda_budget
from bsdemo.engine.models import GAN
from bsdemo.engine.stepper import _Clock, _Stepper
from bsdemo.engine.steps import (  # the pieces of a run, here for callers of the loop
    Prepared,
    check_budget,
    evaluate,
    is_out_of_memory,
    lr_at,
    micro_loss,
    prepare,
)
from bsdemo.engine.tally import (
    DIVERGENCE_FACTOR,
    Tally,
    chance_of,
    completed,
    evaluation,
    out_of_memory,
    players,
    run_summary,
    time_capped,
)
from bsdemo.events import EndEvent, StartEvent, StepEvent
from bsdemo.units import setting, sig

__all__ = [
    "DIVERGENCE_FACTOR",
    "Prepared",
    "check_budget",
    "evaluate",
    "is_out_of_memory",
    "lr_at",
    "micro_loss",
    "prepare",
    "train",
]


def resident_bytes(data) -> int:
    """Bytes of the data set's tensors a run holds from start to end (train and test splits)."""
    return sum(
        t.nbytes
        for t in (getattr(data, name, None) for name in ("x_train", "y_train", "x_test", "y_test"))
        if isinstance(t, torch.Tensor)
    )


def train(
    cfg: RunConfig,
    should_stop: Callable[[], bool] | None = None,
    prepared: Prepared | None = None,
    evaluations: bool | str = True,
    memory_budget_bytes: int | None = None,
    cpu_budget_s: float | None = None,
    clock: RunClock | None = None,
) -> Iterator:
    """Run cfg to completion (or divergence, OOM, cancellation), yielding events as it goes.

    Raises ConfigError for an invalid cfg before anything runs; every other outcome ends with
    an EndEvent. Pass `prepared` (from prepare(cfg)) to keep hold of the trained model;
    evaluations=False skips the train/test evaluations (sweeps time steps only); "test"
    evaluates the test split alone (the train split's numbers are then None).
    memory_budget_bytes caps memory: on CUDA the allocator itself (a real OOM), elsewhere the
    accounted memory (a *simulated* OOM). cpu_budget_s ends the run like its time cap once the
    training thread has spent that much CPU time training (evaluations not counted), where a
    step's work is that thread's (a one-thread CPU: measure.cpu_clock): a fixed amount of work
    that a busy machine spreads over more wall time instead of cutting short. Elsewhere it is
    ignored and the time cap alone applies. clock: the run's own clocks where its worker steps
    several runs in turn (measure.RunClock): its time cap, wall times and CPU budget count its
    own turns only; None: the plain clocks.
    """
    now = clock.wall if clock is not None else time.perf_counter
    began = now()  # the time cap counts from here: data, model, evaluations too
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
        config=vars(run.cfg).copy(),
        notices=notices,
        device=info,
        train_samples=len(run.data.y_train),
        test_samples=len(run.data.y_test),
        parameters=sum(p.numel() for p in run.model.parameters() if p.requires_grad),
        effective_batch_size=run.cfg.effective_batch_size,
        tokens_per_sample=run.data.tokens_per_sample,
        updates_per_epoch=run.cfg.updates_per_epoch,
        planned_steps=run.cfg.planned_steps,
        memory_source=meter.source,
        dataset_bytes=resident_bytes(run.data),
    )
    sampler = NvmlSampler(run.device)
    try:
        yield from _loop(
            run,
            meter,
            sampler,
            info,
            should_stop,
            evaluations,
            memory_budget_bytes,
            began,
            cpu_budget_s,
            clock,
        )
    except Exception as exc:
        if run.loss is None:  # the lab's own model: a bug of ours, raised
            raise
        from bsdemo.engine.own import failure

        yield EndEvent("failed", failure(exc, run.cfg.batch_size), {})
    finally:
        sampler.close()
        if memory_budget_bytes is not None and run.device.type == "cuda":
            set_cuda_budget(run.device, None)


def _loop(
    run: Prepared,
    meter: MemoryMeter,
    sampler: NvmlSampler,
    info: dict,
    should_stop,
    evaluations: bool | str,
    budget: int | None,
    began: float,
    cpu_budget_s: float | None = None,
    run_clock: RunClock | None = None,
) -> Iterator:
    """One optimizer step per effective batch, epoch after epoch, until the budget ends the run,
    or Stop, the time cap, divergence or an out-of-memory does.

    Stop and the time cap are checked before every step and between the micro-batches of one
    (an accumulated step can take minutes); the cap is on the whole run's time, its setup and
    evaluations included, so the run ends on its own before the scheduler would end its worker.
    """
    cfg, device, optimizer = run.cfg, run.device, run.optimizer
    book = MemoryBook([p for p in run.model.parameters() if p.requires_grad], cfg.optimizer, meter, budget)
    n_train = len(run.data.y_train)
    tally = Tally(
        n_train,
        full_size=min(cfg.effective_batch_size, n_train),
        began=began,
        now=run_clock.wall if run_clock is not None else time.perf_counter,
    )
    summary = functools.partial(
        run_summary, cfg, tally, book, info.get("name", device.type), chance_of(run.data.y_test)
    )
    clock = _Clock(run, tally, should_stop, began, cpu_budget_s, run_clock)
    stepper = _Stepper(run, book, clock)
    step = stepper.step
    # locals, not attribute look-ups, on the per-step path (it runs 10^5 times at batch 1)
    warmup_steps, max_steps, eval_interval = cfg.warmup_steps, cfg.max_steps, cfg.eval_interval
    nvml = sampler if book.on_device else None
    gan = run.model if isinstance(run.model, GAN) else None
    generator = torch.Generator(device=device).manual_seed(cfg.seed)
    # a model the user brought keeps its optimizer's own learning rates (bsdemo.api)
    current_lr = optimizer.param_groups[0]["lr"] if run.loss is not None else None
    done = False
    if evaluations:
        yield evaluation(run, tally, 0.0, evaluations)
    clock.start()  # training time starts now: the first evaluation is not in it
    for epoch in range(cfg.epochs) if cfg.epochs is not None else itertools.count():
        batches = epoch_batches(n_train, cfg.effective_batch_size, generator, device, cfg.drops_lone_sample)
        last_index = len(batches) - 1
        for batch_index, idx in enumerate(batches):
            why = clock.interrupted() if tally.step else clock.stopped()
            if why is not None:
                yield from _cut_short(run, tally, summary, evaluations, why, cpu_budget_s, False)
                return
            if tally.step < warmup_steps or current_lr is None:  # after warm-up: a bare hot path
                current_lr = lr_at(cfg, tally.step)
                for group in optimizer.param_groups:
                    group["lr"] = current_lr
            loss_value, step_need, why, oom, step_time, step_cpu, device_time = step(idx)
            if oom is not None:  # recovered here: the failed step's frames are gone
                yield out_of_memory(run, book, *oom, summary)
                return
            if why is not None:  # the unfinished step is dropped: its gradients never applied
                optimizer.zero_grad(set_to_none=True)
                yield from _cut_short(run, tally, summary, evaluations, why, cpu_budget_s, True)
                return
            if tally.step == 0:
                book.state_allocated(optimizer)
            n_eff = idx.shape[0]
            if tally.record(n_eff, loss_value, step_time, step_cpu):  # diverged
                yield EndEvent(
                    "diverged",
                    f"Diverged at step {tally.step}: loss {sig(loss_value, 4)} "
                    f"(first step {sig(tally.first_loss or float('nan'), 4)}). Lower the "
                    f"learning rate ({setting(cfg.lr)}) or add warm-up steps.",
                    summary(),
                )
                return
            epoch_done = epoch + (batch_index + 1) / (last_index + 1)
            yield _step_event(
                gan,
                tally,
                book,
                nvml,
                step_need,
                loss_value,
                n_eff,
                epoch_done,
                current_lr,
                stepper.ended,
                step_time,
                step_cpu,
                device_time,
            )
            done = max_steps is not None and tally.step >= max_steps
            if evaluations and (
                (eval_interval and tally.step % eval_interval == 0)
                or (not eval_interval and batch_index == last_index)
                or done
            ):
                yield evaluation(run, tally, epoch_done, evaluations)
            if done:
                break
        if done:
            break
    if evaluations and tally.last["step"] != tally.step:  # a budget that did not end on an eval
        yield evaluation(run, tally, tally.epochs(), evaluations)
    yield completed(summary())


def _step_event(
    gan: GAN | None,
    tally: Tally,
    book: MemoryBook,
    sampler: NvmlSampler | None,
    step_need: int,
    loss_value: float,
    n_eff: int,
    epoch_done: float,
    lr: float,
    ended: float,
    step_time: float,
    step_cpu: float | None,
    device_time: float | None,
) -> StepEvent:
    """The step just done (ended at `ended` on the wall clock) as a record: its loss (a GAN's
    two players'), time, memory, GPU use."""
    allocated, reserved, peak = book.after_step(step_need)
    nvml = sampler.latest() if sampler is not None else None
    generator_loss = None
    if gan is not None:  # the step's loss is the discriminator's; the generator's beside it
        loss_value, generator_loss = players(gan, n_eff)
    return StepEvent(
        step=tally.step,
        epoch=epoch_done,
        samples_seen=tally.samples_seen,
        wall_time_s=ended - tally.t_origin - tally.eval_time,
        loss=loss_value,
        lr=lr,
        step_time_s=step_time,
        samples_per_sec=n_eff / step_time,
        memory_allocated_bytes=allocated,
        memory_reserved_bytes=reserved,
        peak_memory_bytes=peak,
        utilization_pct=nvml["utilization_pct"] if nvml else None,
        generator_loss=generator_loss,
        cpu_time_s=step_cpu,
        device_time_s=device_time,
    )


def _cut_short(
    run: Prepared,
    tally: Tally,
    summary: Callable[[], dict],
    evaluations: bool | str,
    why: str,
    cpu_budget_s: float | None,
    mid_step: bool,
) -> Iterator:
    """The end of a run that Stop, its time cap or its CPU budget cut short (`mid_step`:
    between the micro-batches of a step, which is then dropped)."""
    if why in ("cap", "budget"):
        yield from time_capped(run, tally, summary, evaluations, why, cpu_budget_s)
    else:
        yield EndEvent(
            "cancelled",
            f"Stopped after {tally.step} steps" + (", in the middle of the next one." if mid_step else "."),
            summary(),
        )
