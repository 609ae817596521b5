"""What each kind of job is, and what it may cost: one table the scheduler checks every job by.

A kind says whether it needs the device to itself, how its options are checked, and a bound on
what it can cost: the largest micro-batch one forward/backward pass will see, the largest
effective batch, the optimizer steps in all, the wall time of the whole job and the memory
predicted at its largest batch. The scheduler checks that bound against the server's limits
before anything is queued (`Limits.check`), so every kind obeys every limit, and a new kind is
one entry here plus its engine function (bsdemo.engine.worker runs it). Every kind is stopped
the same way: the worker's `should_stop()` (Stop, the unattended-run reaper, the job's time cap)
is checked between steps; an engine function that returns one record raises `JobStopped`.

Pure Python, no torch: the server checks jobs before a worker ever sees them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bsdemo import footprint
from bsdemo.architectures import (
    ARCHITECTURES,
    DEFAULT_BATCHES,
    DEFAULT_SECONDS,
    MAX_SECONDS,
    run_config,
)
from bsdemo.config import (
    MAX_ACCUMULATION_STEPS,
    MAX_SAMPLES,
    MODELS,
    NORMS,
    TEST_FRACTION,
    ConfigError,
    RunConfig,
)
from bsdemo.limits import Limits
from bsdemo.units import real_number, whole_number

POINT_KINDS = ("sweep_point", "find_probe", "norms_result", "noise_point", "sharpness_run",
               "critical_point", "fit_batch_result", "architecture_point",
               "architecture_summary", "ddp_progress",
               "pipeline_progress", "sharpness_progress")  # a job's records kept in order
# a measurement's partial figure while it runs, not one of its planned points
PROGRESS_KINDS = ("ddp_progress", "pipeline_progress", "sharpness_progress")
RESULT_KINDS = ("sweep_end", "find_result", "accum_check", "norms_end", "noise_result",
                "sharpness_result", "critical_result", "fit_batch_end", "ddp_check",
                "pipeline_check", "architectures_end")  # a job's one result
MAX_TIMED_STEPS = 2000  # a sweep point's timed steps, whatever its minimum duration asks
MAX_SWEEP_POINTS = 64
MAX_SWEEP_ROUNDS = 10  # a sweep point's rounds (a noisy one gets up to twice as many)
FIND_MAX_PROBES = 64  # two probes, halvings, a verification and a bisection: far fewer in practice
FIND_STEPS_PER_PROBE = 1 + 2 * 3 + 1  # the finder's warm-up, timed steps and partial batches
# the finder's recommendation: samples/s of this many sizes that fit, timed in rounds as a sweep
# times its points (at least this many steps each, no minimum duration: a bounded cost)
FIND_THROUGHPUT_SIZES = 7
FIND_THROUGHPUT_STEPS = 12
ACCUM_MEASURE_STEPS = 20  # the accumulation check times this many steps of each way


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
    name: str
    exclusive: bool  # a measurement: nothing else shares the device while it runs
    options: tuple[str, ...]  # the option names its engine function takes
    cost: Callable[[RunConfig, dict[str, Any], float], Cost]  # (cfg, checked options, wall_s)
    check: Callable[[RunConfig, dict[str, Any], Limits], dict[str, Any]]  # -> checked options
    models: tuple[str, ...] = MODELS  # the models its engine function can take
    why: str = ""  # why only those


GRADIENT_MODELS = tuple(m for m in MODELS if m != "gan")  # one loss, one labelled sample each
PLAIN_MODELS = ("mlp", "cnn")  # plain gradient steps on a classifier, Hessians affordable


def check_model(kind: str, cfg: RunConfig) -> None:
    """A ConfigError unless a job of `kind` can take cfg's model."""
    spec = KINDS[kind]
    if cfg.model not in spec.models:
        names = ", ".join(spec.models[:-1]) + " or " if len(spec.models) > 1 else ""
        raise ConfigError("model", cfg.model, f"{names}{spec.models[-1]}{spec.why}")


# ----- option checks (the server's copy of the engine functions' argument rules) -----
def _whole(options: Mapping, name: str, low: int, high: int, default: Any = None,
           optional: bool = False) -> int | None:
    """An option's whole number; a whole float counts (e.g. a budget of 1.5 * 2**20 bytes)."""
    value = options.get(name, default)
    if value is None and optional:
        return None
    return whole_number(name, value, low, high, exact=False)


def _real(options: Mapping, name: str, low: float, high: float, default: float) -> float:
    return real_number(name, options.get(name, default), low, high)


def _flag(options: Mapping, name: str) -> bool:
    value = options.get(name, False)
    if not isinstance(value, bool):
        raise ConfigError(name, value, "true or false")
    return value


def _budget(options: Mapping) -> int | None:
    return _whole(options, "memory_budget_bytes", 1, 2**50, optional=True)


def _no_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    return {}


def _sweep_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    sizes = options.get("batch_sizes")
    if (not isinstance(sizes, (list, tuple)) or not 1 <= len(sizes) <= MAX_SWEEP_POINTS
            or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in sizes)
            or len(set(sizes)) != len(sizes)):  # any order: the memory page's demo goes down
        raise ConfigError("batch_sizes", sizes, f"a list of 1 to {MAX_SWEEP_POINTS} different "
                                                "whole numbers of at least 1")
    return {"batch_sizes": list(sizes),
            "warmup_steps": _whole(options, "warmup_steps", 0, 100, default=3),
            "timed_steps": _whole(options, "timed_steps", 1, MAX_TIMED_STEPS, default=8),
            "min_timed_s": _real(options, "min_timed_s", 0.0, 60.0, default=0.15),
            "rounds": _whole(options, "rounds", 1, MAX_SWEEP_ROUNDS, default=3),
            "memory_budget_bytes": _budget(options),
            "continue_after_oom": _flag(options, "continue_after_oom")}


def _find_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    given = _whole(options, "max_batch", 1, 2**31, optional=True)
    lr = options.get("reference_lr")
    if lr is not None:
        _real(options, "reference_lr", 1e-12, 100.0, default=0.0)
    return {"memory_budget_bytes": _budget(options),
            "margin": _real(options, "margin", 0.0, 0.9, default=0.1),
            "target_effective_batch": _whole(options, "target_effective_batch", 1, 2**31,
                                             optional=True),
            "reference_batch": _whole(options, "reference_batch", 1, 10**6, optional=True),
            "reference_lr": lr,
            # the finder searches up to the server's largest batch, never past it
            "max_batch": min(given or limits.max_batch_size, limits.max_batch_size)}


def _accum_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    checked = {"micro_batch": _whole(options, "micro_batch", 1, 2**31, default=32),
               "accum": _whole(options, "accum", 1, MAX_ACCUMULATION_STEPS, default=4),
               "steps": _whole(options, "steps", 1, 1000, default=5),
               "unscaled_loss": _flag(options, "unscaled_loss"),
               "variable_length": _flag(options, "variable_length")}
    if cfg.batch_norm_1d and checked["micro_batch"] < 2:
        raise ConfigError("micro_batch", checked["micro_batch"],
                          "at least 2 with BatchNorm: it normalises over the micro-batch")
    big = accumulation_config(cfg, checked["variable_length"])
    if checked["micro_batch"] * checked["accum"] > big.train_samples:
        raise ConfigError("micro_batch", checked["micro_batch"],
                          f"micro-batch × accumulation steps at most the {big.train_samples:,} "
                          f"training samples (got {checked['micro_batch']} × {checked['accum']})")
    return checked


MAX_LESSON_BATCHES = 8  # the batch sizes of a normalisation grid or a noise measurement


def _increasing_batches(options: Mapping, default: list[int], fewest: int, smallest: int,
                        why: str = "") -> list[int]:
    """An increasing list of `fewest` to MAX_LESSON_BATCHES different batch sizes, each at least
    `smallest`."""
    sizes = options.get("batch_sizes", default)
    if (not isinstance(sizes, (list, tuple)) or not fewest <= len(sizes) <= MAX_LESSON_BATCHES
            or any(isinstance(b, bool) or not isinstance(b, int) or b < smallest for b in sizes)
            or list(sizes) != sorted(set(sizes))):
        raise ConfigError("batch_sizes", sizes, f"{fewest} to {MAX_LESSON_BATCHES} increasing "
                                                f"whole numbers of at least {smallest}{why}")
    return list(sizes)


def _norms_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    sizes = _increasing_batches(options, [2, 4, 8, 32, 128], 1, 2, " (BatchNorm needs two)")
    norms = options.get("norms", list(NORMS))
    if (not isinstance(norms, (list, tuple)) or not norms or len(set(norms)) != len(norms)
            or any(n not in NORMS for n in norms)):
        raise ConfigError("norms", norms, "different names from " + ", ".join(NORMS))
    if cfg.epochs is None:
        raise ConfigError("epochs", None, "an epoch budget: every cell trains the same epochs")
    return {"batch_sizes": sizes, "norms": list(norms)}


def norms_configs(cfg: RunConfig, options: Mapping[str, Any]) -> list[RunConfig]:
    """The runs of a normalisation grid, norm by norm, smallest batch first."""
    return [dataclasses.replace(cfg, norm=n, batch_size=b, accumulation_steps=1)
            for n in options["norms"] for b in options["batch_sizes"]]


MAX_NOISE_DRAWS = 256
NOISE_CHUNK = 4096  # the full gradient is taken over the training set in chunks of this many
NOISE_TWO_BATCH = (16, 512)  # the two-batch estimator's batch sizes


def _noise_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    return {"batch_sizes": _increasing_batches(options, [1, 4, 16, 64, 256], 2, 1),
            "draws": _whole(options, "draws", 2, MAX_NOISE_DRAWS, default=32),
            "after_steps": _whole(options, "after_steps", 0, 100_000, default=0)}


SHARPNESS_REMEDIES = ("scale_lr", "warmup", "longer", "noise")
HESSIAN_ITERS = 20  # power iterations for a solution's top Hessian eigenvalue
TRACE_POINTS = 8  # sharpness trace: 8 to 16 points per run
TRACE_ITERS = 2  # power iterations per trace point, warm-started from the last vector
TRACE_SAMPLES = 512  # the trace's Hessian: this many training samples, drawn once
HESSIAN_SAMPLES = 4096  # the Hessian is taken over the training set, or this many of its samples
CHECKS_PER_EPOCH = 8  # a mini-batch run checks the whole training loss this often
NEIGHBOURHOOD_RADIUS = 0.1  # random points this share of each weight row's norm away
NEIGHBOURHOOD_DIRECTIONS = 8
SLICE_POINTS = 41
LONGER_FACTOR = 4  # "train longer": this many times the steps the target took
WARMUP_SHARE = 0.1  # "warm-up": a linear ramp over this share of the step cap
SHARPNESS_MAX_STEPS = 3000  # each run's default step cap


LR_RULES = ("constant", "sqrt", "linear")


def rule_lr(lr: float, reference: int, batch: int, rule: str) -> float:
    """The lr for `batch` by a scaling rule from a reference batch's lr."""
    k = batch / reference
    return lr * {"constant": 1.0, "sqrt": math.sqrt(k), "linear": k}[rule]


REMEDY_LR_CAP = 0.8  # the scaled lr of the remedies, at most (√90 × 0.3 = 2.8 diverges)


def remedy_lr(lr: float, small: int, large: int, remedy: str | None) -> float:
    """The lr of a sharpness run: for scale_lr and warmup, scaled by sqrt(large / small) up to
    REMEDY_LR_CAP (never below lr itself)."""
    if remedy not in ("scale_lr", "warmup"):
        return lr
    return max(lr, min(rule_lr(lr, small, large, "sqrt"), REMEDY_LR_CAP))


def _sharpness_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    sizes = _increasing_batches(options, [16, 4096], 2, 1)
    if len(sizes) != 2:
        raise ConfigError("batch_sizes", sizes, "two increasing batch sizes: a small and a large")
    remedies = options.get("remedies", [])
    if (not isinstance(remedies, (list, tuple)) or len(set(remedies)) != len(remedies)
            or any(r not in SHARPNESS_REMEDIES for r in remedies)):
        raise ConfigError("remedies", remedies, "different names from "
                          + ", ".join(SHARPNESS_REMEDIES))
    if cfg.optimizer != "sgd":
        raise ConfigError("optimizer", cfg.optimizer, "sgd: the study's 2/lr and its Hessian are "
                                                      "those of plain gradient steps")
    if cfg.accumulation_steps != 1:
        raise ConfigError("accumulation_steps", cfg.accumulation_steps,
                          "1: the study's batches are whole batches")
    return {"batch_sizes": sizes,
            "target_loss": _real(options, "target_loss", 1e-4, 2.0, default=0.01),
            "max_steps": _whole(options, "max_steps", 10, 20_000, default=SHARPNESS_MAX_STEPS),
            "remedies": list(remedies)}


CRITICAL_DRAWS = 32  # batch-1 gradients behind the critical-batch study's B_simple
# lesson 10's ways to fit a bigger batch (bsdemo.engine.fitbatch; fp16 needs CUDA)
FIT_TECHNIQUES = ("fp32", "bf16", "fp16", "checkpointing", "bf16+checkpointing", "accumulation")
CRITICAL_MAX_EPOCHS = 250  # a run also stops after this many epochs (the full batch: steps)


def critical_steps(max_steps: int, batch: int, train_samples: int) -> int:
    """A critical-batch run's step cap: max_steps, or CRITICAL_MAX_EPOCHS epochs if fewer."""
    return min(max_steps, CRITICAL_MAX_EPOCHS * max(1, train_samples // batch))


def _critical_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    rule = options.get("rule", "sqrt")
    if rule not in LR_RULES:
        raise ConfigError("rule", rule, "one of " + ", ".join(LR_RULES))
    if cfg.optimizer != "sgd" or cfg.accumulation_steps != 1:
        raise ConfigError("optimizer" if cfg.optimizer != "sgd" else "accumulation_steps",
                          cfg.optimizer if cfg.optimizer != "sgd" else cfg.accumulation_steps,
                          "plain SGD with no accumulation: a step is one batch's gradient")
    return {"batch_sizes": _increasing_batches(options, [1, 4, 16, 64, 256, 4096], 2, 1),
            "target_loss": _real(options, "target_loss", 1e-4, 5.0, default=0.1),
            "rule": rule,
            "reference_batch": _whole(options, "reference_batch", 1, 2**16, default=32),
            "max_steps": _whole(options, "max_steps", 10, 100_000, default=20_000),
            "lr_cap": None if options.get("lr_cap", 0.8) is None
            else _real(options, "lr_cap", 1e-6, 100.0, default=0.8)}


FIT_PROBES = (8, 64)  # the two batches each technique's memory line is fitted through
FIT_TIMED_STEPS = 3  # steps timed at a technique's largest batch (their median)
FIT_BUDGET_STEPS = 100  # steps of the loss comparison
FIT_BUDGET_BATCH = 64


def _fit_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    budget = _budget(options)
    if budget is None:
        raise ConfigError("memory_budget_bytes", None, "a memory budget in bytes")
    names = options.get("techniques")
    if names is not None and (not isinstance(names, (list, tuple)) or not names
                              or len(set(names)) != len(names)
                              or any(t not in FIT_TECHNIQUES for t in names)):
        raise ConfigError("techniques", names, "different names from " + ", ".join(FIT_TECHNIQUES))
    return {"memory_budget_bytes": budget, "techniques": list(names) if names else None,
            "accumulation": _whole(options, "accumulation", 2, 64, default=4),
            "max_batch": limits.max_batch_size}


DDP_MAX_PROCESSES = 4  # a data-parallel job's group: more than a class's server should spare
DDP_MAX_STEPS = 200


def check_global_batch(cfg: RunConfig, processes: int) -> None:
    """A ConfigError unless every process's shard of the global batch is a full one."""
    if cfg.batch_size * processes > cfg.train_samples:
        raise ConfigError("batch_size", cfg.batch_size,
                          f"at most {cfg.train_samples // processes} with {processes} processes: "
                          f"the global batch must fit the {cfg.train_samples:,} training samples")


def _ddp_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    processes = _whole(options, "processes", 1, DDP_MAX_PROCESSES, default=2)
    check_global_batch(cfg, processes)
    return {"processes": processes, "steps": _whole(options, "steps", 1, DDP_MAX_STEPS, default=5)}


PIPELINE_STAGES = 2
PIPELINE_MAX_MICRO_BATCHES = 16


def check_pipeline(cfg: RunConfig, micro_batches: int) -> None:
    """A ConfigError unless cfg is an MLP with a hidden layer per stage and its batch splits
    into `micro_batches` equal micro-batches."""
    if cfg.model != "mlp":
        raise ConfigError("model", cfg.model, "mlp: the pipeline cuts the MLP's layers in two")
    if cfg.depth < PIPELINE_STAGES:
        raise ConfigError("depth", cfg.depth, f"at least {PIPELINE_STAGES} hidden layers: one "
                                              "per stage")
    if cfg.batch_size % micro_batches or cfg.batch_size > cfg.train_samples:
        raise ConfigError("batch_size", cfg.batch_size,
                          f"a multiple of the {micro_batches} micro-batches, at most "
                          f"{cfg.train_samples:,} (the training set)")


def _pipeline_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    micro = _whole(options, "micro_batches", 1, PIPELINE_MAX_MICRO_BATCHES, default=4)
    check_pipeline(cfg, micro)
    return {"micro_batches": micro, "steps": _whole(options, "steps", 1, DDP_MAX_STEPS, default=5)}


def _architectures_options(cfg: RunConfig, options: dict, limits: Limits) -> dict:
    names = options.get("architectures", list(ARCHITECTURES))
    if (not isinstance(names, (list, tuple)) or not names or len(set(names)) != len(names)
            or any(n not in ARCHITECTURES for n in names)):
        raise ConfigError("architectures", names, "different names from "
                          + ", ".join(ARCHITECTURES))
    return {"architectures": list(names),
            "batch_sizes": _increasing_batches(options, list(DEFAULT_BATCHES), 2, 1),
            "seconds": _real(options, "seconds", 0.5, MAX_SECONDS, default=DEFAULT_SECONDS)}


# ----- what each kind costs at most -----
def _train_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    return Cost(min(cfg.batch_size, cfg.train_samples), min(cfg.effective_batch_size,
                                                            cfg.train_samples),
                cfg.planned_steps, wall_s, footprint.predict(cfg).device)


def _sweep_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    sizes, rounds = options["batch_sizes"], options["rounds"]
    timed = max(1, -(-options["timed_steps"] // rounds))  # per round, as the engine shares it
    # the first round's warm-up, then up to twice `rounds` rounds of one warm-up step and a block
    per_point = (options["warmup_steps"] + 2 * rounds * (
        1 + sweep_point_steps(timed, options["min_timed_s"] / rounds, rounds)))
    largest = sweep_config(cfg, sizes)
    largest = dataclasses.replace(largest, batch_size=min(max(sizes), largest.train_samples),
                                  accumulation_steps=1)
    return Cost(max(sizes), max(sizes), per_point * len(sizes), wall_s,
                footprint.predict(largest).device)


def _find_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    largest = options["max_batch"]
    grown = sweep_config(cfg, [largest]) if largest > cfg.train_samples else cfg
    micro = min(largest, grown.train_samples)
    target = options["target_effective_batch"] or micro
    rounds = 3  # bsdemo.engine.sweep's default; up to twice as many for a noisy size
    throughput = FIND_THROUGHPUT_SIZES * (3 + 2 * rounds * (
        1 + sweep_point_steps(-(-FIND_THROUGHPUT_STEPS // rounds), 0.0)))
    return Cost(micro, max(micro, target), FIND_MAX_PROBES * FIND_STEPS_PER_PROBE + throughput,
                wall_s,
                footprint.predict(dataclasses.replace(grown, batch_size=micro,
                                                      accumulation_steps=1)).device)


def _accum_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    big = options["micro_batch"] * options["accum"]  # one batch of k·b: its own forward pass
    base = dataclasses.replace(accumulation_config(cfg, options["variable_length"]),
                               batch_size=big, accumulation_steps=1)
    passes = options["steps"] * (1 + options["accum"]) + ACCUM_MEASURE_STEPS * (1 + options["accum"])
    return Cost(big, big, passes, wall_s, footprint.predict(base).device)


def _norms_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    runs = [c.validated()[0] for c in norms_configs(cfg, options)]
    largest = max(runs, key=lambda c: c.batch_size)
    return Cost(largest.batch_size, largest.batch_size, sum(c.planned_steps for c in runs),
                wall_s, max(footprint.predict(c).device for c in runs))


def _noise_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    chunk = min(cfg.train_samples, NOISE_CHUNK)
    passes = (options["after_steps"] * cfg.accumulation_steps + 1
              + options["draws"] * (len(options["batch_sizes"]) + 3))
    big = dataclasses.replace(cfg, batch_size=max(chunk, *options["batch_sizes"]),
                              accumulation_steps=1)
    return Cost(big.batch_size, big.batch_size, passes, wall_s, footprint.predict(big).device)


def _sharpness_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    runs = 2 + len(options["remedies"])
    longer = LONGER_FACTOR - 1 if "longer" in options["remedies"] else 0
    steps = options["max_steps"] * (runs + longer)
    passes = steps * (2 + 2 * ("noise" in options["remedies"]))  # a step, its loss check
    big = dataclasses.replace(cfg, batch_size=min(max(options["batch_sizes"]),
                                                  cfg.train_samples), accumulation_steps=1)
    chunk = max(big.batch_size, min(cfg.train_samples, NOISE_CHUNK))
    # a Hessian-vector product keeps the backward graph for a second backward: twice a step's
    return Cost(chunk, big.batch_size, passes, wall_s,
                2 * footprint.predict(dataclasses.replace(big, batch_size=chunk)).device)


def _critical_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    sizes = [min(b, cfg.train_samples) for b in options["batch_sizes"]]
    passes = CRITICAL_DRAWS + 1 + 2 * sum(critical_steps(options["max_steps"], b,
                                                         cfg.train_samples) for b in sizes)
    big = dataclasses.replace(cfg, batch_size=max(max(sizes), min(cfg.train_samples,
                                                                  NOISE_CHUNK)),
                              accumulation_steps=1)
    return Cost(big.batch_size, max(sizes), passes, wall_s, footprint.predict(big).device)


def _fit_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    techniques = len(options["techniques"] or FIT_TECHNIQUES)
    largest = options["max_batch"]
    verify = max(1, math.ceil(math.log2(largest))) + 1
    passes = techniques * (len(FIT_PROBES) + verify + FIT_TIMED_STEPS * options["accumulation"]
                           + FIT_BUDGET_STEPS)
    big = dataclasses.replace(cfg, batch_size=min(largest, cfg.train_samples),
                              accumulation_steps=1)
    return Cost(largest, largest * options["accumulation"], passes, wall_s,
                min(options["memory_budget_bytes"], footprint.predict(big).device))


def _ddp_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    world = options["processes"]
    single = dataclasses.replace(cfg, batch_size=cfg.batch_size * world, accumulation_steps=1)
    # every member holds a model and its shard's activations; then one process the global batch
    return Cost(single.batch_size, single.batch_size, options["steps"] * (world + 1), wall_s,
                max(world * footprint.predict(dataclasses.replace(single, batch_size=cfg.batch_size)
                                              ).device, footprint.predict(single).device))


def _pipeline_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    whole = dataclasses.replace(cfg, accumulation_steps=1)
    # each stage holds half the model, and every micro-batch's activations until the backward
    return Cost(cfg.batch_size, cfg.batch_size, options["steps"] * (options["micro_batches"] + 1),
                wall_s, 2 * footprint.predict(whole).device)


def _architectures_cost(cfg: RunConfig, options: dict, wall_s: float) -> Cost:
    runs = [run_config(cfg, a, b, options["seconds"]).validated()[0]
            for a in options["architectures"] for b in options["batch_sizes"]]
    return Cost(max(r.batch_size for r in runs), max(r.batch_size for r in runs),
                sum(r.planned_steps for r in runs), wall_s,
                max(footprint.predict(r).device for r in runs))


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("train", exclusive=False, options=(), cost=_train_cost, check=_no_options),
    Kind("sweep", exclusive=True, options=("batch_sizes", "warmup_steps", "timed_steps",
                                           "min_timed_s", "rounds", "memory_budget_bytes",
                                           "continue_after_oom"),
         cost=_sweep_cost, check=_sweep_options),
    Kind("find", exclusive=True, options=("memory_budget_bytes", "margin",
                                          "target_effective_batch", "reference_batch",
                                          "reference_lr", "max_batch"),
         cost=_find_cost, check=_find_options),
    Kind("accum_check", exclusive=True, options=("micro_batch", "accum", "steps", "unscaled_loss",
                                                 "variable_length"),
         cost=_accum_cost, check=_accum_options, models=GRADIENT_MODELS,
         why=": a GAN's micro-batches draw their own latent points"),
    # accuracy, not speed: it may share the device with other runs
    Kind("norms", exclusive=False, options=("batch_sizes", "norms"), cost=_norms_cost,
         check=_norms_options, models=PLAIN_MODELS,
         why=": the models with a normalisation layer"),
    Kind("noise", exclusive=False, options=("batch_sizes", "draws", "after_steps"),
         cost=_noise_cost, check=_noise_options, models=GRADIENT_MODELS,
         why=": the gradient noise of one loss"),
    Kind("sharpness", exclusive=False, options=("batch_sizes", "target_loss", "max_steps",
                                                "remedies"),
         cost=_sharpness_cost, check=_sharpness_options, models=PLAIN_MODELS,
         why=": the study's Hessian is of plain gradient steps on a classifier"),
    Kind("critical", exclusive=False, options=("batch_sizes", "target_loss", "rule",
                                               "reference_batch", "max_steps", "lr_cap"),
         cost=_critical_cost, check=_critical_options, models=PLAIN_MODELS,
         why=": the study trains a classifier"),
    # a measurement of speed as well as memory: alone on the device
    Kind("fit_batch", exclusive=True, options=("memory_budget_bytes", "techniques",
                                               "accumulation", "max_batch"),
         cost=_fit_cost, check=_fit_options, models=("mlp", "cnn", "transformer"),
         why=": models cut into blocks to checkpoint"),
    # its own process group (bsdemo.engine.group): all the cores, so alone on the machine
    Kind("ddp", exclusive=True, options=("processes", "steps"), cost=_ddp_cost,
         check=_ddp_options, models=PLAIN_MODELS, why=": the check trains a classifier"),
    Kind("pipeline", exclusive=True, options=("micro_batches", "steps"), cost=_pipeline_cost,
         check=_pipeline_options, models=("mlp",), why=": the pipeline cuts the MLP's layers"),
    # speed is one of its three measurements: alone on the device. Each architecture brings its
    # own preset; the page's workload gives only the seed and the device.
    Kind("architectures", exclusive=True, options=("architectures", "batch_sizes", "seconds"),
         cost=_architectures_cost, check=_architectures_options),
)}


def planned_points(kind: str, options: Mapping[str, Any]) -> int | None:
    """How many point records (sweep points, grid cells, runs) a job of `kind` will send, where
    known in advance."""
    if kind == "sharpness":
        return 2 + len(options.get("remedies", []))
    if kind == "find":
        return None
    if kind == "fit_batch":
        return len(options.get("techniques") or FIT_TECHNIQUES)
    if kind == "architectures":  # a run per batch, then each architecture's summary
        return len(options.get("architectures", [])) * (len(options.get("batch_sizes", [])) + 1)
    sizes = len(options.get("batch_sizes", [])) or None
    return sizes * len(options.get("norms", NORMS)) if kind == "norms" and sizes else sizes


def assess(kind: str, cfg: RunConfig, options: Mapping[str, Any] | None, limits: Limits,
           wall_s: float) -> tuple[dict[str, Any], Cost]:
    """(checked options, cost bound) of one job of `kind` on a validated cfg; raises ConfigError
    for an unknown kind, an unknown or invalid option, or a cost over the limits."""
    spec = KINDS.get(kind)
    if spec is None:
        raise ConfigError("kind", kind, "one of " + ", ".join(KINDS))
    options = dict(options or {})
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise ConfigError(unknown[0], options[unknown[0]],
                          f"the options of a {kind} job: " + (", ".join(spec.options) or "none"))
    check_model(kind, cfg)
    checked = spec.check(cfg, options, limits)
    cost = spec.cost(cfg, checked, wall_s)
    limits.check(cost)
    return checked, cost


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
        cfg = dataclasses.replace(cfg, dataset="arithmetic", model="transformer", width=32,
                                  depth=1, norm="none")
    return cfg
