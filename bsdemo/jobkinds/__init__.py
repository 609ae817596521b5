"""What each kind of job is, and what it may cost: one table the scheduler checks every job by.

A kind says whether it needs the device to itself, how its options are checked, and a bound on
what it can cost: the largest micro-batch one forward/backward pass will see, the largest
effective batch, the optimizer steps in all, the wall time of the whole job and the memory
predicted at its largest batch. The scheduler checks that bound against the server's limits
before anything is queued (`Limits.check`), so every kind obeys every limit. A new kind is one
entry in the table here, its option check (`options.py`), its cost bound (`costs.py`) and its
engine function (bsdemo.engine.worker runs it); the names they share are in `kind.py`, the
numbers they use in bsdemo.tunables. Every kind is stopped
the same way: the worker's `should_stop()` (Stop, the unattended-run reaper, the job's time cap)
is checked between steps; an engine function that returns one record raises `JobStopped`.

Pure Python, no torch: the server checks jobs before a worker ever sees them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bsdemo.config import NORMS, CheckedRunConfig, ConfigError, RunConfig
from bsdemo.jobkinds.costs import (
    _accum_cost,
    _architectures_cost,
    _critical_cost,
    _ddp_cost,
    _find_cost,
    _fit_cost,
    _noise_cost,
    _norms_cost,
    _pipeline_cost,
    _profile_cost,
    _sharpness_cost,
    _sweep_cost,
    _train_cost,
)
from bsdemo.jobkinds.kind import (
    FIT_TECHNIQUES,
    GRADIENT_MODELS,
    LR_RULES,
    PLAIN_MODELS,
    POINT_KINDS,
    PROGRESS_KINDS,
    RESULT_KINDS,
    SHARPNESS_REMEDIES,
    START_KINDS,
    Cost,
    JobStopped,
    Kind,
    accumulation_config,
    check_global_batch,
    check_pipeline,
    check_stop,
    critical_steps,
    norms_configs,
    remedy_lr,
    rule_lr,
    sweep_config,
    sweep_point_steps,
)
from bsdemo.jobkinds.options import (
    _accum_options,
    _architectures_options,
    _critical_options,
    _ddp_options,
    _find_options,
    _fit_options,
    _no_options,
    _noise_options,
    _norms_options,
    _pipeline_options,
    _profile_options,
    _sharpness_options,
    _sweep_options,
)
from bsdemo.limits import Limits
from bsdemo.tunables import (
    ACCUM_MEASURE_STEPS,
    CHECKS_PER_EPOCH,
    CRITICAL_DRAWS,
    CRITICAL_MAX_EPOCHS,
    DDP_MAX_PROCESSES,
    DDP_MAX_STEPS,
    FIND_MAX_PROBES,
    FIND_STEPS_PER_PROBE,
    FIND_THROUGHPUT_SIZES,
    FIND_THROUGHPUT_STEPS,
    FIT_BUDGET_BATCH,
    FIT_BUDGET_STEPS,
    FIT_PROBES,
    FIT_TIMED_STEPS,
    HESSIAN_ITERS,
    HESSIAN_SAMPLES,
    LONGER_FACTOR,
    MAX_LESSON_BATCHES,
    MAX_NOISE_DRAWS,
    MAX_PROFILE_SIZES,
    MAX_PROFILE_STEPS,
    MAX_SWEEP_POINTS,
    MAX_SWEEP_ROUNDS,
    MAX_TIMED_STEPS,
    NEIGHBOURHOOD_DIRECTIONS,
    NEIGHBOURHOOD_RADIUS,
    NOISE_CHUNK,
    NOISE_TWO_BATCH,
    PIPELINE_MAX_MICRO_BATCHES,
    PIPELINE_STAGES,
    PROFILE_CUT_BLOCKS,
    PROFILE_CUT_STEPS,
    PROFILE_PLAIN_STEPS,
    PROFILE_STEPS,
    PROFILE_WARMUP,
    REMEDY_LR_CAP,
    SHARPNESS_MAX_STEPS,
    SLICE_POINTS,
    TRACE_ITERS,
    TRACE_POINTS,
    TRACE_SAMPLES,
    WARMUP_SHARE,
)

# the kinds' shared names, for `from bsdemo.jobkinds import ...` anywhere
__all__ = ["ACCUM_MEASURE_STEPS", "CHECKS_PER_EPOCH", "CRITICAL_DRAWS", "CRITICAL_MAX_EPOCHS",
           "Cost", "DDP_MAX_PROCESSES", "DDP_MAX_STEPS", "FIND_MAX_PROBES",
           "FIND_STEPS_PER_PROBE", "FIND_THROUGHPUT_SIZES", "FIND_THROUGHPUT_STEPS",
           "FIT_BUDGET_BATCH", "FIT_BUDGET_STEPS", "FIT_PROBES", "FIT_TECHNIQUES",
           "FIT_TIMED_STEPS", "GRADIENT_MODELS", "HESSIAN_ITERS", "HESSIAN_SAMPLES",
           "JobStopped", "KINDS", "Kind", "LONGER_FACTOR", "LR_RULES", "MAX_LESSON_BATCHES",
           "MAX_NOISE_DRAWS", "MAX_SWEEP_POINTS", "MAX_SWEEP_ROUNDS", "MAX_TIMED_STEPS",
           "NEIGHBOURHOOD_DIRECTIONS", "NEIGHBOURHOOD_RADIUS", "NOISE_CHUNK",
           "NOISE_TWO_BATCH", "NORMS", "PIPELINE_MAX_MICRO_BATCHES", "PIPELINE_STAGES",
           "PLAIN_MODELS", "POINT_KINDS", "PROGRESS_KINDS", "REMEDY_LR_CAP", "RESULT_KINDS",
           "SHARPNESS_MAX_STEPS", "SHARPNESS_REMEDIES", "SLICE_POINTS", "TRACE_ITERS",
           "TRACE_POINTS", "TRACE_SAMPLES", "WARMUP_SHARE", "accumulation_config", "assess",
           "check_global_batch", "check_model", "check_pipeline", "check_stop",
           "MAX_PROFILE_SIZES", "MAX_PROFILE_STEPS", "PROFILE_CUT_BLOCKS", "PROFILE_CUT_STEPS",
           "PROFILE_PLAIN_STEPS", "PROFILE_STEPS", "PROFILE_WARMUP", "START_KINDS",
           "critical_steps", "norms_configs", "planned_points", "remedy_lr", "rule_lr",
           "sweep_config", "sweep_point_steps"]


def check_model(kind: str, cfg: RunConfig) -> None:
    """A ConfigError unless a job of `kind` can take cfg's model."""
    spec = KINDS[kind]
    if cfg.model not in spec.models:
        names = ", ".join(spec.models[:-1]) + " or " if len(spec.models) > 1 else ""
        raise ConfigError("model", cfg.model, f"{names}{spec.models[-1]}{spec.why}")


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("train", exclusive=False, options=(), cost=_train_cost, check=_no_options,
         ended="Run", points=lambda options: None),
    Kind("sweep", exclusive=True, options=("batch_sizes", "warmup_steps", "timed_steps",
                                           "min_timed_s", "rounds", "memory_budget_bytes",
                                           "continue_after_oom"),
         cost=_sweep_cost, check=_sweep_options, entry="bsdemo.engine.sweep:sweep",
         ended="Sweep", label="throughput sweep", command="sweep"),
    # a step's timeline at each batch, and its fixed cost cut: a measurement of speed
    Kind("profile", exclusive=True, options=("batch_sizes", "steps", "cut"),
         cost=_profile_cost, check=_profile_options, models=GRADIENT_MODELS,
         why=": one loss, one optimizer", entry="bsdemo.engine.profile:profile_steps",
         ended="Profile", command="profile"),
    Kind("find", exclusive=True, options=("memory_budget_bytes", "margin",
                                          "target_effective_batch", "reference_batch",
                                          "reference_lr", "max_batch"),
         cost=_find_cost, check=_find_options, entry="bsdemo.engine.finder:find_batch_size",
         ended="Search", label="batch-size search", command="find", unbounded_steps=True,
         points=lambda options: None),
    Kind("accum_check", exclusive=True, options=("micro_batch", "accum", "steps", "unscaled_loss",
                                                 "variable_length"),
         cost=_accum_cost, check=_accum_options, models=GRADIENT_MODELS,
         why=": a GAN's micro-batches draw their own latent points",
         entry="bsdemo.engine.accumulation:accumulation_check", one_record=True, ended="Check",
         label="gradient-accumulation check", command="accum-check"),
    # accuracy, not speed: it may share the device with other runs
    Kind("norms", exclusive=False, options=("batch_sizes", "norms"), cost=_norms_cost,
         check=_norms_options, models=PLAIN_MODELS,
         why=": the models with a normalisation layer", entry="bsdemo.engine.norms:norms_grid",
         ended="Grid", command="norms",
         points=lambda options: (len(options.get("batch_sizes", [])) * len(options.get("norms", NORMS))
                                 or None)),
    Kind("noise", exclusive=False, options=("batch_sizes", "draws", "after_steps"),
         cost=_noise_cost, check=_noise_options, models=GRADIENT_MODELS,
         why=": the gradient noise of one loss", entry="bsdemo.engine.noise:noise_measure",
         ended="Measurement", command="noise"),
    Kind("sharpness", exclusive=False, options=("batch_sizes", "target_loss", "max_steps",
                                                "remedies"),
         cost=_sharpness_cost, check=_sharpness_options, models=PLAIN_MODELS,
         why=": the study's Hessian is of plain gradient steps on a classifier",
         entry="bsdemo.engine.sharpness:sharpness_study", ended="Study", command="sharpness",
         points=lambda options: 2 + len(options.get("remedies", []))),
    Kind("critical", exclusive=False, options=("batch_sizes", "target_loss", "rule",
                                               "reference_batch", "max_steps", "lr_cap"),
         cost=_critical_cost, check=_critical_options, models=PLAIN_MODELS,
         why=": the study trains a classifier", entry="bsdemo.engine.critical:critical_batch",
         ended="Study", command="critical-batch"),
    # a measurement of speed as well as memory: alone on the device
    Kind("fit_batch", exclusive=True, options=("memory_budget_bytes", "techniques",
                                               "accumulation", "max_batch"),
         cost=_fit_cost, check=_fit_options, models=("mlp", "cnn", "transformer"),
         why=": models cut into blocks to checkpoint", entry="bsdemo.engine.fitbatch:fit_batch",
         ended="Measurement", label="fit-a-bigger-batch measurement", command="fit-batch",
         unbounded_steps=True,
         points=lambda options: len(options.get("techniques") or FIT_TECHNIQUES)),
    # its own process group (bsdemo.engine.group): all the cores, so alone on the machine
    Kind("ddp", exclusive=True, options=("processes", "steps"), cost=_ddp_cost,
         check=_ddp_options, models=PLAIN_MODELS, why=": the check trains a classifier",
         entry="bsdemo.engine.ddp:ddp_records", ended="Check", label="data-parallel check",
         command="ddp-check"),
    Kind("pipeline", exclusive=True, options=("micro_batches", "steps"), cost=_pipeline_cost,
         check=_pipeline_options, models=("mlp",), why=": the pipeline cuts the MLP's layers",
         entry="bsdemo.engine.pipeline:pipeline_records", ended="Check", label="pipeline check",
         command="pipeline-check"),
    # speed is one of its three measurements: alone on the device. Each architecture brings its
    # own preset; the page's workload gives only the seed and the device. A run per batch,
    # then each architecture's summary.
    Kind("architectures", exclusive=True, options=("architectures", "batch_sizes", "seconds"),
         cost=_architectures_cost, check=_architectures_options,
         entry="bsdemo.engine.architectures:architecture_sweep", ended="Study",
         label="architecture study", command="architectures", unbounded_steps=True,
         points=lambda options: len(options.get("architectures", []))
         * (len(options.get("batch_sizes", [])) + 1)),
)}


def planned_points(kind: str, options: Mapping[str, Any]) -> int | None:
    """How many point records (sweep points, grid cells, runs) a job of `kind` will send, where
    known in advance."""
    return KINDS[kind].points(options)


USER_CODE_OPTIONS = frozenset({"model_file", "workload", "model_factory"})  # never a job's


def assess(kind: str, cfg: CheckedRunConfig, options: Mapping[str, Any] | None, limits: Limits,
           wall_s: float) -> tuple[dict[str, Any], Cost]:
    """(checked options, cost bound) of one job of `kind` on a checked cfg; raises ConfigError
    for an unknown kind, an unknown or invalid option, or a cost over the limits."""
    spec = KINDS.get(kind)
    if spec is None:
        raise ConfigError("kind", kind, "one of " + ", ".join(KINDS))
    options = dict(options or {})
    code = sorted(USER_CODE_OPTIONS & options.keys())
    if code:
        raise ConfigError(code[0], options[code[0]], "nothing here: a shared lab server never "
                          "loads user code. Measure your own model in a terminal of your own "
                          "(bsdemo sweep --model-file FILE.py:FACTORY) or with bsdemo.api")
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise ConfigError(unknown[0], options[unknown[0]],
                          f"the options of a {kind} job: " + (", ".join(spec.options) or "none"))
    check_model(kind, cfg)
    checked = spec.check(cfg, options, limits)
    cost = spec.cost(cfg, checked, wall_s)
    limits.check(cost)
    return checked, cost
