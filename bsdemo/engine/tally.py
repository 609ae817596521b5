"""A run's running account and how it ends: what it has done so far (`Tally`: steps, samples,
its clock with evaluations left out, losses, step times), its evaluations, the summary every
end carries, and the end events — completed, time cap or CPU budget, out of memory."""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from bsdemo.config import RunConfig
from bsdemo.engine.gan import gan_evaluation, reference_distance
from bsdemo.engine.measure import (
    HostLoad,
)
from bsdemo.engine.memory import (
    MemoryBook,
    process_rss,
)
from bsdemo.engine.models import GAN
from bsdemo.engine.regions import decision_regions, is_planar
from bsdemo.engine.steps import Prepared, evaluate
from bsdemo.events import EndEvent, EvalEvent
from bsdemo.units import fixed, percent, setting, sig

MEASURE_WARMUP_STEPS = 3  # first steps excluded from throughput summaries (allocator, caches)


DIVERGENCE_FACTOR = 1000.0  # a loss this many times the first one counts as diverged


@dataclass
class Tally:
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
    # the run's wall clock: perf_counter, or its own turns' where it takes turns (RunClock.wall)
    now: Callable[[], float] = time.perf_counter
    t_origin: float | None = None  # the training clock's origin (None: now; see restart_clock)
    rss_start: int | None = field(default_factory=process_rss)  # the process, before training
    began: float | None = None  # the time cap's clock's origin (None: now; train sets it)
    reference: float | None = None  # a GAN's Fréchet distance of real images (bsdemo.engine.gan)
    load: HostLoad = field(default_factory=HostLoad)  # how busy others kept the CPUs meanwhile
    last: dict = field(
        default_factory=lambda: dict.fromkeys(
            ("step", "train_loss", "train_accuracy", "test_loss", "test_accuracy")
        )
    )

    def __post_init__(self) -> None:
        now = self.now()
        self.t_origin = now if self.t_origin is None else self.t_origin
        self.began = now if self.began is None else self.began

    def restart_clock(self) -> None:
        self.t_origin, self.eval_time, self.cpu_eval_s = self.now(), 0.0, 0.0

    def wall_time(self) -> float:
        return self.now() - self.t_origin - self.eval_time

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


def evaluation(run: Prepared, tally: Tally, epoch_done: float, splits: bool | str = True) -> EvalEvent:
    """Loss and accuracy over both splits (splits="test": the test split alone), timed apart
    from training."""
    t, c = tally.now(), time.thread_time()  # inside one turn: its CPU clock is the thread's
    extra = {}
    if isinstance(run.model, GAN):  # the discriminator's calls, the Fréchet distance, samples
        extra = gan_evaluation(run.model, run.data, run.cfg.dataset)
        train_loss, train_acc, test_loss, test_acc = (
            extra.pop(k) for k in ("train_loss", "train_accuracy", "test_loss", "test_accuracy")
        )
        if tally.reference is None:
            tally.reference = reference_distance(run.data, run.cfg.dataset)
    else:
        train_loss, train_acc = (
            (None, None) if splits == "test" else evaluate(run.model, run.data.x_train, run.data.y_train)
        )
        test_loss, test_acc = evaluate(run.model, run.data.x_test, run.data.y_test)
        if is_planar(run.data.x_train):  # what the model learned, where a picture can show it
            extra["regions"] = decision_regions(run.model, run.data.x_train, run.data.x_test, run.data.y_test)
    tally.last_eval_s = tally.now() - t
    tally.eval_time += tally.last_eval_s
    tally.cpu_eval_s += time.thread_time() - c
    tally.last.update(
        step=tally.step,
        train_loss=train_loss,
        train_accuracy=train_acc,
        test_loss=test_loss,
        test_accuracy=test_acc,
    )
    tally.last["frechet_distance"] = extra.get("frechet_distance")
    return EvalEvent(
        step=tally.step,
        epoch=epoch_done,
        samples_seen=tally.samples_seen,
        wall_time_s=tally.wall_time(),
        train_loss=train_loss,
        train_accuracy=train_acc,
        test_loss=test_loss,
        test_accuracy=test_acc,
        **extra,
    )


def chance_of(labels: torch.Tensor) -> dict[str, Any]:
    """What a model that learned nothing scores on these test labels: the share of the most
    common one (always answering it), and how many labels the share is over (its noise)."""
    flat = labels.flatten()
    if flat.dtype != torch.int64:
        return {}
    flat = flat[flat >= 0]  # a sequence task's positions left out of the loss (negative labels)
    if not flat.numel():
        return {}
    return {
        "chance_accuracy": float(torch.bincount(flat).max()) / flat.numel(),
        "test_labels": int(flat.numel()),
    }


def run_summary(
    cfg: RunConfig, tally: Tally, book: MemoryBook, device_name: str, chance: dict[str, Any] | None = None
) -> dict:
    """The run's numbers so far: medians over steady full batches, memory, last evaluation, and
    what chance would score on its test set (`chance_of`)."""
    steady = slice(min(MEASURE_WARMUP_STEPS, max(len(tally.step_times) - 1, 0)), None)
    last, wall, rates = tally.last, tally.wall_time(), tally.rates()
    return {
        "steps": tally.step,
        "epochs": tally.epochs(),
        "samples_seen": tally.samples_seen,
        "memory_breakdown": book.breakdown(),
        "memory_budget_bytes": book.budget,
        "effective_batch_size": cfg.effective_batch_size,
        "samples_per_sec": statistics.median(rates[steady]) if rates else None,
        "step_time_s": statistics.median(tally.step_times[steady]) if tally.step_times else None,
        # the same steps by the training thread's CPU time (a one-thread CPU; else None):
        # what the device does, whatever else shared the core
        "cpu_samples_per_sec": tally.full_size / statistics.median(cpus)
        if (cpus := tally.cpu_times[steady])
        else None,
        "step_cpu_time_s": statistics.median(cpus) if cpus else None,
        "wall_time_s": wall,
        "peak_memory_bytes": book.peak or None,
        # the time cap's clock: the whole run, its setup and evaluations included
        "run_time_s": tally.now() - tally.began,
        # what the caller got over the whole run: every step, warm-up and pauses included
        "wall_samples_per_sec": tally.samples_seen / wall if tally.step and wall > 0 else None,
        "memory_source": book.meter.source,
        "final_train_loss": last["train_loss"],
        "first_step_loss": tally.first_loss,
        "peak_step_loss": tally.peak_loss,
        "final_train_accuracy": last["train_accuracy"],
        "test_loss": last["test_loss"],
        "test_accuracy": last["test_accuracy"],
        "evaluated_at_step": last["step"],
        "frechet_distance": last.get("frechet_distance"),
        "frechet_reference": tally.reference,
        "device": device_name,
        "warmup_steps_excluded": steady.start,
        # the conditions its speed was measured in (bsdemo.runs.comparable_rates)
        "torch_threads": torch.get_num_threads(),
        "others_busy_share": tally.load.others_share(),
        # beside accounted memory: what the whole process held (a CPU's only real figure)
        "process_rss_bytes": process_rss(),
        "process_rss_start_bytes": tally.rss_start,
        **(chance or {}),
    }


def players(model: GAN, n_eff: int) -> tuple[float, float]:
    """(discriminator, generator) mean loss over the step's micro-batches, weighted by size."""
    parts, model.parts = model.parts, []
    d = sum(p[0] * p[2] for p in parts) / n_eff
    g = sum(p[1] * p[2] for p in parts) / n_eff
    return d.item(), g.item()


def time_capped(
    run: Prepared,
    tally: Tally,
    summary: Callable[[], dict],
    evaluations: bool | str,
    why: str = "cap",
    cpu_budget_s: float | None = None,
) -> Iterator:
    """The end of a run at its time cap, or at its CPU-time budget (why="budget"): the result is
    what it reached (evaluated, if the last step was not)."""
    if evaluations and tally.step and tally.last["step"] != tally.step:
        yield evaluation(run, tally, tally.epochs(), evaluations)
    limit = (
        f"its budget of {setting(cpu_budget_s)} s of CPU time"
        if why == "budget"
        else f"the time cap of {setting(run.cfg.time_limit_s)} s"
    )
    left = run.cfg.planned_steps - tally.step if run.cfg.epochs or run.cfg.max_steps else 0
    rest = ""
    if why == "cap" and left > 0 and tally.step_times:  # what the cap cut off, predicted
        more = left * statistics.median(tally.step_times[-200:])
        rest = (
            f" The {left:,} steps left of its {run.cfg.planned_steps:,} would take about "
            f"{sig(more)} s more at its median step time (predicted)."
        )
    yield EndEvent(
        "cancelled",
        f"Stopped at {limit} after {tally.step:,} steps ({setting(tally.epochs(), 3)} epochs).{rest}",
        summary() | {"time_capped": True},
    )


def completed(s: dict) -> EndEvent:
    accuracy = f"; test accuracy {percent(s['test_accuracy'])}" if s["test_accuracy"] is not None else ""
    if s.get("frechet_distance") is not None:  # a GAN: how close its images came to real ones
        accuracy = (
            f"; Fréchet distance {sig(s['frechet_distance'])} to real test images (real "
            f"training images: {sig(s['frechet_reference'], 2)})"
        )
    # the median step's samples/s by the thread's CPU time where known (what the device did,
    # as the pages show it), else by the wall clock
    rate = s.get("cpu_samples_per_sec") or s["samples_per_sec"] or 0
    return EndEvent(
        "completed",
        f"Completed {s['steps']} steps ({setting(s['epochs'], 3)} epochs) in "
        f"{fixed(s['wall_time_s'], 2)} s; median {fixed(rate, 0)} samples/s{accuracy}.",
        s,
    )


def out_of_memory(
    run: Prepared, book: MemoryBook, text: str, simulated: bool, summary: Callable[[], dict]
) -> EndEvent:
    """Free what the failed step held and end the run: the error's text, whether it was
    simulated, and whether memory came back to where the step began."""
    run.optimizer.zero_grad(set_to_none=True)
    gc.collect()
    if run.device.type == "cuda":
        torch.cuda.empty_cache()
    s = (
        summary()
        | {"simulated": simulated, "oom_error": text, "oom_batch_size": run.cfg.batch_size}
        | book.recovery()
    )
    step = s["steps"] + 1
    return EndEvent(
        "oom",
        f"Out of memory at step {step} (micro-batch {run.cfg.batch_size})"
        f"{' — simulated' if simulated else ''}: {text} Try a smaller batch size, or "
        f"keep the effective batch with gradient accumulation.",
        s,
    )
