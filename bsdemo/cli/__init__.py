"""Command-line companion: run one training job in this terminal and watch the device meanwhile.

    python -m bsdemo train --batch-size 256 --lr 0.1 [--json]

Bad flags exit with code 2 and one line (at most ERROR_CHARS) naming the flag, the value (cut
short) and what is allowed, with no traceback: every flag of every command is checked before
torch is imported, so a typo is answered at once even on a loaded machine.
"""

from __future__ import annotations

import sys

from bsdemo.cli import classes, commands, ownmodel
from bsdemo.cli.checks import CHECKS, check_command_config
from bsdemo.cli.parser import FIELD_FLAGS, build_parser, config_from_args
from bsdemo.config import ConfigError, clip
from bsdemo.errors import one_line
from bsdemo.limits import default_threads

__all__ = ["build_parser", "main"]


INTERRUPTED = 130  # the shell's code for a command ended by Ctrl-C (128 + SIGINT)


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. Ctrl-C ends it with one line and code 130, whatever it
    was doing (the user's own model's step included), never a traceback."""
    command = "bsdemo"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        command = f"bsdemo {args.command}" if args.command else command
        return _main(parser, args)
    except KeyboardInterrupt:
        print(f"{command}: stopped (Ctrl-C); nothing more was measured", file=sys.stderr)
        return INTERRUPTED


def _main(parser, args) -> int:
    if args.command is None:
        parser.print_usage(sys.stderr)
        return 2
    if args.command == "class":  # no run, no torch: a class in the lab's store
        return classes.run(args)
    try:  # every flag, and the thread setting, before torch is imported
        cfg, notices = config_from_args(args)
        checked = CHECKS[args.command](args)
        check_command_config(args.command, cfg, checked)
        threads = default_threads(1) if args.command != "datasets" else None
        model_file = ownmodel.check_flag(args)
    except ConfigError as exc:
        return _fail(args.command, exc)
    try:
        if threads is not None:
            from bsdemo.engine.measure import set_threads  # imports torch

            set_threads(threads)
        if model_file is not None:
            return _own_model(args, cfg, checked, model_file)
        if args.command in commands.MEASURING:
            return commands.MEASURING[args.command](cfg, args, **checked)
        if args.command == "warm":
            return commands.warm(**checked)
        if args.command == "datasets":
            return commands.datasets(args, **checked)
        return commands.train(cfg, notices, args.json)
    except ConfigError as exc:  # e.g. --device cuda on a machine without one
        return _fail(args.command, exc)


def _own_model(args, cfg, checked: dict, model_file) -> int:
    """A measuring command on the model of --model-file (checked before any long work)."""
    from bsdemo.engine.own import ProbeTimeout, using

    own = ownmodel.load(*model_file, cfg.device)
    if args.probe_timeout is not None:  # the flag over the file's own Workload setting
        own.timeout = args.probe_timeout
    cfg = ownmodel.config(own, args.command, cfg.seed, cfg.device, checked)
    if (
        args.command == "find"
        and own.device.type == "cpu"
        and checked["memory_budget_bytes"] in (None, "device")
    ):
        raise ConfigError(
            "memory_budget",
            checked["memory_budget_bytes"],
            "a size such as 2GiB with --model-file on a CPU: it has no memory limit of its own to find",
        )
    run = commands.MEASURING[args.command]  # sweep, find, noise or fit-batch: checked by ownmodel
    try:
        with using(own):
            return run(cfg, args, **checked)
    except ProbeTimeout as exc:
        print(one_line(f"bsdemo {args.command}: {exc}"), file=sys.stderr)
        return 1


def _fail(command: str, exc: ConfigError) -> int:
    flag = FIELD_FLAGS.get(exc.field, exc.field)
    print(
        one_line(f"bsdemo {command}: error: {flag}: got {clip(repr(exc.value))}; allowed: {exc.allowed}"),
        file=sys.stderr,
    )
    return 2
