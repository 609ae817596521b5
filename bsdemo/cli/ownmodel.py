"""`--model-file PATH.py:FACTORY`: the lab's measurements on the user's own model, in a terminal.

The protocol: FACTORY is a function with no arguments in the Python file PATH.py; it returns a
`bsdemo.api.Workload`, or a dict with the same keys (model, batch or data, loss, optimizer,
name), or a tuple (model, batch, loss, optimizer). `check_flag` reads the flag before torch is
imported (the file's place and the factory's name); `load` runs the file, calls the factory and
tries each piece on a small batch, so a broken piece is named in one line before any long work.
The file is the user's own code, run in their own terminal: a lab server never loads one
(bsdemo.jobkinds.USER_CODE_OPTIONS).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from bsdemo.config import ConfigError
from bsdemo.units import real_number

FIELD = "model_file"
_SPEC = re.compile(r"^(?P<path>.+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)$")
ALLOWED = "PATH.py:FACTORY, a Python file and a function in it that returns a bsdemo.api.Workload"
# the lab's own workload flags mean nothing beside a model file (it brings its own)
LAB_FLAGS = ("dataset", "model", "norm", "width", "depth", "optimizer", "lr", "samples", "size")


def check_flag(args: argparse.Namespace) -> tuple[Path, str] | None:
    """(the file, the factory's name) of --model-file, checked without running anything; None
    when it is not given."""
    text = getattr(args, FIELD, None)
    timeout = getattr(args, "probe_timeout", None)
    if text is None:
        if timeout is not None:
            raise ConfigError(
                "probe_timeout", timeout, "nothing without --model-file: it watches your own model's steps"
            )
        return None
    if timeout is not None:  # read here, before torch: a bad one exits at once
        args.probe_timeout = real_number(
            "probe_timeout", timeout, 0.0, 7 * 86400.0, low_open=True, exact=False
        )
    match = _SPEC.match(text)
    if match is None:
        raise ConfigError(FIELD, text, ALLOWED)
    path = Path(match["path"]).expanduser()
    try:
        found = path.is_file()
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte
        raise ConfigError(
            FIELD, text, f"{ALLOWED}; the file name cannot be used here ({type(exc).__name__})"
        ) from None
    if not found:
        raise ConfigError(FIELD, text, f"{ALLOWED}; there is no file {match['path'][:80]}")
    for flag in LAB_FLAGS:
        if getattr(args, flag, None) is not None:
            raise ConfigError(
                flag,
                getattr(args, flag),
                "nothing with --model-file: the file "
                "brings its model, data and optimizer (only --device and --seed "
                "apply)",
            )
    return path, match["name"]


def load(path: Path, name: str, device: str):
    """The checked workload of the file's factory (imports torch and runs the user's code)."""
    from bsdemo.api import Workload
    from bsdemo.engine.own import OwnWorkload, raised

    shown = f"{path.name}:{name}"
    spec = importlib.util.spec_from_file_location(f"bsdemo_user_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would: dataclasses and pickling look it up
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # the file may import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's code: one line, not a traceback
        raise ConfigError(FIELD, shown, f"a Python file that runs; {raised(exc, 160)}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ConfigError(FIELD, shown, f"{ALLOWED}; the file has no function {name}")
    try:
        made = factory()
    except Exception as exc:  # noqa: BLE001
        raise ConfigError(FIELD, shown, f"a factory that returns a Workload; {raised(exc, 160)}") from None
    workload = _workload(made, shown, Workload)
    try:
        return OwnWorkload.checked(workload, device)
    except ConfigError as exc:  # named as the file's piece, under the flag
        raise ConfigError(FIELD, exc.value, f"{exc.field}: {exc.allowed}") from None


def _workload(made: Any, shown: str, workload_type: type):
    if isinstance(made, workload_type):
        return made
    if isinstance(made, dict):
        unknown = sorted(set(made) - {"model", "batch", "data", "loss", "optimizer", "name"})
        if unknown or "model" not in made:
            raise ConfigError(
                FIELD,
                f"{shown} -> dict with {', '.join(map(str, made))}",
                "a dict with model, batch or data, loss, optimizer (and name)",
            )
        return workload_type(**made)
    if isinstance(made, tuple) and len(made) == 4:
        return workload_type(*made[:2], loss=made[2], optimizer=made[3])
    raise ConfigError(
        FIELD,
        f"{shown} -> {type(made).__name__}",
        "a bsdemo.api.Workload, a dict of its fields, or a tuple (model, batch, loss, optimizer)",
    )


def config(own, command: str, seed: int, device: str, checked: dict[str, Any]):
    """The settings each command's engine runs the user's model with (its data pool's size:
    bsdemo.api's defaults)."""
    from bsdemo.api import DEFAULT_MAX_BATCH, POOL

    if command == "find":
        checked["max_batch"] = checked.get("max_batch") or DEFAULT_MAX_BATCH
        return own.config(checked["max_batch"], seed, device)
    return own.config(1 if command == "sweep" else POOL, seed, device)  # a sweep grows its own
