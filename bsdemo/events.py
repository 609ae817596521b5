"""The records a training run emits, in order: start, step/eval (many), end.

Pure Python and JSON-serialisable: the worker sends `to_dict()` of each through a queue, the CLI
prints them as JSON lines, and `bsdemo.charts` draws from the dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

END_STATUSES = ("completed", "diverged", "cancelled", "oom", "failed")


class _Event:
    kind: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        # vars() rather than dataclasses.asdict: asdict deep-copies and costs ~10x on the hot path
        return {"kind": self.kind, **vars(self)}


@dataclass
class StartEvent(_Event):
    kind: ClassVar[str] = "start"
    config: dict[str, Any]  # the validated config, field -> value
    notices: list[str]  # e.g. "batch clamped to the training set"
    device: dict[str, Any]  # name, type, total_memory_bytes, ...
    train_samples: int
    test_samples: int
    parameters: int  # trainable parameter count
    effective_batch_size: int
    tokens_per_sample: int  # sequence positions per sample (1 for non-sequence data)
    updates_per_epoch: int
    planned_steps: int
    memory_source: str  # "cuda allocator" | "mps allocator" | "accounted"
    # the training and test sets' tensors, resident for the whole run: inside an allocator's
    # peak when they sit on its device, never inside an accounted one (the page says so)
    dataset_bytes: int = 0


@dataclass
class StepEvent(_Event):
    kind: ClassVar[str] = "step"
    step: int  # optimizer steps done, from 1
    epoch: float  # epochs done, fractional (e.g. 1.5 = half-way through the second)
    samples_seen: int
    wall_time_s: float  # training time since the first step began: set-up and evaluations excluded
    loss: float  # mean training loss over the whole effective batch of this step
    lr: float
    step_time_s: float  # the optimizer step with all its micro-batches, device-synchronised
    samples_per_sec: float  # samples in this step / step_time_s
    memory_allocated_bytes: int | None  # live tensors after the step
    memory_reserved_bytes: int | None  # held by the caching allocator (CUDA/MPS); None on CPU
    peak_memory_bytes: int | None  # peak during this step (counter reset every step)
    utilization_pct: float | None = None  # NVML: share of time a kernel ran (GPU only)
    generator_loss: float | None = None  # a GAN's generator loss (`loss` is its discriminator's)
    # the training thread's CPU time for the step (a CPU with one torch thread; else None):
    # unlike step_time_s, other processes taking the core do not lengthen it
    cpu_time_s: float | None = None
    # on CUDA, the step's time on the GPU's stream between two CUDA events (else None): the
    # device's own timeline, which a busy host CPU does not lengthen the way it does the wall
    # clock's launch gaps on a large step
    device_time_s: float | None = None


@dataclass
class EvalEvent(_Event):
    kind: ClassVar[str] = "eval"
    step: int
    epoch: float
    samples_seen: int
    wall_time_s: float
    train_loss: float | None  # None where only the test split was evaluated
    train_accuracy: float | None
    test_loss: float  # a GAN: its discriminator's loss on the split's real images and as many
    test_accuracy: float  # generated ones, and the share of those it calls right
    frechet_distance: float | None = None  # a GAN: generated vs test images (lower is better)
    samples: list[list[float]] | None = None  # a GAN: a grid of generated images, pixels in [0, 1]
    # a 2-D dataset: the model's decision regions on a grid and test points to draw on them
    # (bsdemo.engine.regions.decision_regions)
    regions: dict[str, Any] | None = None


@dataclass
class EndEvent(_Event):
    kind: ClassVar[str] = "end"
    status: str  # one of END_STATUSES
    message: str  # for a person: what happened and, on failure, what to try
    summary: dict[str, Any] = field(default_factory=dict)
