"""Measurements: device choice and facts, synchronised timing, memory counters, NVML sampling.

Memory has three sources, named in every event so a chart can label it:
- "cuda allocator": torch.cuda counters; the peak counter is reset at the start of every step.
- "mps allocator": what torch.mps reports (current and driver-held; MPS has no peak counter).
- "accounted" (CPU): the tensors we can count exactly — parameters, gradients, optimizer state
  and the activations autograd saves for the backward pass (counted with saved-tensor hooks).
  The CPU allocator reports nothing usable, so this is a model of memory, and labelled so: a
  lower bound on what the process holds (the allocator's slack, the interpreter and libraries
  come on top), whose resident size (`process_rss`) every run summary reports beside it.
"""

from __future__ import annotations

import contextlib
import os
import platform
import threading
import time
from typing import Any

import torch

from bsdemo.config import ConfigError
from bsdemo.footprint import expected_optimizer_state_bytes
from bsdemo.units import format_bytes


def resolve_device(name: str) -> torch.device:
    """auto -> cuda, then mps, then cpu; an explicit device that is missing is a ConfigError."""
    cuda_ok = torch.cuda.is_available()
    mps_ok = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if cuda_ok else "mps" if mps_ok else "cpu")
    if name == "cuda" and not cuda_ok:
        raise ConfigError("device", name, "auto or cpu (no CUDA device is available here)")
    if name == "mps" and not mps_ok:
        raise ConfigError("device", name, "auto or cpu (no Apple MPS device is available here)")
    return torch.device(name)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def device_info(device: torch.device) -> dict[str, Any]:
    """What the sidebar badge and run summaries say about the device."""
    # str(): a TorchVersion object would import torch wherever the dict is unpickled
    info: dict[str, Any] = {"type": device.type, "torch": str(torch.__version__)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, total_memory_bytes=int(props.total_memory),
                    capability=f"{props.major}.{props.minor}",
                    multiprocessors=props.multi_processor_count)
    elif device.type == "mps":
        info.update(name="Apple GPU (MPS)",
                    total_memory_bytes=int(torch.mps.recommended_max_memory())
                    if hasattr(torch.mps, "recommended_max_memory") else None)
    else:
        info.update(name=cpu_name(), cores=os.cpu_count(), threads=torch.get_num_threads(),
                    total_memory_bytes=_host_memory_bytes())
    return info


def set_threads(threads: int) -> None:
    """Torch's intra-op threads: the workers' rule (bsdemo.limits.default_threads), in the CLI too,
    so the CLI and the pages measure alike."""
    torch.set_num_threads(threads)


# what a worker may map beyond its share: thread stacks and malloc arenas of threads started
# later, the allocator's slack. The ceiling is there to stop a runaway run, not to count bytes.
ADDRESS_SPACE_SLACK = 2**30


def limit_address_space(share_bytes: int) -> int | None:
    """Cap this process's address space (RLIMIT_AS) at what it maps now plus share_bytes plus a
    slack; returns the headroom set, or None where the OS has no such limit.

    On the CPU every tensor lives in host memory, so a run that outgrows its prediction fails
    with the allocator's "can't allocate memory" (an out-of-memory result) instead of swapping
    the host to a halt or waking the kernel's OOM killer. Not for CUDA workers: the CUDA driver
    reserves far more address space than it uses.
    """
    try:
        import resource
    except ImportError:  # Windows
        return None
    mapped = _mapped_bytes()
    if mapped is None:
        return None
    headroom = share_bytes + ADDRESS_SPACE_SLACK
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = mapped + headroom
    if hard != resource.RLIM_INFINITY:
        ceiling = min(ceiling, hard)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        return None  # someone already set a tighter one: keep it
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, hard))
    return ceiling - mapped


def _mapped_bytes() -> int | None:
    """This process's virtual memory size (what RLIMIT_AS counts), from /proc (Linux only)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def process_rss() -> int | None:
    """This process's resident memory now, in bytes (None where the system does not say)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so a timer brackets real execution (no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def memory_source(device: torch.device) -> str:
    return {"cuda": "cuda allocator", "mps": "mps allocator"}.get(device.type, "accounted")


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    return tensor_bytes(v for state in optimizer.state.values() for v in state.values()
                        if torch.is_tensor(v))


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
        notice = (f"The memory budget ({budget_bytes:,} B) is larger than this GPU's "
                  f"{total:,} B; the GPU's own capacity applies.")
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
            return (torch.cuda.memory_allocated(self.device), torch.cuda.memory_reserved(self.device),
                    torch.cuda.max_memory_allocated(self.device))
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

    def __init__(self, params: list[torch.Tensor], optimizer: str, meter: MemoryMeter,
                 budget: int | None):
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
                f"enforced on accounted memory.")
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
        parts = {"parameters": self.param_bytes, "gradients": self.param_bytes,
                 "optimizer_state": self.state_bytes, "activations": act,
                 "workspace": ws if self.accounting else None, "micro_batch": size}
        if not self.accounting and self.peak:
            parts["workspace"] = max(self.peak - self.persistent - act, 0)
            if self.last_reserved is not None and self.last_allocated is not None:
                parts["allocator_cache"] = max(self.last_reserved - self.last_allocated, 0)
        return parts

    def recovery(self) -> dict[str, Any]:
        """After an OOM was cleaned up: memory now against the failed step's start."""
        after = self.meter.current()
        return {"memory_after_recovery_bytes": after,
                "memory_baseline_bytes": self.baseline if self.on_device else None,
                # on the CPU nothing was allocated: accounted memory is a model
                "memory_returned_to_baseline": (after <= self.baseline) if self.on_device
                else None}


class HostLoad:
    """How busy the machine's CPUs were with other processes since this object was made: the
    system's busy time (/proc/stat) less this process's own CPU time, as a share of all CPU
    time. None where the system does not say (not Linux). A measurement taken while others ran
    says so: a class's server, or a shared VM, is never really "alone"."""

    def __init__(self):
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [float(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
        own = os.times()
        return sum(fields) / ticks, (sum(fields) - idle) / ticks, own.user + own.system

    def others_share(self) -> float | None:
        end = self._read()
        if self._start is None or end is None:
            return None
        total, busy, own = (b - a for a, b in zip(self._start, end, strict=True))
        if total <= 0:
            return None
        return min(max((busy - own) / total, 0.0), 1.0)


class NvmlSampler:
    """Samples GPU utilisation, memory used and power every `interval_s` in a daemon thread.

    Only for CUDA devices, and silent when NVML is missing (no driver, no nvidia-ml-py): then
    `latest()` returns None and nothing else changes.
    """

    def __init__(self, device: torch.device, interval_s: float = 0.1):
        self._latest: dict[str, float] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle = None
        if device.type != "cuda":
            return
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            index = device.index if device.index is not None else torch.cuda.current_device()
            self._handle = _nvml_handle(pynvml, index)
            self._nvml = pynvml
        except Exception:  # noqa: BLE001 - any NVML failure means "no sampler", by design
            self._handle = None
            return
        self._interval = interval_s
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        nvml = self._nvml
        while not self._stop.is_set():
            try:
                util = nvml.nvmlDeviceGetUtilizationRates(self._handle)
                mem = nvml.nvmlDeviceGetMemoryInfo(self._handle)
                power = nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
                self._latest = {"utilization_pct": float(util.gpu), "memory_used_bytes": mem.used,
                                "power_w": power, "time": time.time()}
            except Exception:  # noqa: BLE001 - a failed sample is skipped, the run goes on
                pass
            self._stop.wait(self._interval)

    def latest(self) -> dict[str, float] | None:
        return self._latest

    def close(self) -> None:
        self._stop.set()


def _nvml_handle(nvml, torch_index: int):
    """NVML numbers GPUs by PCI order, torch by CUDA_VISIBLE_DEVICES: match by PCI bus id."""
    props = torch.cuda.get_device_properties(torch_index)
    bus_id = getattr(props, "pci_bus_id", None)
    if bus_id is not None:
        domain = getattr(props, "pci_domain_id", 0)
        device_id = getattr(props, "pci_device_id", 0)
        return nvml.nvmlDeviceGetHandleByPciBusId(f"{domain:08x}:{bus_id:02x}:{device_id:02x}.0")
    return nvml.nvmlDeviceGetHandleByIndex(torch_index)
