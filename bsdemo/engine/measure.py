"""Measurements: device choice and facts, threads, synchronised timing, the OS memory ceiling,
how busy other processes kept the CPU, and NVML sampling. A run's memory accounts live in
bsdemo.engine.memory.
"""

from __future__ import annotations

import os
import platform
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from bsdemo.config import ConfigError
from bsdemo.timing import THREAD_CLOCK, WALL_CLOCK


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
        info.update(
            name=props.name,
            total_memory_bytes=int(props.total_memory),
            capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
        )
    elif device.type == "mps":
        info.update(
            name="Apple GPU (MPS)",
            total_memory_bytes=int(torch.mps.recommended_max_memory())
            if hasattr(torch.mps, "recommended_max_memory")
            else None,
        )
    else:
        info.update(
            name=cpu_name(),
            cores=os.cpu_count(),
            threads=torch.get_num_threads(),
            total_memory_bytes=_host_memory_bytes(),
        )
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


class RunClock:
    """One run's own clocks where a worker steps several runs in turn (bsdemo.engine.worker):
    the wall clock and the thread's CPU clock, less the time spent on the other runs' turns
    (`leave` when its turn ends, `back` when the next begins). A run alone never leaves: its
    clocks are the plain ones. Its steps are timed inside a turn, never across one."""

    def __init__(self):
        self.away = self.away_cpu = 0.0
        self._left: tuple[float, float] | None = None

    def wall(self) -> float:
        return time.perf_counter() - self.away

    def cpu(self) -> float:
        return time.thread_time() - self.away_cpu

    def leave(self) -> None:
        self._left = (time.perf_counter(), time.thread_time())

    def back(self) -> None:
        if self._left is not None:
            wall, cpu = self._left
            self.away += time.perf_counter() - wall
            self.away_cpu += time.thread_time() - cpu
            self._left = None


def cpu_clock(device: torch.device, clock: RunClock | None = None) -> Callable[[], float] | None:
    """The training thread's own CPU-time clock where it times a whole step: a CPU device with
    one torch thread, where every operation runs inline on the calling thread. Another process
    taking the core stops this clock, not the wall clock, so a step timed by it reads the same
    on a busy machine as on a quiet one: what the device does, not what you waited. None where
    a step's work runs on other threads (several torch threads) or on a GPU."""
    if device.type == "cpu" and torch.get_num_threads() == 1:
        return clock.cpu if clock is not None else time.thread_time
    return None


def step_clock(device: torch.device) -> tuple[Callable[[], float], str]:
    """(clock, its name) to time a step's own work: cpu_clock where it applies, else the wall
    clock."""
    tick = cpu_clock(device)
    return (tick, THREAD_CLOCK) if tick is not None else (time.perf_counter, WALL_CLOCK)


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so a timer brackets real execution (no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


class HostLoad:
    """How busy the machine's CPUs were with other processes since this object was made: the
    system's busy time (/proc/stat) less this process's own CPU time, as a share of all CPU
    time. None where the system does not say (not Linux). A measurement taken while others ran
    says so: a class's server, or a shared VM, is never really "alone"."""

    def __init__(self):
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float, float] | None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [float(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
        own = os.times()
        return (
            sum(fields) / ticks,
            (sum(fields) - idle) / ticks,
            own.user + own.system,
            own.children_user + own.children_system,
        )

    def others_share(self, children: bool = False) -> float | None:
        """children: this process's finished children (a process group's members) count as
        its own work, not as others'."""
        end = self._read()
        if self._start is None or end is None:
            return None
        total, busy, own, kids = (b - a for a, b in zip(self._start, end, strict=True))
        own += kids if children else 0.0
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
                self._latest = {
                    "utilization_pct": float(util.gpu),
                    "memory_used_bytes": mem.used,
                    "power_w": power,
                    "time": time.time(),
                }
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
