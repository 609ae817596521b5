"""Memory: what a run holds, step by step, from three sources named in every event so a chart
can label it.

- "cuda allocator": torch.cuda counters; the peak counter is reset at the start of every step.
- "mps allocator": what torch.mps reports (current and driver-held; MPS has no peak counter).
- "accounted" (CPU): the tensors we can count exactly — parameters, gradients, optimizer state
  and the activations autograd saves for the backward pass (counted with saved-tensor hooks).
  The CPU allocator reports nothing usable, so this is a model of memory, and labelled so: a
  lower bound on what the process holds (the allocator's slack, the interpreter and libraries
  come on top), whose resident size (`process_rss`) every run summary reports beside it.

`MemoryBook` keeps a run's accounts (the training loop's memory, out of its hot path);
`MemoryMeter` reads a device's counters; a memory budget is a real allocator cap on CUDA
(`set_cuda_budget`) and a simulated one elsewhere (`SimulatedOutOfMemoryError`).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch

from bsdemo.engine.measure import synchronize
from bsdemo.footprint import expected_optimizer_state_bytes
from bsdemo.units import format_bytes


def process_rss() -> int | None:
    """This process's resident memory now, in bytes (None where the system does not say)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def memory_source(device: torch.device) -> str:
    return {"cuda": "cuda allocator", "mps": "mps allocator"}.get(device.type, "accounted")


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    return tensor_bytes(v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v))


class SavedActivations:
    """Counts the bytes autograd saves for backward inside a `with` block.

    Parameters saved by layers (a Linear saves its weight) are excluded: they are counted as
    parameters already. Storages are counted once, so views of one tensor are not doubled.
    """

    def __init__(self, parameters):
        self._param_storages = {p.untyped_storage().data_ptr() for p in parameters}
        self._seen: set[int] = set()
        self.bytes = 0
        self.largest = 0  # the biggest single saved storage: our CPU workspace estimate
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in self._param_storages and ptr not in self._seen:
            self._seen.add(ptr)
            size = storage.nbytes()
            self.bytes += size
            self.largest = max(self.largest, size)
        return t

    def __enter__(self):
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)
        return False


class SimulatedOutOfMemoryError(RuntimeError):
    """A step whose accounted memory exceeds the memory budget on a device with no allocator limit."""


def set_cuda_budget(device: torch.device, budget_bytes: int | None) -> tuple[int | None, str | None]:
    """Cap this process's CUDA allocator at budget_bytes (a real allocator OOM past it).

    Returns (the budget in force, a notice when it had to be lowered to the device's capacity).
    None lifts the cap.
    """
    if budget_bytes is None:
        torch.cuda.set_per_process_memory_fraction(1.0, device)
        return None, None
    total = torch.cuda.get_device_properties(device).total_memory
    notice = None
    if budget_bytes > total:
        notice = (
            f"The memory budget ({budget_bytes:,} B) is larger than this GPU's "
            f"{total:,} B; the GPU's own capacity applies."
        )
        budget_bytes = total
    torch.cuda.set_per_process_memory_fraction(budget_bytes / total, device)
    return budget_bytes, notice


class MemoryMeter:
    """Per-step memory readings for one device; see the module docstring for the sources."""

    def __init__(self, device: torch.device):
        self.device = device
        self.source = memory_source(device)

    def begin_step(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def current(self) -> int | None:
        """Bytes allocated now (None on the CPU, where only accounted memory exists)."""
        if self.device.type == "cuda":
            return torch.cuda.memory_allocated(self.device)
        if self.device.type == "mps":
            return torch.mps.current_allocated_memory()
        return None

    def read(self, accounted_persistent: int, accounted_peak: int) -> tuple[int | None, ...]:
        """(allocated, reserved, peak-in-step) in bytes, after the step."""
        if self.device.type == "cuda":
            return (
                torch.cuda.memory_allocated(self.device),
                torch.cuda.memory_reserved(self.device),
                torch.cuda.max_memory_allocated(self.device),
            )
        if self.device.type == "mps":
            current = torch.mps.current_allocated_memory()
            return current, torch.mps.driver_allocated_memory(), current
        return accounted_persistent, None, accounted_peak


class MemoryBook:
    """What one run's memory is made of, step by step.

    Persistent: parameters, gradients and optimizer state (predicted until the first step
    allocates it: Adam's is lazy). Per micro-batch size: the activations autograd saves for
    backward and our workspace estimate (the largest saved tensor: backward allocates gradient
    buffers of that size), counted once per size with saved-tensor hooks, since the same shapes
    save the same bytes every step. The peak over the run, and on a device with counters the
    allocator's readings. On the CPU ("accounted") nothing allocates against a limit, so the
    memory budget is checked here, and an out-of-memory past it is simulated (and says so).
    """

    def __init__(self, params: list[torch.Tensor], optimizer: str, meter: MemoryMeter, budget: int | None):
        self.params = params
        self.param_bytes = tensor_bytes(params)
        self.state_bytes = expected_optimizer_state_bytes(optimizer, self.param_bytes)
        self.meter = meter
        self.accounting = meter.source == "accounted"
        self.on_device = meter.device.type != "cpu"  # counters to read, a peak to reset
        self.budget = budget
        self.activations: dict[int, int] = {}  # micro-batch size -> bytes saved for backward
        self.workspace: dict[int, int] = {}
        self.largest_micro = 0
        self.peak = 0
        self.baseline = self.last_allocated = self.last_reserved = None

    @property
    def persistent(self) -> int:
        return 2 * self.param_bytes + self.state_bytes  # parameters + gradients + state

    @contextlib.contextmanager
    def counting(self, size: int):
        """Count what autograd saves in the block: the first forward of a micro-batch size."""
        with SavedActivations(self.params) as saved:
            yield
        self.activations[size] = saved.bytes
        self.workspace[size] = saved.largest
        self.largest_micro = max(self.largest_micro, size)

    def account(self, size: int, step_need: int) -> int:
        """The step's accounted need after a forward at micro-batch `size`; past the budget a
        SimulatedOutOfMemoryError, where a real allocator would fail (the forward done)."""
        step_need = max(step_need, self.activations[size] + self.workspace[size])
        if self.budget is not None and self.persistent + step_need > self.budget:
            raise SimulatedOutOfMemoryError(
                f"Simulated out of memory: a micro-batch of {size} needs "
                f"{format_bytes(self.persistent + step_need)} (parameters + gradients + optimizer "
                f"state {format_bytes(self.persistent)}, saved activations "
                f"{format_bytes(self.activations[size])}, workspace "
                f"{format_bytes(self.workspace[size])}) but the budget is "
                f"{format_bytes(self.budget)}. The CPU has no allocator limit, so the budget is "
                f"enforced on accounted memory."
            )
        return step_need

    def begin_step(self) -> None:
        """On a device: wait for it, reset its peak counter and note what an OOM must return to."""
        synchronize(self.meter.device)
        self.meter.begin_step()
        self.baseline = self.meter.current()

    def state_allocated(self, optimizer: torch.optim.Optimizer) -> None:
        """After the first step: the optimizer state as allocated, no longer predicted."""
        self.state_bytes = optimizer_state_bytes(optimizer)

    def after_step(self, step_need: int) -> tuple[int | None, int | None, int | None]:
        """(allocated, reserved, peak) of the step just done; the run's peak follows."""
        persistent = self.persistent
        if self.on_device:
            allocated, reserved, peak = self.meter.read(persistent, persistent + step_need)
            self.last_allocated, self.last_reserved = allocated, reserved
        else:  # accounted: plain arithmetic, no calls on the hot path
            allocated, reserved, peak = persistent, None, persistent + step_need
        if peak is not None and peak > self.peak:
            self.peak = peak
        return allocated, reserved, peak

    def breakdown(self) -> dict[str, int | None]:
        """The peak's parts at the largest micro-batch; measured counters fill the workspace."""
        size = self.largest_micro
        act, ws = self.activations.get(size, 0), self.workspace.get(size, 0)
        parts = {
            "parameters": self.param_bytes,
            "gradients": self.param_bytes,
            "optimizer_state": self.state_bytes,
            "activations": act,
            "workspace": ws if self.accounting else None,
            "micro_batch": size,
        }
        if not self.accounting and self.peak:
            parts["workspace"] = max(self.peak - self.persistent - act, 0)
            if self.last_reserved is not None and self.last_allocated is not None:
                parts["allocator_cache"] = max(self.last_reserved - self.last_allocated, 0)
        return parts

    def recovery(self) -> dict[str, Any]:
        """After an OOM was cleaned up: memory now against the failed step's start."""
        after = self.meter.current()
        return {
            "memory_after_recovery_bytes": after,
            "memory_baseline_bytes": self.baseline if self.on_device else None,
            # on the CPU nothing was allocated: accounted memory is a model
            "memory_returned_to_baseline": (after <= self.baseline) if self.on_device else None,
        }
