"""The CLI's flags: a parser per command, their help, and the workload flags -> RunConfig.

Every flag is text until it is checked (bsdemo.cli.checks, config_from_args), so a bad value is
answered in our words, one line, before torch is imported.
"""

from __future__ import annotations

import argparse
import re
from typing import NoReturn

from bsdemo.cli import classes, command_flags
from bsdemo.config import (
    DATASETS,
    DEVICES,
    MODELS,
    NORMS,
    OPTIMIZERS,
    ConfigError,
    RunConfig,
    sized,
)
from bsdemo.errors import one_line

FLAGS = {  # CLI flag -> RunConfig field; the flag names are the ones a student types
    "dataset": "dataset",
    "model": "model",
    "norm": "norm",
    "width": "width",
    "depth": "depth",
    "batch_size": "batch_size",
    "lr": "lr",
    "accum": "accumulation_steps",
    "optimizer": "optimizer",
    "warmup": "warmup_steps",
    "epochs": "epochs",
    "steps": "max_steps",
    "seed": "seed",
    "device": "device",
    "eval_interval": "eval_interval",
    "samples": "samples",
    "noise": "noise",
}
FIELD_FLAGS = {v: "--" + k.replace("_", "-") for k, v in FLAGS.items()} | {
    "memory_budget": "--memory-budget",
    "size": "--size",
    "micro_batch": "--micro-batch",
    "memory_budget_bytes": "--memory-budget",
    "techniques": "--techniques",
    "model_file": "--model-file",
    "micro_batches": "--micro-batches",
    "probe_timeout_s": "--probe-timeout",
    "probe_timeout": "--probe-timeout",
}


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # "--lr -inf" is a (bad) value, not an unknown flag: none of our flags starts with a
        # digit, '.', 'inf' or 'nan', so such a word after a flag is always its value
        self._negative_number_matcher = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)

    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        self.exit(2, one_line(f"{self.prog}: error: {message}") + "\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bsdemo", description="Batch Size Lab on the command line.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    train = _add_train(sub)
    for add in command_flags.ADDERS:
        add(sub, train)
    classes.add_parser(sub)
    return parser


def _train_flags(d: RunConfig) -> dict[str, str]:
    """`bsdemo train`'s workload flags -> their help (a measuring command takes them too)."""
    return {
        "--dataset": f"one of {', '.join(DATASETS)} (default {d.dataset})",
        "--model": f"one of {', '.join(MODELS)} (default {d.model})",
        "--norm": f"one of {', '.join(NORMS)} (default {d.norm})",
        "--width": f"MLP units / CNN channels (default {d.width})",
        "--depth": f"hidden layers / conv blocks (default {d.depth})",
        "--batch-size": f"micro-batch size (default {d.batch_size})",
        "--lr": f"learning rate (default {d.lr})",
        "--accum": "gradient-accumulation steps per optimizer step (default 1)",
        "--optimizer": f"one of {', '.join(OPTIMIZERS)} (default {d.optimizer})",
        "--warmup": "linear lr warm-up, in optimizer steps (default 0)",
    }


def _run_flags(d: RunConfig) -> dict[str, str]:
    """The rest of `bsdemo train`'s flags (after its epoch or step budget) -> their help."""
    return {
        "--seed": "model init and shuffling seed (default 0)",
        "--device": f"one of {', '.join(DEVICES)} (default auto)",
        "--eval-interval": "optimizer steps between evaluations (0 = per epoch)",
        "--samples": f"size of generated datasets (default {d.samples})",
        "--noise": f"input noise of the 2-D sets (default {d.noise})",
        "--size": "workload size preset S, M, L or XL (sets width and depth)",
    }


def _add_train(sub) -> argparse.ArgumentParser:
    train = sub.add_parser(
        "train",
        help="train one run and print its progress and summary",
        description="Train one run; --json prints one JSON event per line.",
    )
    d = RunConfig()
    for flag, text in _train_flags(d).items():
        train.add_argument(flag, help=text)
    budget = train.add_mutually_exclusive_group()
    budget.add_argument("--epochs", help=f"epoch budget (default {d.epochs})")
    budget.add_argument("--steps", help="optimizer-step budget instead of epochs")
    for flag, text in _run_flags(d).items():
        train.add_argument(flag, help=text)
    train.add_argument("--json", action="store_true", help="one JSON object per event per line")
    return train


def given(raw: str | None, flag: str) -> str | None:
    """An optional flag's text: None when absent; an empty value is an error, not 'absent'."""
    if raw is not None and not raw.strip():
        raise ConfigError(flag, raw, "a value (the flag was given empty)")
    return raw


def config_from_args(args: argparse.Namespace) -> tuple[RunConfig, list[str]]:
    """Flags -> validated RunConfig; a ConfigError names the *flag*, not the field."""
    fields = {FLAGS[k]: v for k, v in vars(args).items() if k in FLAGS and v is not None}
    try:
        for name, value in fields.items():
            given(value, name)  # "--steps=" is a mistake, not "no step budget"
        if getattr(args, "size", None) is not None and (fields.keys() & {"width", "depth"}):
            raise ConfigError("size", args.size, "either --size or --width/--depth, not both")
        cfg = RunConfig.from_params(fields)
        if getattr(args, "size", None) is not None:
            cfg = sized(cfg, args.size)
        return cfg.validated()
    except ConfigError as exc:
        raise ConfigError(FIELD_FLAGS.get(exc.field, exc.field), exc.value, exc.allowed) from None
