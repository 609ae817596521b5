"""Each job kind's option checks: every option read, bounded and defaulted here, so a bad one
is a ConfigError naming the option, the value and what is allowed. Pure Python."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bsdemo.architectures import (
    ARCHITECTURES,
    DEFAULT_BATCHES,
    DEFAULT_SECONDS,
    MAX_SECONDS,
)
from bsdemo.config import (
    MAX_ACCUMULATION_STEPS,
    NORMS,
    CheckedRunConfig,
    ConfigError,
)
from bsdemo.jobkinds.kind import (
    FIT_TECHNIQUES,
    LR_RULES,
    SHARPNESS_REMEDIES,
    accumulation_config,
    check_global_batch,
    check_pipeline,
)
from bsdemo.limits import Limits
from bsdemo.tunables import (
    DDP_MAX_PROCESSES,
    DDP_MAX_STEPS,
    MAX_LESSON_BATCHES,
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
from bsdemo.units import real_number, whole_number


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


def _flag(options: Mapping, name: str, default: bool = False) -> bool:
    value = options.get(name, default)
    if not isinstance(value, bool):
        raise ConfigError(name, value, "true or false")
    return value


def _names(options: Mapping, name: str, allowed: Any, default: Any, empty: bool = False,
           optional: bool = False) -> list[str] | None:
    """An option's list of different names from `allowed` (its default when absent; None, when
    `optional`, stays None); anything else — a string, nested lists, numbers, repeats — a
    ConfigError."""
    names = options.get(name, default)
    if names is None and optional:
        return None
    if (not isinstance(names, list | tuple) or (not names and not empty)
            or any(not isinstance(n, str) or n not in allowed for n in names)
            or len(set(names)) != len(names)):
        raise ConfigError(name, names, "different names from " + ", ".join(allowed))
    return list(names)


def _budget(options: Mapping) -> int | None:
    return _whole(options, "memory_budget_bytes", 1, 2**50, optional=True)


def _no_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    return {}


def _sweep_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    sizes = options.get("batch_sizes")
    if (not isinstance(sizes, (list, tuple)) or not 1 <= len(sizes) <= MAX_SWEEP_POINTS
            or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in sizes)
            or len(set(sizes)) != len(sizes)):  # any order: the memory page's demo goes down
        raise ConfigError("batch_sizes", sizes, f"a list of 1 to {MAX_SWEEP_POINTS} different "
                                                "whole numbers of at least 1")
    return {"batch_sizes": list(sizes),
            "warmup_steps": _whole(options, "warmup_steps", 0, 100, default=SWEEP_WARMUP_STEPS),
            "timed_steps": _whole(options, "timed_steps", 1, MAX_TIMED_STEPS, default=SWEEP_TIMED_STEPS),
            "min_timed_s": _real(options, "min_timed_s", 0.0, 60.0, default=SWEEP_MIN_TIMED_S),
            "rounds": _whole(options, "rounds", 1, MAX_SWEEP_ROUNDS, default=SWEEP_ROUNDS),
            "memory_budget_bytes": _budget(options),
            "continue_after_oom": _flag(options, "continue_after_oom")}


def _profile_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    sizes = options.get("batch_sizes")
    if (not isinstance(sizes, (list, tuple)) or not 2 <= len(sizes) <= MAX_PROFILE_SIZES
            or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in sizes)
            or list(sizes) != sorted(set(sizes))):
        raise ConfigError("batch_sizes", sizes, f"2 to {MAX_PROFILE_SIZES} increasing whole "
                                                "numbers of at least 1")
    return {"batch_sizes": list(sizes),
            "steps": _whole(options, "steps", 2, MAX_PROFILE_STEPS, default=PROFILE_STEPS),
            "cut": _flag(options, "cut", default=True)}


def _find_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
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


def _accum_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
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


def _norms_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    sizes = _increasing_batches(options, [2, 4, 8, 32, 128], 1, 2, " (BatchNorm needs two)")
    norms = _names(options, "norms", NORMS, list(NORMS))
    if cfg.epochs is None:
        raise ConfigError("epochs", None, "an epoch budget: every cell trains the same epochs")
    return {"batch_sizes": sizes, "norms": norms}


def _noise_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    return {"batch_sizes": _increasing_batches(options, [1, 4, 16, 64, 256], 2, 1),
            "draws": _whole(options, "draws", 2, MAX_NOISE_DRAWS, default=32),
            "after_steps": _whole(options, "after_steps", 0, 100_000, default=0)}


def _sharpness_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    sizes = _increasing_batches(options, [16, 4096], 2, 1)
    if len(sizes) != 2:
        raise ConfigError("batch_sizes", sizes, "two increasing batch sizes: a small and a large")
    remedies = _names(options, "remedies", SHARPNESS_REMEDIES, [], empty=True)
    if cfg.optimizer != "sgd":
        raise ConfigError("optimizer", cfg.optimizer, "sgd: the study's 2/lr and its Hessian are "
                                                      "those of plain gradient steps")
    if cfg.accumulation_steps != 1:
        raise ConfigError("accumulation_steps", cfg.accumulation_steps,
                          "1: the study's batches are whole batches")
    return {"batch_sizes": sizes,
            "target_loss": _real(options, "target_loss", 1e-4, 2.0, default=0.01),
            "max_steps": _whole(options, "max_steps", 10, 20_000, default=SHARPNESS_MAX_STEPS),
            "remedies": remedies}


def _critical_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    rule = options.get("rule", "sqrt")
    if not isinstance(rule, str) or rule not in LR_RULES:
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


def _fit_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    budget = _budget(options)
    if budget is None:
        raise ConfigError("memory_budget_bytes", None, "a memory budget in bytes")
    names = _names(options, "techniques", FIT_TECHNIQUES, None, optional=True)
    return {"memory_budget_bytes": budget, "techniques": names,
            "accumulation": _whole(options, "accumulation", 2, 64, default=4),
            "max_batch": limits.max_batch_size}


def _ddp_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    processes = _whole(options, "processes", 1, DDP_MAX_PROCESSES, default=2)
    check_global_batch(cfg, processes)
    return {"processes": processes, "steps": _whole(options, "steps", 1, DDP_MAX_STEPS, default=5)}


def _pipeline_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    micro = _whole(options, "micro_batches", 1, PIPELINE_MAX_MICRO_BATCHES, default=4)
    check_pipeline(cfg, micro)
    return {"micro_batches": micro, "steps": _whole(options, "steps", 1, DDP_MAX_STEPS, default=5)}


def _architectures_options(cfg: CheckedRunConfig, options: dict, limits: Limits) -> dict:
    names = _names(options, "architectures", list(ARCHITECTURES), list(ARCHITECTURES))
    return {"architectures": names,
            "batch_sizes": _increasing_batches(options, list(DEFAULT_BATCHES), 2, 1),
            "seconds": _real(options, "seconds", 0.5, MAX_SECONDS, default=DEFAULT_SECONDS)}
