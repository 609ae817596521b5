"""What each kind of job is, and what it may cost: one table the scheduler checks every job by.

A kind says whether it needs the device to itself, how its options are checked, and a bound on
what it can cost: the largest micro-batch one forward/backward pass will see, the largest
effective batch, the optimizer steps in all, the wall time of the whole job and the memory
predicted at its largest batch. The scheduler checks that bound against the server's limits
before anything is queued (`Limits.check`), so every kind obeys every limit. A new kind is one
entry in the table here, its options' schema (`options.py`: each option's type, range, default
and help, from which the server's check and the CLI's flags are built), its cost bound
(`costs.py`) and its engine function (bsdemo.engine.worker runs it); the names they share are in
`kind.py`, the numbers they use in bsdemo.tunables. Every kind is stopped the same way: the
worker's `should_stop()` (Stop, the unattended-run reaper, the job's time cap) is checked between
steps; an engine function that returns one record raises `JobStopped`.

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
    ACCUM_CHECK,
    ARCHITECTURE_STUDY,
    CRITICAL,
    DDP,
    FIND,
    FIT_BATCH,
    NOISE,
    NORMS_GRID,
    PIPELINE,
    PROFILE,
    SHARPNESS,
    SWEEP,
)
from bsdemo.jobkinds.relate import (
    relate_accum,
    relate_ddp,
    relate_find,
    relate_fit,
    relate_norms,
    relate_pipeline,
    relate_plain_sgd,
)
from bsdemo.jobkinds.schema import Option, check_options
from bsdemo.limits import Limits

# the kinds' shared names, for `from bsdemo.jobkinds import ...` anywhere (the engine's numbers:
# bsdemo.tunables)
__all__ = [
    "FIT_TECHNIQUES",
    "GRADIENT_MODELS",
    "KINDS",
    "LR_RULES",
    "NORMS",
    "PLAIN_MODELS",
    "POINT_KINDS",
    "PROGRESS_KINDS",
    "RESULT_KINDS",
    "ROOM_KIND",
    "SHARPNESS_REMEDIES",
    "START_KINDS",
    "Cost",
    "JobStopped",
    "Kind",
    "Option",
    "accumulation_config",
    "assess",
    "check_global_batch",
    "check_model",
    "check_pipeline",
    "check_stop",
    "critical_steps",
    "norms_configs",
    "planned_points",
    "remedy_lr",
    "rule_lr",
    "sweep_config",
    "sweep_point_steps",
]


def check_model(kind: str, cfg: RunConfig) -> None:
    """A ConfigError unless a job of `kind` can take cfg's model."""
    spec = KINDS[kind]
    if cfg.model not in spec.models:
        names = ", ".join(spec.models[:-1]) + " or " if len(spec.models) > 1 else ""
        raise ConfigError("model", cfg.model, f"{names}{spec.models[-1]}{spec.why}")


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "train",
            exclusive=False,
            cost=_train_cost,
            ended="Run",
            points=lambda options: None,
            stored=True,
            joins=True,
            live=True,
            room=True,
        ),
        Kind(
            "sweep",
            exclusive=True,
            options=SWEEP,
            cost=_sweep_cost,
            entry="bsdemo.engine.sweep:sweep",
            ended="Sweep",
            label="throughput sweep",
            command="sweep",
        ),
        # a step's timeline at each batch, and its fixed cost cut: a measurement of speed
        Kind(
            "profile",
            exclusive=True,
            options=PROFILE,
            cost=_profile_cost,
            models=GRADIENT_MODELS,
            why=": one loss, one optimizer",
            entry="bsdemo.engine.profile:profile_steps",
            ended="Profile",
            command="profile",
        ),
        Kind(
            "find",
            exclusive=True,
            options=FIND,
            relate=relate_find,
            cost=_find_cost,
            entry="bsdemo.engine.finder:find_batch_size",
            ended="Search",
            label="batch-size search",
            command="find",
            unbounded_steps=True,
            points=lambda options: None,
        ),
        Kind(
            "accum_check",
            exclusive=True,
            options=ACCUM_CHECK,
            relate=relate_accum,
            cost=_accum_cost,
            models=GRADIENT_MODELS,
            why=": a GAN's micro-batches draw their own latent points",
            entry="bsdemo.engine.accumulation:accumulation_check",
            one_record=True,
            ended="Check",
            label="gradient-accumulation check",
            command="accum-check",
        ),
        # accuracy, not speed: it may share the device with other runs
        Kind(
            "norms",
            exclusive=False,
            options=NORMS_GRID,
            relate=relate_norms,
            cost=_norms_cost,
            models=PLAIN_MODELS,
            why=": the models with a normalisation layer",
            entry="bsdemo.engine.norms:norms_grid",
            ended="Grid",
            command="norms",
            points=lambda options: (
                len(options.get("batch_sizes", [])) * len(options.get("norms", NORMS)) or None
            ),
        ),
        Kind(
            "noise",
            exclusive=False,
            options=NOISE,
            cost=_noise_cost,
            models=GRADIENT_MODELS,
            why=": the gradient noise of one loss",
            entry="bsdemo.engine.noise:noise_measure",
            ended="Measurement",
            command="noise",
        ),
        Kind(
            "sharpness",
            exclusive=False,
            options=SHARPNESS,
            relate=relate_plain_sgd,
            cost=_sharpness_cost,
            models=PLAIN_MODELS,
            why=": the study's Hessian is of plain gradient steps on a classifier",
            entry="bsdemo.engine.sharpness:sharpness_study",
            ended="Study",
            command="sharpness",
            points=lambda options: 2 + len(options.get("remedies", [])),
        ),
        Kind(
            "critical",
            exclusive=False,
            options=CRITICAL,
            relate=relate_plain_sgd,
            cost=_critical_cost,
            models=PLAIN_MODELS,
            why=": the study trains a classifier",
            entry="bsdemo.engine.critical:critical_batch",
            ended="Study",
            command="critical-batch",
        ),
        # a measurement of speed as well as memory: alone on the device
        Kind(
            "fit_batch",
            exclusive=True,
            options=FIT_BATCH,
            relate=relate_fit,
            cost=_fit_cost,
            models=("mlp", "cnn", "transformer"),
            why=": models cut into blocks to checkpoint",
            entry="bsdemo.engine.fitbatch:fit_batch",
            ended="Measurement",
            label="fit-a-bigger-batch measurement",
            command="fit-batch",
            unbounded_steps=True,
            points=lambda options: len(options.get("techniques") or FIT_TECHNIQUES),
        ),
        # its own process group (bsdemo.engine.group): all the cores, so alone on the machine
        Kind(
            "ddp",
            exclusive=True,
            options=DDP,
            relate=relate_ddp,
            cost=_ddp_cost,
            models=PLAIN_MODELS,
            why=": the check trains a classifier",
            entry="bsdemo.engine.ddp:ddp_records",
            ended="Check",
            label="data-parallel check",
            command="ddp-check",
        ),
        Kind(
            "pipeline",
            exclusive=True,
            options=PIPELINE,
            relate=relate_pipeline,
            cost=_pipeline_cost,
            models=("mlp",),
            why=": the pipeline cuts the MLP's layers",
            entry="bsdemo.engine.pipeline:pipeline_records",
            ended="Check",
            label="pipeline check",
            command="pipeline-check",
        ),
        # speed is one of its three measurements: alone on the device. Each architecture brings its
        # own preset; the page's workload gives only the seed and the device. A run per batch,
        # then each architecture's summary.
        Kind(
            "architectures",
            exclusive=True,
            options=ARCHITECTURE_STUDY,
            cost=_architectures_cost,
            entry="bsdemo.engine.architectures:architecture_sweep",
            ended="Study",
            label="architecture study",
            command="architectures",
            unbounded_steps=True,
            points=lambda options: (
                len(options.get("architectures", [])) * (len(options.get("batch_sizes", [])) + 1)
            ),
        ),
    )
}


ROOM_KIND = next(k.name for k in KINDS.values() if k.room)  # a class sweep's cells run as it


def planned_points(kind: str, options: Mapping[str, Any]) -> int | None:
    """How many point records (sweep points, grid cells, runs) a job of `kind` will send, where
    known in advance."""
    return KINDS[kind].points(options)


USER_CODE_OPTIONS = frozenset({"model_file", "workload", "model_factory"})  # never a job's


def assess(
    kind: str, cfg: CheckedRunConfig, options: Mapping[str, Any] | None, limits: Limits, wall_s: float
) -> tuple[dict[str, Any], Cost]:
    """(checked options, cost bound) of one job of `kind` on a checked cfg; raises ConfigError
    for an unknown kind, an unknown or invalid option, or a cost over the limits."""
    spec = KINDS.get(kind)
    if spec is None:
        raise ConfigError("kind", kind, "one of " + ", ".join(KINDS))
    options = dict(options or {})
    code = sorted(USER_CODE_OPTIONS & options.keys())
    if code:
        raise ConfigError(
            code[0],
            options[code[0]],
            "nothing here: a shared lab server never "
            "loads user code. Measure your own model in a terminal of your own "
            "(bsdemo sweep --model-file FILE.py:FACTORY) or with bsdemo.api",
        )
    unknown = sorted(set(options) - set(spec.option_names))
    if unknown:
        raise ConfigError(
            unknown[0],
            options[unknown[0]],
            f"the options of a {kind} job: " + (", ".join(spec.option_names) or "none"),
        )
    check_model(kind, cfg)
    checked = spec.relate(cfg, check_options(spec.options, options), limits)
    cost = spec.cost(cfg, checked, wall_s)
    limits.check(cost)
    return checked, cost
