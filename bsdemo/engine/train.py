"""The training loop: one function that yields events (start, step, eval, end).

One optimizer step = `accumulation_steps` micro-batches of `batch_size` samples. Each micro-batch's
loss is its mean loss times (its size / the effective batch's size), so the summed gradients are
exactly those of the mean loss over the effective batch — the textbook "scale by 1/k" when the
micro-batches are equal, and still right for a partial last batch.
"""

from __future__ import annotations

import functools
import gc
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.data import IGNORE, Dataset, epoch_batches, load_dataset
from bsdemo.engine.gan import gan_evaluation, reference_distance
from bsdemo.engine.measure import (
    HostLoad,
    NvmlSampler,
    cpu_clock,
    device_info,
    resolve_device,
    synchronize,
)
from bsdemo.engine.memory import (
    MemoryBook,
    MemoryMeter,
    SimulatedOutOfMemoryError,
    process_rss,
    set_cuda_budget,
    tensor_bytes,
)
from bsdemo.engine.models import GAN, build_model, make_optimizer
from bsdemo.engine.regions import decision_regions, is_planar
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


def micro_loss(model: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor,
               effective: int) -> torch.Tensor:
    """This micro-batch's share of the mean loss over an effective batch of `effective` samples.

    mean x (b / effective) = sum / effective; a whole batch skips the extra multiply (hot path).
    """
    if isinstance(model, GAN):  # both players' losses, each moving only its own player
        d_loss, g_loss = model.losses(xb)
        model.parts.append((d_loss.detach(), g_loss.detach(), len(yb)))
        loss = d_loss + g_loss
        return loss if len(yb) == effective else loss * (len(yb) / effective)
    logits = model(xb)
    if logits.dim() > 2:  # a sequence model: (B, T, V) logits against (B, T) targets
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
    if isinstance(model, GAN):
        model.fit_range(data.x_train)
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
    """Whether exc is a device or host allocation failure, or a simulated one past the budget
    (a result to show, not a crash). MPS, and the CPU allocator under the worker's address-space
    ceiling, report theirs as plain errors."""
    text = str(exc)
    return (isinstance(exc, (torch.OutOfMemoryError, MemoryError, SimulatedOutOfMemoryError))
            or "out of memory" in text or "can't allocate memory" in text)


def train(cfg: RunConfig, should_stop: Callable[[], bool] | None = None,
          prepared: Prepared | None = None, evaluations: bool | str = True,
          memory_budget_bytes: int | None = None, cpu_budget_s: float | None = None
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
    ignored and the time cap alone applies.
    """
    began = time.perf_counter()  # the time cap counts from here: data, model, evaluations too
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
        yield from _loop(run, meter, sampler, info, should_stop, evaluations, memory_budget_bytes,
                         began, cpu_budget_s)
    finally:
        sampler.close()
        if memory_budget_bytes is not None and run.device.type == "cuda":
            set_cuda_budget(run.device, None)


class _Interrupted(Exception):
    """Stop or the time cap came between two micro-batches of one optimizer step."""


def _loop(run: Prepared, meter: MemoryMeter, sampler: NvmlSampler, info: dict, should_stop,
          evaluations: bool | str, budget: int | None, began: float,
          cpu_budget_s: float | None = None) -> Iterator:
    """One optimizer step per effective batch, epoch after epoch, until the budget ends the run,
    or Stop, the time cap, divergence or an out-of-memory does.

    Stop and the time cap are checked before every step and between the micro-batches of one
    (an accumulated step can take minutes); the cap is on the whole run's time, its setup and
    evaluations included, so the run ends on its own before the scheduler would end its worker.
    """
    cfg, device, model, optimizer = run.cfg, run.device, run.model, run.optimizer
    book = MemoryBook([p for p in model.parameters() if p.requires_grad], cfg.optimizer, meter,
                      budget)
    n_train = len(run.data.y_train)
    tally = _Tally(n_train, full_size=min(cfg.effective_batch_size, n_train), began=began)
    summary = functools.partial(_summary, cfg, tally, book, info.get("name", device.type))
    # locals, not attribute look-ups, on the per-step path (it runs 10^5 times at batch 1)
    accounting, on_device = book.accounting, book.on_device
    batch_size, warmup_steps, max_steps = cfg.batch_size, cfg.warmup_steps, cfg.max_steps
    time_limit, eval_interval = cfg.time_limit_s, cfg.eval_interval
    x_train, y_train = run.data.x_train, run.data.y_train
    generator = torch.Generator(device=device).manual_seed(cfg.seed)
    gan = isinstance(model, GAN)
    cpu_time = cpu_clock(device)  # None where the step's work is not this thread's
    cpu_budget_s = cpu_budget_s if cpu_time is not None else None
    cpu_began = 0.0
    # on CUDA, a step's device time between two events on the stream (StepEvent.device_time_s)
    marks = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) \
        if device.type == "cuda" else None
    device_time = None
    current_lr = None
    done = False

    def interrupted() -> str | None:
        """Why the run must end now: "stop", "cap", "budget" (cpu_budget_s), or None."""
        if should_stop is not None and should_stop():
            return "stop"
        if time_limit is not None and time.perf_counter() - began + tally.last_eval_s >= time_limit:
            return "cap"  # a final evaluation as long as the last one must fit in the cap too
        if cpu_budget_s is not None and cpu_time() - cpu_began - tally.cpu_eval_s >= cpu_budget_s:
            return "budget"
        return None

    # checked between micro-batches only when a step has several (not on batch 1's hot path)
    between = interrupted if cfg.accumulation_steps > 1 else None
    if evaluations:
        yield _evaluation(run, tally, 0.0, evaluations)
    tally.restart_clock()  # training time starts now: the first evaluation is not in it
    cpu_began = cpu_time() if cpu_time is not None else 0.0
    for epoch in range(cfg.epochs) if cfg.epochs is not None else itertools.count():
        batches = epoch_batches(n_train, cfg.effective_batch_size, generator, device,
                                cfg.drops_lone_sample)
        last_index = len(batches) - 1
        for batch_index, idx in enumerate(batches):
            why = interrupted() if tally.step else (
                "stop" if should_stop is not None and should_stop() else None)
            if why == "stop":
                yield EndEvent("cancelled", f"Stopped after {tally.step} steps.", summary())
                return
            if why in ("cap", "budget"):
                yield from _time_capped(run, tally, summary, evaluations, why, cpu_budget_s)
                return
            if tally.step < warmup_steps or current_lr is None:  # after warm-up: a bare hot path
                current_lr = lr_at(cfg, tally.step)
                for group in optimizer.param_groups:
                    group["lr"] = current_lr
            if on_device:
                book.begin_step()
                if marks is not None:
                    marks[0].record()
            t0 = time.perf_counter()
            c0 = cpu_time() if cpu_time is not None else 0.0
            oom = why = None
            try:
                loss_value, step_need = _optimizer_step(model, optimizer, x_train, y_train, idx,
                                                        batch_size, book, accounting, between)
                if on_device:
                    if marks is not None:
                        marks[1].record()
                    synchronize(device)
            except _Interrupted as exc:
                why = str(exc)
            except (RuntimeError, MemoryError) as exc:  # CUDA's OOM is a RuntimeError too
                if not is_out_of_memory(exc):
                    raise
                # its text, not the exception: a kept traceback would keep the step's tensors
                oom = ((str(exc).strip().splitlines() or [type(exc).__name__])[0][:400],
                       isinstance(exc, SimulatedOutOfMemoryError))
            if oom is not None:  # recovered outside the except block: the step's frames are gone
                yield _out_of_memory(run, book, *oom, summary)
                return
            if why is not None:  # the unfinished step is dropped: its gradients never applied
                optimizer.zero_grad(set_to_none=True)
                if why in ("cap", "budget"):
                    yield from _time_capped(run, tally, summary, evaluations, why, cpu_budget_s)
                else:
                    yield EndEvent("cancelled", f"Stopped after {tally.step} steps, in the middle "
                                   "of the next one.", summary())
                return
            t_end = time.perf_counter()
            step_cpu = cpu_time() - c0 if cpu_time is not None else None
            step_time = t_end - t0
            if marks is not None:
                device_time = marks[0].elapsed_time(marks[1]) / 1e3  # ms -> s
            if tally.step == 0:
                book.state_allocated(optimizer)
            n_eff = idx.shape[0]
            if tally.record(n_eff, loss_value, step_time, step_cpu):  # diverged
                yield EndEvent("diverged", f"Diverged at step {tally.step}: loss {loss_value:.4g} "
                               f"(first step {tally.first_loss or float('nan'):.4g}). Lower the "
                               f"learning rate ({cfg.lr:g}) or add warm-up steps.", summary())
                return
            allocated, reserved, peak = book.after_step(step_need)
            nvml = sampler.latest() if on_device else None
            generator_loss = None
            if gan:  # the step's loss is the discriminator's; the generator's beside it
                loss_value, generator_loss = _players(model, n_eff)
            epoch_done = epoch + (batch_index + 1) / (last_index + 1)
            yield StepEvent(step=tally.step, epoch=epoch_done, samples_seen=tally.samples_seen,
                            wall_time_s=t_end - tally.t_origin - tally.eval_time, loss=loss_value,
                            lr=current_lr, step_time_s=step_time, samples_per_sec=n_eff / step_time,
                            memory_allocated_bytes=allocated, memory_reserved_bytes=reserved,
                            peak_memory_bytes=peak,
                            utilization_pct=nvml["utilization_pct"] if nvml else None,
                            generator_loss=generator_loss, cpu_time_s=step_cpu,
                            device_time_s=device_time)
            done = max_steps is not None and tally.step >= max_steps
            if evaluations and ((eval_interval and tally.step % eval_interval == 0) or (
                    not eval_interval and batch_index == last_index) or done):
                yield _evaluation(run, tally, epoch_done, evaluations)
            if done:
                break
        if done:
            break
    if evaluations and tally.last["step"] != tally.step:  # a budget that did not end on an eval
        yield _evaluation(run, tally, tally.epochs(), evaluations)
    yield _completed(summary())


def _players(model: GAN, n_eff: int) -> tuple[float, float]:
    """(discriminator, generator) mean loss over the step's micro-batches, weighted by size."""
    parts, model.parts = model.parts, []
    d = sum(p[0] * p[2] for p in parts) / n_eff
    g = sum(p[1] * p[2] for p in parts) / n_eff
    return d.item(), g.item()


def _time_capped(run: Prepared, tally: _Tally, summary: Callable[[], dict],
                 evaluations: bool | str, why: str = "cap", cpu_budget_s: float | None = None
                 ) -> Iterator:
    """The end of a run at its time cap, or at its CPU-time budget (why="budget"): the result is
    what it reached (evaluated, if the last step was not)."""
    if evaluations and tally.step and tally.last["step"] != tally.step:
        yield _evaluation(run, tally, tally.epochs(), evaluations)
    limit = (f"its budget of {cpu_budget_s:g} s of CPU time" if why == "budget" else
             f"the time cap of {run.cfg.time_limit_s:g} s")
    left = run.cfg.planned_steps - tally.step if run.cfg.epochs or run.cfg.max_steps else 0
    rest = ""
    if why == "cap" and left > 0 and tally.step_times:  # what the cap cut off, predicted
        more = left * statistics.median(tally.step_times[-200:])
        rest = (f" The {left:,} steps left of its {run.cfg.planned_steps:,} would take about "
                f"{more:.3g} s more at its median step time (predicted).")
    yield EndEvent("cancelled", f"Stopped at {limit} after {tally.step:,} steps "
                   f"({tally.epochs():.3g} epochs).{rest}", summary() | {"time_capped": True})


def _completed(s: dict) -> EndEvent:
    accuracy = f"; test accuracy {s['test_accuracy']:.1%}" if s["test_accuracy"] is not None else ""
    if s.get("frechet_distance") is not None:  # a GAN: how close its images came to real ones
        accuracy = (f"; Fréchet distance {s['frechet_distance']:.3g} to real test images (real "
                    f"training images: {s['frechet_reference']:.2g})")
    # the median step's samples/s by the thread's CPU time where known (what the device did,
    # as the pages show it), else by the wall clock
    rate = s.get("cpu_samples_per_sec") or s["samples_per_sec"] or 0
    return EndEvent("completed", f"Completed {s['steps']} steps ({s['epochs']:.3g} epochs) in "
                    f"{s['wall_time_s']:.2f} s; median {rate:,.0f} samples/s{accuracy}.", s)


def _optimizer_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    x_train: torch.Tensor, y_train: torch.Tensor, idx: torch.Tensor,
                    batch_size: int, book: MemoryBook, accounting: bool,
                    interrupted: Callable[[], str | None] | None = None) -> tuple[float, int]:
    """One optimizer step over the effective batch `idx`, in micro-batches of batch_size.

    Returns (the effective batch's mean loss, the step's accounted need for activations and
    workspace: its largest micro-batch's, 0 unless accounting). The hot path: the loss's .item()
    is the step's one device sync. `interrupted` is asked before every micro-batch but the
    first; a reason from it raises _Interrupted (the step is not applied).
    """
    n_eff = idx.shape[0]
    optimizer.zero_grad(set_to_none=True)
    loss_sum = None
    step_need = 0
    for i, micro in enumerate(idx.split(batch_size) if n_eff > batch_size else (idx,)):
        if i and interrupted is not None and (why := interrupted()):
            raise _Interrupted(why)
        xb, yb = x_train[micro], y_train[micro]
        size = micro.shape[0]
        if size in book.activations:
            loss = micro_loss(model, xb, yb, n_eff)
        else:  # the first step of this size: count what autograd saves
            with book.counting(size):
                loss = micro_loss(model, xb, yb, n_eff)
        if accounting:
            step_need = book.account(size, step_need)
        loss.backward()
        # .item() below needs no detach for a lone micro-batch (hot path at batch 1)
        loss_sum = loss if loss_sum is None else loss_sum.detach() + loss.detach()
    optimizer.step()
    return loss_sum.item(), step_need


@dataclass
class _Tally:
    """What a run has done so far, and its clock: training time excludes evaluations."""
    n_train: int
    full_size: int  # the summary's medians are over full effective batches only
    step: int = 0
    samples_seen: int = 0
    first_loss: float | None = None
    peak_loss: float | None = None  # the highest finite step loss: an early spike shows here
    step_times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)  # the same steps' CPU time, if known
    eval_time: float = 0.0
    last_eval_s: float = 0.0  # how long the latest evaluation took
    cpu_eval_s: float = 0.0  # the evaluations' thread CPU time since training began
    t_origin: float = field(default_factory=time.perf_counter)
    rss_start: int | None = field(default_factory=process_rss)  # the process, before training
    began: float = field(default_factory=time.perf_counter)  # the time cap's clock (set by train)
    reference: float | None = None  # a GAN's Fréchet distance of real images (bsdemo.engine.gan)
    load: HostLoad = field(default_factory=HostLoad)  # how busy others kept the CPUs meanwhile
    last: dict = field(default_factory=lambda: dict.fromkeys(
        ("step", "train_loss", "train_accuracy", "test_loss", "test_accuracy")))

    def restart_clock(self) -> None:
        self.t_origin, self.eval_time, self.cpu_eval_s = time.perf_counter(), 0.0, 0.0

    def wall_time(self) -> float:
        return time.perf_counter() - self.t_origin - self.eval_time

    def epochs(self) -> float:
        return self.samples_seen / self.n_train

    def rates(self) -> list[float]:
        """samples/s of the full effective batches timed so far."""
        return [self.full_size / t for t in self.step_times]

    def record(self, n_eff: int, loss: float, step_time: float, cpu_time: float | None) -> bool:
        """Count a step just done; whether its loss diverged: not finite, or DIVERGENCE_FACTOR
        times the first step's. One call on the per-step path (it runs 10^5 times at batch 1)."""
        self.step += 1
        self.samples_seen += n_eff
        first = self.first_loss
        if not math.isfinite(loss) or (first is not None and loss > DIVERGENCE_FACTOR * first):
            return True
        if first is None:
            self.first_loss = self.peak_loss = loss
        elif loss > self.peak_loss:
            self.peak_loss = loss
        if n_eff == self.full_size:  # an epoch's partial last batch is a different, shorter step
            self.step_times.append(step_time)
            if cpu_time is not None and cpu_time > 0:
                self.cpu_times.append(cpu_time)
        return False


def _evaluation(run: Prepared, tally: _Tally, epoch_done: float,
                splits: bool | str = True) -> EvalEvent:
    """Loss and accuracy over both splits (splits="test": the test split alone), timed apart
    from training."""
    t, c = time.perf_counter(), time.thread_time()
    extra = {}
    if isinstance(run.model, GAN):  # the discriminator's calls, the Fréchet distance, samples
        extra = gan_evaluation(run.model, run.data, run.cfg.dataset)
        train_loss, train_acc, test_loss, test_acc = (extra.pop(k) for k in (
            "train_loss", "train_accuracy", "test_loss", "test_accuracy"))
        if tally.reference is None:
            tally.reference = reference_distance(run.data, run.cfg.dataset)
    else:
        train_loss, train_acc = (None, None) if splits == "test" else evaluate(
            run.model, run.data.x_train, run.data.y_train)
        test_loss, test_acc = evaluate(run.model, run.data.x_test, run.data.y_test)
        if is_planar(run.data.x_train):  # what the model learned, where a picture can show it
            extra["regions"] = decision_regions(run.model, run.data.x_train, run.data.x_test,
                                                run.data.y_test)
    tally.last_eval_s = time.perf_counter() - t
    tally.eval_time += tally.last_eval_s
    tally.cpu_eval_s += time.thread_time() - c
    tally.last.update(step=tally.step, train_loss=train_loss, train_accuracy=train_acc,
                      test_loss=test_loss, test_accuracy=test_acc)
    tally.last["frechet_distance"] = extra.get("frechet_distance")
    return EvalEvent(step=tally.step, epoch=epoch_done, samples_seen=tally.samples_seen,
                     wall_time_s=tally.wall_time(), train_loss=train_loss,
                     train_accuracy=train_acc, test_loss=test_loss, test_accuracy=test_acc,
                     **extra)


def _summary(cfg: RunConfig, tally: _Tally, book: MemoryBook, device_name: str) -> dict:
    """The run's numbers so far: medians over steady full batches, memory, last evaluation."""
    steady = slice(min(MEASURE_WARMUP_STEPS, max(len(tally.step_times) - 1, 0)), None)
    last, wall, rates = tally.last, tally.wall_time(), tally.rates()
    return {"steps": tally.step, "epochs": tally.epochs(), "samples_seen": tally.samples_seen,
            "memory_breakdown": book.breakdown(), "memory_budget_bytes": book.budget,
            "effective_batch_size": cfg.effective_batch_size,
            "samples_per_sec": statistics.median(rates[steady]) if rates else None,
            "step_time_s": statistics.median(tally.step_times[steady]) if tally.step_times
            else None,
            # the same steps by the training thread's CPU time (a one-thread CPU; else None):
            # what the device does, whatever else shared the core
            "cpu_samples_per_sec": tally.full_size / statistics.median(cpus)
            if (cpus := tally.cpu_times[steady]) else None,
            "step_cpu_time_s": statistics.median(cpus) if cpus else None,
            "wall_time_s": wall, "peak_memory_bytes": book.peak or None,
            # the time cap's clock: the whole run, its setup and evaluations included
            "run_time_s": time.perf_counter() - tally.began,
            # what the caller got over the whole run: every step, warm-up and pauses included
            "wall_samples_per_sec": tally.samples_seen / wall if tally.step and wall > 0 else None,
            "memory_source": book.meter.source, "final_train_loss": last["train_loss"],
            "first_step_loss": tally.first_loss, "peak_step_loss": tally.peak_loss,
            "final_train_accuracy": last["train_accuracy"], "test_loss": last["test_loss"],
            "test_accuracy": last["test_accuracy"], "evaluated_at_step": last["step"],
            "frechet_distance": last.get("frechet_distance"),
            "frechet_reference": tally.reference,
            "device": device_name, "warmup_steps_excluded": steady.start,
            # the conditions its speed was measured in (bsdemo.runs.comparable_rates)
            "torch_threads": torch.get_num_threads(), "others_busy_share": tally.load.others_share(),
            # beside accounted memory: what the whole process held (a CPU's only real figure)
            "process_rss_bytes": process_rss(), "process_rss_start_bytes": tally.rss_start}


def _out_of_memory(run: Prepared, book: MemoryBook, text: str, simulated: bool,
                   summary: Callable[[], dict]) -> EndEvent:
    """Free what the failed step held and end the run: the error's text, whether it was
    simulated, and whether memory came back to where the step began."""
    run.optimizer.zero_grad(set_to_none=True)
    gc.collect()
    if run.device.type == "cuda":
        torch.cuda.empty_cache()
    s = summary() | {"simulated": simulated, "oom_error": text,
                     "oom_batch_size": run.cfg.batch_size} | book.recovery()
    step = s["steps"] + 1
    return EndEvent("oom", f"Out of memory at step {step} (micro-batch {run.cfg.batch_size})"
                    f"{' — simulated' if simulated else ''}: {text} Try a smaller batch size, or "
                    f"keep the effective batch with gradient accumulation.", s)
