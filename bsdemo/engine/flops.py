"""Achieved FLOP/s and the device's peak, so utilisation can be read as a share of the maximum.

FLOPs per sample are counted, not estimated: torch.utils.flop_counter over one real training
step (forward + backward) counts every matmul and convolution. The peak comes from a table of
datasheet figures for known GPUs — fp32, or the dense TF32 tensor-core rate where this torch lets
the model's fp32 convolutions or matmuls run in TF32 — or, on the CPU, from a measured matmul
probe on the same threads the runs use.
"""

from __future__ import annotations

import time
import warnings

import torch
from torch.utils.flop_counter import FlopCounterMode

# dense fp32 peak, TFLOP/s, from vendor datasheets (not tensor-core TF32/bf16 rates); longest
# matching name wins, so "H100 PCIe" is found before "H100"
FP32_PEAK_TFLOPS = {
    "H200": 67.0,
    "H100 PCIe": 51.0,
    "H100": 67.0,
    "A100": 19.5,
    "A10": 31.2,
    "L40S": 91.6,
    "L4": 30.3,
    "T4": 8.1,
    "V100": 15.7,
    "RTX 4090": 82.6,
    "RTX 4080": 48.7,
    "RTX 3090": 35.6,
    "RTX 3080": 29.8,
    "RTX 3060": 12.7,
    "M1 Max": 10.4,
    "M1 Pro": 5.2,
    "M1": 2.6,
    "M2 Max": 13.6,
    "M2 Pro": 6.8,
    "M2": 3.6,
    "M3 Max": 16.3,
    "M3": 4.1,
}


# dense TF32 tensor-core peak, TFLOP/s, from the same datasheets (without sparsity); GPUs before
# Ampere (T4, V100) and Apple's have none, and keep the fp32 peak
TF32_PEAK_TFLOPS = {
    "H200": 494.7,
    "H100 PCIe": 378.0,
    "H100": 494.7,
    "A100": 156.0,
    "A10": 62.5,
    "L40S": 183.0,
    "L4": 60.0,
    "RTX 4090": 82.6,
    "RTX 4080": 48.7,
    "RTX 3090": 35.6,
    "RTX 3080": 29.8,
    "RTX 3060": 12.7,
}


def tf32_ops(model: str) -> list[str]:
    """Which of a model kind's fp32 ops this torch's settings let CUDA run in TF32: convolutions
    (cuDNN's default is TF32 in this torch) and matmuls (off unless the float32 matmul
    precision is lowered)."""
    with warnings.catch_warnings():  # the allow_tf32 flags are deprecated in newer torch
        warnings.simplefilter("ignore")
        conv = getattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision", None)
        conv_tf32 = conv == "tf32" if conv not in (None, "none") else torch.backends.cudnn.allow_tf32
        matmul = getattr(torch.backends.cuda.matmul, "fp32_precision", None)
        matmul_tf32 = (
            matmul == "tf32"
            if matmul not in (None, "none")
            else torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"
        )
    return (["convolutions"] if conv_tf32 and model == "cnn" else []) + (["matmuls"] if matmul_tf32 else [])


def flops_per_sample(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn=None) -> float:
    """Counted FLOPs of one training step (forward + backward) on the batch (x, y), per sample
    (loss_fn: a model the user brought, its own loss)."""
    from bsdemo.engine.train import micro_loss  # the training loss itself, sequences included

    with FlopCounterMode(display=False) as counter:
        micro_loss(model, x, y, len(y), loss_fn).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / len(y)


def device_peak_flops(info: dict, tf32: list[str] | None = None) -> tuple[float | None, str]:
    """(peak FLOP/s, where the number comes from) for the device described by device_info().
    `tf32` names the model's ops that may run in TF32 (tf32_ops): on a GPU with tensor cores
    the reference is then the TF32 peak, so that no share can pass 100% by a math mode."""
    if info.get("type") == "cpu":
        return cpu_matmul_flops(), (
            "measured: the best fp32 matmul probe on this CPU's worker threads since the worker started"
        )
    name = str(info.get("name", ""))

    def find(table: dict[str, float]) -> str | None:
        return next(
            (key for key in sorted(table, key=len, reverse=True) if key.lower() in name.lower()), None
        )

    if tf32 and (key := find(TF32_PEAK_TFLOPS)):
        return TF32_PEAK_TFLOPS[key] * 1e12, (
            f"datasheet dense TF32 tensor-core peak of the "
            f"{key}: this torch runs the model's "
            f"{' and '.join(tf32)} in TF32"
        )
    if key := find(FP32_PEAK_TFLOPS):
        return FP32_PEAK_TFLOPS[key] * 1e12, f"datasheet fp32 peak of the {key}"
    return None, f"no peak on record for {name or 'this device'}"


_cpu_best = 0.0  # the best probe of this process: load only ever reads a peak low


def cpu_matmul_flops(n: int = 1024, repeats: int = 5) -> float:
    """FLOP/s of an n x n fp32 matmul on the current torch threads: the best of `repeats` now
    and of every probe this process ran before (the worker probes once at start-up, idle, and
    again before each sweep; other processes' load can only make a probe read lower)."""
    global _cpu_best
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up: thread pool, caches
    best = float("inf")
    # on one thread, its CPU time: a probe another process interrupts does not read low
    clock = time.thread_time if torch.get_num_threads() == 1 else time.perf_counter
    for _ in range(repeats):
        t = clock()
        a @ b
        best = min(best, clock() - t)
    _cpu_best = max(_cpu_best, 2 * n**3 / best)
    return _cpu_best
