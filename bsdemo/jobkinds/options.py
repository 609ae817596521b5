"""Each job kind's options, declared once (bsdemo.jobkinds.schema.Option): the server checks a
job's options by them, the CLI builds its flags and checks their text by them, docs/cli.md is
generated from those flags. What relates an option to the workload is checked after, by the
server and the CLI alike (bsdemo.jobkinds.relate). Pure Python."""

from __future__ import annotations

from typing import Any

from bsdemo.architectures import ARCHITECTURES, DEFAULT_BATCHES, DEFAULT_SECONDS, MAX_SECONDS
from bsdemo.config import (
    MAX_ACCUMULATION_STEPS,
    MAX_BATCH_SIZE,
    NORMS,
)
from bsdemo.jobkinds.kind import (
    FIT_TECHNIQUES,
    LR_RULES,
    SHARPNESS_REMEDIES,
)
from bsdemo.jobkinds.schema import BATCHES, BYTES, CHOICE, NAMES, REAL, SWITCH, WHOLE, Option
from bsdemo.tunables import (
    DDP_MAX_PROCESSES,
    DDP_MAX_STEPS,
    MAX_NOISE_DRAWS,
    MAX_PROFILE_SIZES,
    MAX_PROFILE_STEPS,
    MAX_SWEEP_POINTS,
    MAX_SWEEP_ROUNDS,
    MAX_TIMED_STEPS,
    PIPELINE_MAX_MICRO_BATCHES,
    PROFILE_STEPS,
    SHARPNESS_MAX_STEPS,
    SWEEP_MIN_TIMED_S,
    SWEEP_ROUNDS,
    SWEEP_TIMED_STEPS,
    SWEEP_WARMUP_STEPS,
)

FULL_BATCH = "; a batch past the training set is the full batch"


def _steps(default: int, high: int, what: str = "optimizer steps compared") -> Option:
    return Option("steps", WHOLE, what, default=default, low=1, high=high)


def _budget(help_text: str, **rest: Any) -> Option:
    return Option("memory_budget_bytes", BYTES, help_text, flag="--memory-budget", **rest)


SWEEP = (
    Option(
        "batch_sizes",
        BATCHES,
        "the batch sizes to time, comma-separated, in any order",
        default=tuple(2**i for i in range(11)),
        most=MAX_SWEEP_POINTS,
        increasing=False,
        low=1,
        said="powers of two 1…1024",
    ),
    _budget("pretend the device has this much memory, e.g. 512MiB, 8GiB, 0.5GB (on the CPU: simulated)"),
    Option(
        "warmup_steps", WHOLE, "untimed steps per batch size", default=SWEEP_WARMUP_STEPS, low=0, high=100
    ),
    Option(
        "timed_steps",
        WHOLE,
        "at least this many timed steps per batch size, over all its rounds (their median counts)",
        default=SWEEP_TIMED_STEPS,
        low=1,
        high=MAX_TIMED_STEPS,
    ),
    Option(
        "min_timed_s",
        REAL,
        "... lasting at least this many seconds in all (0: exactly --timed-steps)",
        default=SWEEP_MIN_TIMED_S,
        low=0.0,
        high=60.0,
        flag="--min-time",
    ),
    Option(
        "rounds",
        WHOLE,
        "measure every batch size this many times, in a shuffled order each "
        "round (a noisy one up to twice as often)",
        default=SWEEP_ROUNDS,
        low=1,
        high=MAX_SWEEP_ROUNDS,
    ),
    Option(
        "continue_after_oom",
        SWITCH,
        "try the larger batch sizes after the first out-of-memory",
        default=False,
    ),
)

PROFILE = (
    Option(
        "batch_sizes",
        BATCHES,
        "increasing batch sizes",
        default=(8, 512),
        fewest=2,
        most=MAX_PROFILE_SIZES,
        low=1,
    ),
    Option(
        "steps",
        WHOLE,
        "profiled steps per batch size (the faster half is read)",
        default=PROFILE_STEPS,
        low=2,
        high=MAX_PROFILE_STEPS,
    ),
    Option(
        "cut",
        SWITCH,
        "skip the overhead cut (torch.compile compiles for seconds)",
        default=True,
        flag="--no-cut",
    ),
)

FIND = (
    _budget(
        "pretend the device has this much memory (on a CPU the default is a simulated "
        "device sized to the model, as the page's; 'device': the machine's own)",
        nullable=True,
        words=(("device", "device"),),
    ),
    Option("margin", REAL, "share of the budget kept free", default=0.1, low=0.0, high=0.9),
    Option(
        "target_effective_batch",
        WHOLE,
        "an effective batch to reach with micro-batch × accumulation steps",
        low=1,
        high=MAX_BATCH_SIZE * MAX_ACCUMULATION_STEPS,
    ),
    Option(
        "reference_batch",
        WHOLE,
        "the batch your --lr was tuned for, for lr scaling",
        default=32,
        low=1,
        high=10**6,
    ),
    Option(
        "reference_lr", REAL, "the reference batch's lr (the CLI's is --lr)", low=1e-12, high=100.0, flag=None
    ),
    Option(
        "max_batch",
        WHOLE,
        "the largest batch to consider",
        low=1,
        high=MAX_BATCH_SIZE,
        said="the whole training set",
    ),
)

ACCUM_CHECK = (
    Option("micro_batch", WHOLE, "micro-batch size b", default=32, low=1, high=MAX_BATCH_SIZE),
    Option("accum", WHOLE, "accumulation steps k", default=4, low=1, high=MAX_ACCUMULATION_STEPS),
    _steps(5, 1000),
    Option(
        "unscaled_loss",
        SWITCH,
        "forget to divide the micro-batch losses by k (the classic bug)",
        default=False,
    ),
    Option(
        "variable_length",
        SWITCH,
        "per-token loss over sequences of unequal length, "
        "averaged per micro-batch (switches to the arithmetic task)",
        default=False,
    ),
)

NORMS_GRID = (
    Option(
        "batch_sizes",
        BATCHES,
        "increasing batch sizes",
        default=(2, 4, 8, 32, 128),
        low=2,
        why=" (BatchNorm needs two samples)",
    ),
    Option(
        "norms",
        NAMES,
        "comma-separated from " + ", ".join(NORMS),
        default=tuple(NORMS),
        allowed=NORMS,
        said="all four",
    ),
)

NOISE = (
    Option(
        "batch_sizes",
        BATCHES,
        "increasing batch sizes (a slope needs two)",
        default=(1, 4, 16, 64, 256),
        fewest=2,
        low=1,
    ),
    Option("draws", WHOLE, "gradients drawn per batch size", default=32, low=2, high=MAX_NOISE_DRAWS),
    Option(
        "after_steps",
        WHOLE,
        "train this many optimizer steps first (0: at initialisation)",
        default=0,
        low=0,
        high=100_000,
    ),
)

SHARPNESS = (
    Option(
        "batch_sizes",
        BATCHES,
        "the small and the large batch",
        default=(16, 4096),
        fewest=2,
        most=2,
        low=1,
        why=": a small and a large",
        said="16,4096" + FULL_BATCH,
    ),
    Option(
        "target_loss",
        REAL,
        "train each run until its training loss reaches this",
        default=0.01,
        low=1e-4,
        high=2.0,
    ),
    Option("max_steps", WHOLE, "step cap of each run", default=SHARPNESS_MAX_STEPS, low=10, high=20_000),
    Option(
        "remedies",
        NAMES,
        "comma-separated, each one more large-batch run: scale_lr (lr × "
        "√k, at most 0.8), warmup (that lr after a ramp), longer (4× the steps), noise "
        "(small-batch gradient noise added)",
        default=(),
        allowed=SHARPNESS_REMEDIES,
        fewest=0,
        said="none",
    ),
)

CRITICAL = (
    Option(
        "batch_sizes",
        BATCHES,
        "increasing batch sizes",
        default=(1, 4, 16, 64, 256, 4096),
        fewest=2,
        low=1,
        said="1,4,16,64,256,4096" + FULL_BATCH,
    ),
    Option("target_loss", REAL, "training loss to reach", default=0.1, low=1e-4, high=5.0),
    Option("rule", CHOICE, "lr scaling: " + ", ".join(LR_RULES), default="sqrt", allowed=LR_RULES),
    Option("reference_batch", WHOLE, "the batch --lr is for", default=32, low=1, high=2**16),
    Option(
        "max_steps", WHOLE, "step cap of each run (at most 250 epochs)", default=20_000, low=10, high=100_000
    ),
    Option(
        "lr_cap",
        REAL,
        "no run's lr above this ('none': no cap)",
        default=0.8,
        low=1e-6,
        high=100.0,
        nullable=True,
        words=(("none", None),),
    ),
)

FIT_BATCH = (
    _budget(
        "pretend the device has this much memory (on the CPU the budget applies to accounted memory)",
        default=8 * 2**20,
    ),
    Option(
        "techniques",
        NAMES,
        "comma-separated from fp32, bf16, fp16 (CUDA), checkpointing, bf16+checkpointing, accumulation",
        allowed=FIT_TECHNIQUES,
        said="all this device runs",
    ),
    Option(
        "accumulation",
        WHOLE,
        "accumulation's micro-batches per step",
        default=4,
        low=2,
        high=64,
        flag="--accum",
    ),
)

DDP = (
    Option("processes", WHOLE, "processes in the group", default=2, low=1, high=DDP_MAX_PROCESSES),
    _steps(5, DDP_MAX_STEPS),
)

PIPELINE = (
    Option(
        "micro_batches", WHOLE, "micro-batches per step", default=4, low=1, high=PIPELINE_MAX_MICRO_BATCHES
    ),
    _steps(5, DDP_MAX_STEPS),
)

ARCHITECTURE_STUDY = (
    Option(
        "architectures",
        NAMES,
        "comma-separated from " + ", ".join(ARCHITECTURES),
        default=tuple(ARCHITECTURES),
        allowed=tuple(ARCHITECTURES),
        said="all",
    ),
    Option("batch_sizes", BATCHES, "increasing batch sizes", default=DEFAULT_BATCHES, fewest=2, low=1),
    Option("seconds", REAL, "training seconds per run", default=DEFAULT_SECONDS, low=0.5, high=MAX_SECONDS),
)
