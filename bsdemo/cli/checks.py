"""Each command's own flags, checked before torch is imported, each error naming the flag: a
measuring command's by its job kind's declared options (bsdemo.jobkinds.options, the rules the
server checks a job by), the others' (regimes, warm, datasets) here."""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path

from bsdemo.cli.parser import given
from bsdemo.config import MAX_BATCH_SIZE, ConfigError, RunConfig
from bsdemo.devices import check_device
from bsdemo.jobkinds import KINDS, check_model
from bsdemo.jobkinds.schema import flag_options
from bsdemo.lecture import lesson_plan, load_plan
from bsdemo.presets import PRESETS
from bsdemo.store import DATABASE_URL_ENV, database_url
from bsdemo.units import parse_batch_sizes, real_number, whole_number

_count = functools.partial(whole_number, exact=False)  # (flag, its text, low, high)
_real = functools.partial(real_number, exact=False)


def _check_trace_dir(args: argparse.Namespace) -> dict:
    folder = given(args.trace_dir, "--trace-dir")
    return {"trace_dir": str(_writable_folder(folder, "--trace-dir")) if folder else None}


def _check_regimes(args: argparse.Namespace) -> dict:
    limit = given(args.time_limit, "--time-limit")
    return {
        "epochs": _count("--epochs", args.epochs, 1, 1000),
        "mini": _count("--mini-batch", args.mini_batch, 1, MAX_BATCH_SIZE),
        "limit": None if limit is None else _real("--time-limit", limit, 0.0, 86_400, low_open=True),
    }


def _check_warm(args: argparse.Namespace) -> dict:
    if args.plan is not None:
        runs = load_plan(Path(given(args.plan, "--plan")))
    elif args.lesson is not None:
        runs = lesson_plan(args.lesson)
    else:
        if args.preset not in PRESETS:
            raise ConfigError("--preset", args.preset, "one of " + ", ".join(PRESETS))
        sizes = parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE)
        runs = [
            (
                f"{args.preset} batch {b}",
                RunConfig(**(PRESETS[args.preset].settings | {"batch_size": b})).validated()[0],
            )
            for b in sizes
        ]
    folder = given(args.data_dir, "--data-dir")
    url = None if folder else database_url(os.environ.get(DATABASE_URL_ENV))
    folder = folder or (None if url else os.environ.get("BSDEMO_DATA_DIR"))
    if not folder and not url:
        raise ConfigError("--data-dir", None, f"a folder (or set BSDEMO_DATA_DIR, or {DATABASE_URL_ENV})")
    return {"runs": runs, "folder": _writable_folder(folder, "--data-dir") if folder else None, "url": url}


def _check_datasets(args: argparse.Namespace) -> dict:
    from bsdemo import datasets

    for name in args.names:
        if name not in datasets.SOURCES:
            raise ConfigError("names", name, "one of " + ", ".join(datasets.SOURCES))
    cache = given(args.cache, "--cache")
    return {"cache": _writable_folder(cache, "--cache") / "datasets" if cache is not None else None}


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


def check_command_config(command: str, cfg: RunConfig, checked: dict) -> None:
    """The checks that need the config beside the flags, as the server makes them (a
    ConfigError names the field or the option; the CLI prints its flag): the job kind's
    models, and what relates its options to the workload."""
    check_device(cfg.device)
    if command in COMMAND_KINDS:
        kind = KINDS[COMMAND_KINDS[command]]
        check_model(kind.name, cfg)
        try:
            kind.relate(cfg, checked, None)
        except ConfigError as exc:
            flags = {o.name: o.cli for o in kind.options}
            raise ConfigError(flags.get(exc.field) or exc.field, exc.value, exc.allowed) from None


def _kind_check(command: str, extra=None):
    """A measuring command's check: its kind's options from their flags (and its own extra)."""
    kind = KINDS[COMMAND_KINDS[command]]
    return lambda args: flag_options(kind.options, args) | (extra(args) if extra else {})


CHECKS = {
    "train": lambda args: {},
    "regimes": _check_regimes,
    "warm": _check_warm,
    "datasets": _check_datasets,
    **{
        command: _kind_check(command, _check_trace_dir if command == "profile" else None)
        for command in COMMAND_KINDS
    },
}
