"""The job kinds' shared parts: the record kinds, the cost bound (`Cost`) and a kind's
declaration (`Kind`), stopping (`JobStopped`), the option vocabularies, and the small torch-free
recipes both the cost bounds and the engine use (a sweep's steps, the lr rules, a study's
configs). The numbers they use are bsdemo.tunables'. Pure Python."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bsdemo.config import (
    MAX_SAMPLES,
    MODELS,
    TEST_FRACTION,
    CheckedRunConfig,
    ConfigError,
    RunConfig,
)
from bsdemo.jobkinds.schema import Option
from bsdemo.limits import Limits
from bsdemo.tunables import CRITICAL_MAX_EPOCHS, MAX_TIMED_STEPS, PIPELINE_STAGES, REMEDY_LR_CAP

POINT_KINDS = (
    "sweep_point",
    "profile_point",
    "cut_point",
    "find_probe",
    "norms_result",
    "noise_point",
    "sharpness_run",
    "critical_point",
    "fit_batch_result",
    "architecture_point",
    "architecture_summary",
    "ddp_progress",
    "pipeline_progress",
    "sharpness_progress",
)  # a job's records kept in order


# a measurement's partial figure while it runs, not one of its planned points
PROGRESS_KINDS = ("ddp_progress", "pipeline_progress", "sharpness_progress")


START_KINDS = ("sweep_start", "profile_start")  # a measurement's first record
RESULT_KINDS = (
    "sweep_end",
    "profile_end",
    "find_result",
    "accum_check",
    "norms_end",
    "noise_result",
    "sharpness_result",
    "critical_result",
    "fit_batch_end",
    "ddp_check",
    "pipeline_check",
    "architectures_end",
)  # a job's one result


def sweep_point_steps(timed_steps: int, min_timed_s: float, rounds: int = 1) -> int:
    """The most steps one round of a sweep point runs after its warm-up: room for partial last
    batches between the full ones, and for a minimum duration (the point's MAX_TIMED_STEPS
    shared out over up to twice `rounds` rounds)."""
    room = 2 * timed_steps + 1
    return room if min_timed_s <= 0 else max(room, MAX_TIMED_STEPS // (2 * rounds))


class JobStopped(Exception):
    """should_stop() said stop inside an engine function that returns a single record."""


def check_stop(should_stop: Callable[[], bool] | None) -> None:
    """Raise JobStopped when should_stop says so: what every long phase of an engine function
    asks, not only the gaps between its records."""
    if should_stop is not None and should_stop():
        raise JobStopped("Stopped before it finished.")


@dataclass(frozen=True)
class Cost:
    """The most a job can cost; checked against the limits before it is queued."""

    micro_batch: int  # largest batch in one forward/backward pass
    effective_batch: int  # largest samples per optimizer step
    steps: int  # optimizer steps (forward/backward passes for a check) in all, at most
    wall_s: float  # seconds the whole job may take: its time cap
    predicted_bytes: int  # device memory predicted at its largest batch (bsdemo.footprint)


@dataclass(frozen=True)
class Kind:
    """One job kind, declared once: everything the server, the worker and the CLI need of it.

    Adding a kind is one Kind in bsdemo.jobkinds.KINDS (its option schema in
    bsdemo.jobkinds.options), its cost bound, its engine function and its page: the worker
    imports `entry`; the scheduler's admission checks `options` and `relate`, bounds `cost` and
    reads `exclusive`, `label` and `unbounded_steps`; the scheduler reads `stored`, `joins` and
    `live` (Live mode); a class sweep runs its cells as the `room` kind; a page's progress
    reads `points`; the CLI maps `command` to the kind and builds its flags, and their checks,
    from `options`."""

    name: str
    exclusive: bool  # a measurement: nothing else shares the device while it runs
    cost: Callable[[CheckedRunConfig, dict[str, Any], float], Cost]  # (cfg, options, wall_s)
    # the options its engine function takes: type, range, default, help (bsdemo.jobkinds.schema)
    options: tuple[Option, ...] = ()
    # what relates the checked options to the config, (cfg, options, the server's limits or None
    # on the CLI) -> the options to run with; a ConfigError names the option or the field
    relate: Callable[[CheckedRunConfig, dict[str, Any], Limits | None], dict[str, Any]] = (
        lambda cfg, options, limits: options
    )
    models: tuple[str, ...] = MODELS  # the models its engine function can take
    why: str = ""  # why only those
    # its engine function, "module:function", imported by the worker (torch lives there):
    # called as function(cfg, should_stop=..., **checked options), it yields the job's records,
    # or returns its one record where `one_record`
    entry: str = ""
    one_record: bool = False
    ended: str = "Job"  # its end message's noun: "Sweep completed."
    label: str = ""  # what a run waiting behind it is told it waits for ("throughput sweep")
    command: str | None = None  # the CLI command that runs it (bsdemo sweep), if any
    # its largest step is not known before it runs (it searches, or each part brings its own
    # preset): admission cannot bound one step's time by the config's
    unbounded_steps: bool = False
    # how many point records (sweep points, grid cells, runs) it will send, from its options,
    # where known in advance: by default one per batch size
    points: Callable[[Mapping[str, Any]], int | None] = lambda options: (
        len(options.get("batch_sizes", [])) or None
    )
    # a run of its config: a finished one is served from the run store, one going with the same
    # settings is joined (a second browser rides it), and Live mode's changed setting replaces
    # the owner's running one (bsdemo.scheduler)
    stored: bool = False
    joins: bool = False
    live: bool = False
    # a class sweep's cell runs as a job of this kind: its records make the cell's report to the
    # room (bsdemo.classroom.sweep.cell_report); one kind says so
    room: bool = False

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.options)


GRADIENT_MODELS = tuple(m for m in MODELS if m != "gan")  # one loss, one labelled sample each


PLAIN_MODELS = ("mlp", "cnn")  # plain gradient steps on a classifier, Hessians affordable


def norms_configs(cfg: RunConfig, options: Mapping[str, Any]) -> list[RunConfig]:
    """The runs of a normalisation grid, norm by norm, smallest batch first."""
    return [
        dataclasses.replace(cfg, norm=n, batch_size=b, accumulation_steps=1)
        for n in options["norms"]
        for b in options["batch_sizes"]
    ]


SHARPNESS_REMEDIES = ("scale_lr", "warmup", "longer", "noise")


LR_RULES = ("constant", "sqrt", "linear")


def rule_lr(lr: float, reference: int, batch: int, rule: str) -> float:
    """The lr for `batch` by a scaling rule from a reference batch's lr."""
    k = batch / reference
    return lr * {"constant": 1.0, "sqrt": math.sqrt(k), "linear": k}[rule]


def remedy_lr(lr: float, small: int, large: int, remedy: str | None) -> float:
    """The lr of a sharpness run: for scale_lr and warmup, scaled by sqrt(large / small) up to
    REMEDY_LR_CAP (never below lr itself)."""
    if remedy not in ("scale_lr", "warmup"):
        return lr
    return max(lr, min(rule_lr(lr, small, large, "sqrt"), REMEDY_LR_CAP))


# lesson 10's ways to fit a bigger batch (bsdemo.engine.fitbatch; fp16 needs CUDA)
FIT_TECHNIQUES = ("fp32", "bf16", "fp16", "checkpointing", "bf16+checkpointing", "accumulation")


def critical_steps(max_steps: int, batch: int, train_samples: int) -> int:
    """A critical-batch run's step cap: max_steps, or CRITICAL_MAX_EPOCHS epochs if fewer."""
    return min(max_steps, CRITICAL_MAX_EPOCHS * max(1, train_samples // batch))


def check_global_batch(cfg: RunConfig, processes: int) -> None:
    """A ConfigError unless every process's shard of the global batch is a full one."""
    if cfg.batch_size * processes > cfg.train_samples:
        raise ConfigError(
            "batch_size",
            cfg.batch_size,
            f"at most {cfg.train_samples // processes} with {processes} processes: "
            f"the global batch must fit the {cfg.train_samples:,} training samples",
        )


def check_pipeline(cfg: RunConfig, micro_batches: int) -> None:
    """A ConfigError unless cfg is an MLP with a hidden layer per stage and its batch splits
    into `micro_batches` equal micro-batches."""
    if cfg.model != "mlp":
        raise ConfigError("model", cfg.model, "mlp: the pipeline cuts the MLP's layers in two")
    if cfg.depth < PIPELINE_STAGES:
        raise ConfigError("depth", cfg.depth, f"at least {PIPELINE_STAGES} hidden layers: one per stage")
    if cfg.batch_size % micro_batches or cfg.batch_size > cfg.train_samples:
        raise ConfigError(
            "batch_size",
            cfg.batch_size,
            f"a multiple of the {micro_batches} micro-batches, at most "
            f"{cfg.train_samples:,} (the training set)",
        )
    if cfg.batch_norm_1d and cfg.batch_size // micro_batches < 2:
        raise ConfigError(
            "micro_batches",
            micro_batches,
            f"at most {cfg.batch_size // 2} with BatchNorm and batch "
            f"{cfg.batch_size}: it normalises over each micro-batch, which needs "
            "two samples",
        )


# ----- torch-free recipes the engine shares with the cost bounds above -----
def sweep_config(cfg: RunConfig, batch_sizes) -> RunConfig:
    """cfg with a generated dataset grown so its training split holds the largest batch."""
    cfg, _ = cfg.validated()
    if cfg.dataset != "digits":
        need = math.ceil(max(batch_sizes) / (1 - TEST_FRACTION)) + 2
        cfg = dataclasses.replace(cfg, samples=min(max(cfg.samples, need), MAX_SAMPLES))
    return cfg


def accumulation_config(cfg: RunConfig, variable_length: bool) -> RunConfig:
    """The accumulation check's model: the per-token pitfall needs sequences (a small
    Transformer on the arithmetic task)."""
    if variable_length and cfg.model != "transformer":
        cfg = dataclasses.replace(
            cfg, dataset="arithmetic", model="transformer", width=32, depth=1, norm="none"
        )
    return cfg
