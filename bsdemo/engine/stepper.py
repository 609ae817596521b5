"""One optimizer step of a run, in micro-batches and timed (`_Stepper`), and the clock that says
when a run must end (`_Clock`: Stop, its time cap, its CPU budget). The training loop's per-step
path."""

from __future__ import annotations

from collections.abc import Callable

import torch

from bsdemo.engine.measure import RunClock, cpu_clock, synchronize
from bsdemo.engine.memory import MemoryBook, SimulatedOutOfMemoryError
from bsdemo.engine.steps import Prepared, is_out_of_memory, micro_loss
from bsdemo.engine.tally import Tally


class _Interrupted(Exception):
    """Stop or the time cap came between two micro-batches of one optimizer step."""


class _Clock:
    """When a run must end: Stop, its time cap (the whole run's time, setup and evaluations
    included) or its CPU-time budget (the training thread's, evaluations left out)."""

    def __init__(
        self,
        run: Prepared,
        tally: Tally,
        should_stop: Callable[[], bool] | None,
        began: float,
        cpu_budget_s: float | None,
        run_clock: RunClock | None = None,
    ):
        self.tally, self.should_stop, self.began = tally, should_stop, began
        self.now = tally.now  # the run's wall clock (its own turns only, where it takes turns)
        self.time_limit = run.cfg.time_limit_s
        # None where the step's work is not this thread's
        self.cpu_time = cpu_clock(run.device, run_clock)
        self.cpu_budget_s = cpu_budget_s if self.cpu_time is not None else None
        self.cpu_began = 0.0

    def start(self) -> None:
        """Training time starts now (the first evaluation is not in it)."""
        self.tally.restart_clock()
        self.cpu_began = self.cpu_time() if self.cpu_time is not None else 0.0

    def stopped(self) -> str | None:
        """ "stop" if Stop was pressed (before the first step: no cap has run yet)."""
        return "stop" if self.should_stop is not None and self.should_stop() else None

    def interrupted(self) -> str | None:
        """Why the run must end now: "stop", "cap", "budget" (cpu_budget_s), or None."""
        if self.should_stop is not None and self.should_stop():
            return "stop"
        tally = self.tally
        if self.time_limit is not None and (self.now() - self.began + tally.last_eval_s >= self.time_limit):
            return "cap"  # a final evaluation as long as the last one must fit in the cap too
        if self.cpu_budget_s is not None and (
            self.cpu_time() - self.cpu_began - tally.cpu_eval_s >= self.cpu_budget_s
        ):
            return "budget"
        return None


class _Stepper:
    """One optimizer step of a run, timed three ways: the wall clock, the training thread's CPU
    time (where the step's work is that thread's) and, on CUDA, two events on the stream."""

    def __init__(self, run: Prepared, book: MemoryBook, clock: _Clock):
        self.book, self.device, self.cpu_time, self.now = book, run.device, clock.cpu_time, clock.now
        # what every step passes on, looked up once (the per-step path runs 10^5 times at batch 1);
        # `between` is checked between micro-batches only when a step has several
        self.model, self.optimizer = run.model, run.optimizer
        self.data = (run.data.x_train, run.data.y_train)
        self.rest = (
            run.cfg.batch_size,
            book,
            book.accounting,
            clock.interrupted if run.cfg.accumulation_steps > 1 else None,
            run.loss,
        )
        self.marks = (
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            if run.device.type == "cuda"
            else None
        )
        self.ended = 0.0  # the last step's end on the run's wall clock

    def step(self, idx: torch.Tensor) -> tuple:
        """(loss, accounted need, why Stop or a cap cut it short, (OOM text, simulated), wall
        seconds, thread CPU seconds, CUDA-event seconds) — None where a part does not apply. An
        out-of-memory is returned as its text: a kept exception would keep the step's tensors."""
        book, marks, cpu_time, now = self.book, self.marks, self.cpu_time, self.now
        if book.on_device:
            book.begin_step()
            if marks is not None:
                marks[0].record()
        t0 = now()
        c0 = cpu_time() if cpu_time is not None else 0.0
        loss_value = step_need = why = oom = device_time = None
        try:
            loss_value, step_need = _optimizer_step(self.model, self.optimizer, *self.data, idx, *self.rest)
            if book.on_device:
                if marks is not None:
                    marks[1].record()
                synchronize(self.device)
        except _Interrupted as exc:
            why = str(exc)
        except (RuntimeError, MemoryError) as exc:  # CUDA's OOM is a RuntimeError too
            if not is_out_of_memory(exc):
                raise
            oom = (
                (str(exc).strip().splitlines() or [type(exc).__name__])[0][:400],
                isinstance(exc, SimulatedOutOfMemoryError),
            )
        self.ended = now()
        step_time = self.ended - t0
        step_cpu = cpu_time() - c0 if cpu_time is not None else None
        if marks is not None and why is None and oom is None:
            device_time = marks[0].elapsed_time(marks[1]) / 1e3  # ms -> s
        return loss_value, step_need, why, oom, step_time, step_cpu, device_time


def _optimizer_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    idx: torch.Tensor,
    batch_size: int,
    book: MemoryBook,
    accounting: bool,
    interrupted: Callable[[], str | None] | None = None,
    loss_fn: Callable | None = None,
) -> tuple[float, int]:
    """One optimizer step over the effective batch `idx`, in micro-batches of batch_size.

    Returns (the effective batch's mean loss, the step's accounted need for activations and
    workspace: its largest micro-batch's, 0 unless accounting). The hot path: the loss's .item()
    is the step's one device sync. `interrupted` is asked before every micro-batch but the
    first; a reason from it raises _Interrupted (the step is not applied). loss_fn: the loss of a
    model the user brought (None: the lab's).
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
            loss = micro_loss(model, xb, yb, n_eff, loss_fn)
        else:  # the first step of this size: count what autograd saves
            with book.counting(size):
                loss = micro_loss(model, xb, yb, n_eff, loss_fn)
        if accounting:
            step_need = book.account(size, step_need)
        loss.backward()
        # .item() below needs no detach for a lone micro-batch (hot path at batch 1)
        loss_sum = loss if loss_sum is None else loss_sum.detach() + loss.detach()
    optimizer.step()
    return loss_sum.item(), step_need
