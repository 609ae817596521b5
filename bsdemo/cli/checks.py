"""Each command's own flags, checked before torch is imported: bounded numbers, sizes,
batch lists and folders, each error naming the flag."""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path

from bsdemo.architectures import ARCHITECTURES, MAX_SECONDS
from bsdemo.cli.parser import given
from bsdemo.config import MAX_BATCH_SIZE, NORMS, ConfigError, RunConfig
from bsdemo.devices import check_device
from bsdemo.jobkinds import (
    FIT_TECHNIQUES,
    KINDS,
    LR_RULES,
    MAX_NOISE_DRAWS,
    MAX_PROFILE_SIZES,
    MAX_PROFILE_STEPS,
    MAX_SWEEP_ROUNDS,
    MAX_TIMED_STEPS,
    PIPELINE_MAX_MICRO_BATCHES,
    SHARPNESS_REMEDIES,
    accumulation_config,
    check_global_batch,
    check_model,
    check_pipeline,
)
from bsdemo.lecture import lesson_plan, load_plan
from bsdemo.presets import PRESETS
from bsdemo.store import DATABASE_URL_ENV, database_url
from bsdemo.units import parse_batch_sizes, parse_bytes, real_number, whole_number

_count = functools.partial(whole_number, exact=False)  # (flag, its text, low, high)
_real = functools.partial(real_number, exact=False)


def _check_sweep(args: argparse.Namespace) -> dict:
    budget = given(args.memory_budget, "--memory-budget")
    return {"sizes": parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE),
            "budget": parse_bytes(budget, "--memory-budget") if budget is not None else None,
            "warmup": _count("--warmup-steps", args.warmup_steps, 0, 100),
            "timed": _count("--timed-steps", args.timed_steps, 1, MAX_TIMED_STEPS),
            "min_time": _real("--min-time", args.min_time, 0.0, 60.0),
            "rounds": _count("--rounds", args.rounds, 1, MAX_SWEEP_ROUNDS)}


def _check_profile(args: argparse.Namespace) -> dict:
    sizes = parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE)
    if not 2 <= len(sizes) <= MAX_PROFILE_SIZES or sizes != sorted(set(sizes)):
        raise ConfigError("--batch-sizes", args.batch_sizes,
                          f"2 to {MAX_PROFILE_SIZES} increasing batch sizes, e.g. 8,512")
    folder = given(args.trace_dir, "--trace-dir")
    return {"batch_sizes": sizes,
            "steps": _count("--steps", args.steps, 2, MAX_PROFILE_STEPS),
            "cut": not args.no_cut,
            "trace_dir": str(_writable_folder(folder, "--trace-dir")) if folder else None}


def _check_find(args: argparse.Namespace) -> dict:
    budget = given(args.memory_budget, "--memory-budget")
    target = given(args.target_effective_batch, "--target-effective-batch")
    largest = given(args.max_batch, "--max-batch")
    own = budget is not None and budget.strip().lower() == "device"  # the device's own memory
    return {"budget": "device" if own else parse_bytes(budget, "--memory-budget")
            if budget is not None else None,
            "margin": _real("--margin", args.margin, 0.0, 0.9),
            "target": _count("--target-effective-batch", target, 1, 10**6)
            if target is not None else None,
            "reference": _count("--reference-batch", args.reference_batch, 1, 10**6),
            "max_batch": _count("--max-batch", largest, 1, MAX_BATCH_SIZE)
            if largest is not None else None}


def _check_accum(args: argparse.Namespace) -> dict:
    return {"micro": _count("--micro-batch", args.micro_batch, 1, MAX_BATCH_SIZE),
            "k": _count("--accum", args.accum, 1, 1024),
            "steps": _count("--steps", args.steps, 1, 1000)}


def _check_regimes(args: argparse.Namespace) -> dict:
    limit = given(args.time_limit, "--time-limit")
    return {"epochs": _count("--epochs", args.epochs, 1, 1000),
            "mini": _count("--mini-batch", args.mini_batch, 1, MAX_BATCH_SIZE),
            "limit": None if limit is None else _real("--time-limit", limit, 0.0, 86_400,
                                              low_open=True)}


def _check_norms(args: argparse.Namespace) -> dict:
    sizes = parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE)
    if sizes[0] < 2:
        raise ConfigError("--batch-sizes", args.batch_sizes, "batch sizes of at least 2 "
                          "(BatchNorm needs two samples)")
    names = [n.strip() for n in str(args.norms).split(",") if n.strip()]
    if not names or len(set(names)) != len(names) or any(n not in NORMS for n in names):
        raise ConfigError("--norms", args.norms, "different names from " + ", ".join(NORMS))
    _count("--epochs", args.epochs, 1, 100)
    return {"batch_sizes": sizes, "norms": names}


def _check_noise(args: argparse.Namespace) -> dict:
    sizes = parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE)
    if len(sizes) < 2:
        raise ConfigError("--batch-sizes", args.batch_sizes, "at least two batch sizes (a slope "
                          "needs two points)")
    return {"batch_sizes": sizes, "draws": _count("--draws", args.draws, 2, MAX_NOISE_DRAWS),
            "after_steps": _count("--after-steps", args.after_steps, 0, 100_000)}


def _check_critical(args: argparse.Namespace) -> dict:
    sizes = parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE)
    if len(sizes) < 2:
        raise ConfigError("--batch-sizes", args.batch_sizes, "at least two batch sizes")
    if args.rule not in LR_RULES:
        raise ConfigError("--rule", args.rule, "one of " + ", ".join(LR_RULES))
    cap = given(args.lr_cap, "--lr-cap")
    return {"batch_sizes": sizes,
            "target_loss": _real("--target-loss", args.target_loss, 1e-4, 5.0),
            "rule": args.rule,
            "reference_batch": _count("--reference-batch", args.reference_batch, 1, 2**16),
            "max_steps": _count("--max-steps", args.max_steps, 10, 100_000),
            "lr_cap": None if cap.strip().lower() == "none"
            else _real("--lr-cap", cap, 1e-6, 100.0)}


def _check_fit_batch(args: argparse.Namespace) -> dict:
    budget = given(args.memory_budget, "--memory-budget")
    raw = given(args.techniques, "--techniques")
    names = None if raw is None else [t.strip() for t in raw.split(",")]
    if names is not None and (len(set(names)) != len(names)
                              or any(t not in FIT_TECHNIQUES for t in names)):
        raise ConfigError("--techniques", raw, "different names from "
                          + ", ".join(FIT_TECHNIQUES))
    return {"memory_budget_bytes": parse_bytes(budget, "--memory-budget"),
            "techniques": names,
            "accumulation": _count("--accum", args.accum, 2, 64)}


def _check_ddp(args: argparse.Namespace) -> dict:
    return {"processes": _count("--processes", args.processes, 1, 8),
            "steps": _count("--steps", args.steps, 1, 1000)}


def _check_pipeline(args: argparse.Namespace) -> dict:
    return {"micro_batches": _count("--micro-batches", args.micro_batches, 1,
                                    PIPELINE_MAX_MICRO_BATCHES),
            "steps": _count("--steps", args.steps, 1, 1000)}


def _check_architectures(args: argparse.Namespace) -> dict:
    names = [n.strip() for n in given(args.architectures, "--architectures").split(",")]
    if len(set(names)) != len(names) or any(n not in ARCHITECTURES for n in names):
        raise ConfigError("--architectures", args.architectures,
                          "different names from " + ", ".join(ARCHITECTURES))
    sizes = parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE)
    if len(sizes) < 2 or sizes != sorted(set(sizes)):
        raise ConfigError("--batch-sizes", args.batch_sizes, "at least two increasing batch sizes")
    return {"architectures": names, "batch_sizes": sizes,
            "seconds": _real("--seconds", args.seconds, 0.5, MAX_SECONDS)}


def _check_sharpness(args: argparse.Namespace) -> dict:
    sizes = parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE)
    if len(sizes) != 2:
        raise ConfigError("--batch-sizes", args.batch_sizes, "two increasing batch sizes: a "
                          "small and a large")
    raw = given(args.remedies, "--remedies")
    remedies = [] if raw is None else [r.strip() for r in raw.split(",")]
    if len(set(remedies)) != len(remedies) or any(r not in SHARPNESS_REMEDIES for r in remedies):
        raise ConfigError("--remedies", args.remedies, "different names from "
                          + ", ".join(SHARPNESS_REMEDIES))
    return {"batch_sizes": sizes,
            "target_loss": _real("--target-loss", args.target_loss, 1e-4, 2.0),
            "max_steps": _count("--max-steps", args.max_steps, 10, 20_000),
            "remedies": remedies}


def _check_warm(args: argparse.Namespace) -> dict:
    if args.plan is not None:
        runs = load_plan(Path(given(args.plan, "--plan")))
    elif args.lesson is not None:
        runs = lesson_plan(args.lesson)
    else:
        if args.preset not in PRESETS:
            raise ConfigError("--preset", args.preset, "one of " + ", ".join(PRESETS))
        sizes = parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE)
        runs = [(f"{args.preset} batch {b}", RunConfig(
            **(PRESETS[args.preset].settings | {"batch_size": b})).validated()[0])
            for b in sizes]
    folder = given(args.data_dir, "--data-dir")
    url = None if folder else database_url(os.environ.get(DATABASE_URL_ENV))
    folder = folder or (None if url else os.environ.get("BSDEMO_DATA_DIR"))
    if not folder and not url:
        raise ConfigError("--data-dir", None,
                          f"a folder (or set BSDEMO_DATA_DIR, or {DATABASE_URL_ENV})")
    return {"runs": runs, "folder": _writable_folder(folder, "--data-dir") if folder else None,
            "url": url}


def _check_datasets(args: argparse.Namespace) -> dict:
    from bsdemo import datasets

    for name in args.names:
        if name not in datasets.SOURCES:
            raise ConfigError("names", name, "one of " + ", ".join(datasets.SOURCES))
    cache = given(args.cache, "--cache")
    return {"cache": _writable_folder(cache, "--cache") / "datasets" if cache is not None
            else None}


def _writable_folder(raw: str, flag: str) -> Path:
    """raw as a folder this user can create and write in, or ConfigError."""
    folder = Path(raw)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        ok = os.access(folder, os.W_OK | os.X_OK)
    except (OSError, ValueError):  # ValueError: an embedded NUL byte
        ok = False
    if not ok:
        raise ConfigError(flag, raw, "a folder this user can create and write in")
    return folder


COMMAND_KINDS = {k.command: k.name for k in KINDS.values() if k.command}  # command -> its kind


def check_command_config(command: str, cfg: RunConfig, checked: dict,
                         args: argparse.Namespace | None = None) -> None:
    """The checks that need the config beside the flags (a ConfigError names the field; the
    CLI prints its flag): the job kind's models, and a process group's batch."""
    check_device(cfg.device)
    if command in COMMAND_KINDS:
        check_model(COMMAND_KINDS[command], cfg)
    if command == "accum-check":
        big = accumulation_config(cfg, bool(getattr(args, "variable_length", False)))
        if checked["micro"] * checked["k"] > big.train_samples:
            raise ConfigError("--micro-batch", checked["micro"],
                              f"--micro-batch × --accum at most the {big.train_samples:,} training "
                              f"samples (got {checked['micro']} × {checked['k']})")
        if cfg.batch_norm_1d and checked["micro"] < 2:
            raise ConfigError("--micro-batch", checked["micro"], "at least 2 with --norm batch: "
                              "BatchNorm normalises over the micro-batch")
    if command == "ddp-check":
        check_global_batch(cfg, checked["processes"])
    elif command == "pipeline-check":
        check_pipeline(cfg, checked["micro_batches"])


CHECKS = {"train": lambda args: {}, "sweep": _check_sweep, "profile": _check_profile, "find": _check_find,
          "accum-check": _check_accum, "regimes": _check_regimes, "norms": _check_norms,
          "noise": _check_noise, "sharpness": _check_sharpness,
          "critical-batch": _check_critical, "fit-batch": _check_fit_batch,
          "ddp-check": _check_ddp, "pipeline-check": _check_pipeline,
          "architectures": _check_architectures,
          "warm": _check_warm,
          "datasets": _check_datasets}


