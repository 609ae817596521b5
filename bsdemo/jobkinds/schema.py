"""A job kind's option schema: each option's type, range, default and help, written once.

From one `Option` come the server's check of a job's options (`check_options`, on JSON values),
the CLI's flag (`add_flag`, its help and default) and the CLI's check of that flag's text
(`flag_options`, the same rule on the parsed text), so the three can never disagree; docs/cli.md
is generated from the flags. A rule that relates an option to the workload (a micro-batch that
must fit the training set) is the kind's `relate` (bsdemo.jobkinds.options). Pure Python.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bsdemo.config import MAX_BATCH_SIZE, ConfigError
from bsdemo.tunables import MAX_LESSON_BATCHES
from bsdemo.units import parse_bytes, real_number, setting, whole_number

# an option's type
WHOLE, REAL, SWITCH, CHOICE, NAMES, BATCHES, BYTES = (
    "whole",
    "real",
    "switch",
    "choice",
    "names",
    "batches",
    "bytes",
)
MAX_BYTES = 2**50  # a memory budget's most: 1 PiB


@dataclass(frozen=True)
class Option:
    """One option of a job kind: its name (the engine function's argument), type and rule."""

    name: str
    type: str  # WHOLE, REAL, SWITCH, CHOICE, NAMES, BATCHES or BYTES
    help: str  # what it is, for the CLI's --help and docs/cli.md (the default is added)
    default: Any = None  # the value when it is not given (None: none, unless required)
    low: float = 0  # WHOLE, REAL: the least; BATCHES: the smallest batch
    high: float = 0  # WHOLE, REAL: the most; BATCHES: the largest batch (0: MAX_BATCH_SIZE)
    allowed: tuple[str, ...] = ()  # CHOICE, NAMES: the names it may take
    nullable: bool = False  # None is a value of its own (no cap, no budget)
    required: bool = False  # no default: a job must give it
    fewest: int = 1  # BATCHES, NAMES: how many at least (0: none is fine)
    most: int = MAX_LESSON_BATCHES  # BATCHES: how many at most
    increasing: bool = True  # BATCHES: in increasing order (else any order, no repeats)
    why: str = ""  # said after the rule when a value breaks it
    flag: str | None = ""  # its CLI flag ("": --name with dashes; None: none, server only)
    words: tuple[tuple[str, Any], ...] = ()  # CLI words for a value: (("none", None),)
    negated: bool = False  # SWITCH whose default is on: the flag turns it off (--no-cut)
    said: str = ""  # the default as --help says it, where its value alone would not

    @property
    def cli(self) -> str | None:
        """Its CLI flag, or None for an option only a server job takes."""
        if self.flag is None:
            return None
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        """Its flag's attribute on argparse's namespace."""
        return (self.cli or "").lstrip("-").replace("-", "_")

    def rule(self) -> str:
        """What a value may be, in words (a ConfigError's 'allowed')."""
        if self.type == WHOLE:
            return f"a whole number from {int(self.low):,} to {int(self.high):,}{self.why}"
        if self.type == REAL:
            return f"a finite number from {setting(self.low)} to {setting(self.high)}{self.why}"
        if self.type == SWITCH:
            return "true or false"
        if self.type == CHOICE:
            return "one of " + ", ".join(self.allowed)
        if self.type == BYTES:
            return f"a memory size in bytes from 1 to {MAX_BYTES:,}"
        if self.type == NAMES:
            return "different names from " + ", ".join(self.allowed)
        count = str(self.fewest) if self.fewest == self.most else f"{self.fewest} to {self.most}"
        order = "increasing" if self.increasing else "different"
        return (
            f"{count} {order} whole numbers from {int(self.low)} to "
            f"{int(self.high or MAX_BATCH_SIZE):,}{self.why}"
        )

    def read(self, value: Any) -> Any:
        """value (from JSON: a job's options) checked by the rule; ConfigError naming the
        option otherwise."""
        if value is None and (self.nullable or (self.default is None and not self.required)):
            return None
        if self.type == WHOLE:
            return whole_number(self.name, value, int(self.low), int(self.high), exact=False)
        if self.type == REAL:
            return real_number(self.name, value, self.low, self.high)
        if self.type == BYTES:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(self.name, value, self.rule())
            return whole_number(self.name, value, 1, MAX_BYTES, exact=False)
        if self.type == SWITCH:
            if not isinstance(value, bool):
                raise ConfigError(self.name, value, self.rule())
            return value
        if self.type == CHOICE:
            if not isinstance(value, str) or value not in self.allowed:
                raise ConfigError(self.name, value, self.rule())
            return value
        if (
            not isinstance(value, list | tuple)
            or len(value) < self.fewest
            or len(set(map(repr, value))) != len(value)
        ):
            raise ConfigError(self.name, value, self.rule())
        if self.type == NAMES:
            if any(not isinstance(n, str) or n not in self.allowed for n in value):
                raise ConfigError(self.name, value, self.rule())
            return list(value)
        largest = int(self.high or MAX_BATCH_SIZE)
        if (
            len(value) > self.most
            or any(
                isinstance(b, bool) or not isinstance(b, int) or not self.low <= b <= largest for b in value
            )
            or (self.increasing and list(value) != sorted(value))
        ):
            raise ConfigError(self.name, value, self.rule())
        return list(value)

    def parse(self, text: str) -> Any:
        """The flag's text as the value `read` checks ("8,512" -> [8, 512], "8MiB" -> bytes,
        ...); ConfigError naming the option."""
        if not text.strip():
            raise ConfigError(self.name, text, "a value (the flag was given empty)")
        if self.type == WHOLE:
            return whole_number(self.name, text, int(self.low), int(self.high), exact=False)
        if self.type == REAL:
            return real_number(self.name, text, self.low, self.high, exact=False)
        if self.type == BYTES:
            return parse_bytes(text, self.name)
        if self.type in (NAMES, BATCHES):
            parts = [p.strip() for p in text.split(",")]
            if self.type == NAMES:
                return parts
            if len(parts) > self.most or not all(p.isascii() and p.isdigit() and len(p) <= 12 for p in parts):
                raise ConfigError(self.name, text, "comma-separated: " + self.rule())
            return [int(p) for p in parts]
        return text  # CHOICE

    def text(self, value: Any) -> str:
        """A value as its flag's text (a default shown by --help)."""
        if isinstance(value, list | tuple):
            return ",".join(map(str, value))
        if self.type == BYTES and value % 2**20 == 0:
            return f"{value // 2**20}MiB"
        return setting(value) if isinstance(value, float) else str(value)


def check_options(schema: Sequence[Option], options: Mapping[str, Any]) -> dict[str, Any]:
    """A job's options by the schema: each one given checked, each one absent its default (a
    required one absent is a ConfigError). Unknown names are the caller's to refuse."""
    checked = {}
    for option in schema:
        if option.name in options:
            checked[option.name] = option.read(options[option.name])
        elif option.required:
            raise ConfigError(option.name, None, option.rule())
        else:  # a fresh list of a tuple default: the caller may change it
            default = option.default
            checked[option.name] = list(default) if isinstance(default, tuple) else default
    return checked


def add_flag(parser: argparse.ArgumentParser, option: Option) -> None:
    """The option's CLI flag: its help with its default; every value stays text until
    `flag_options` checks it (before torch is imported)."""
    if option.type == SWITCH:
        parser.add_argument(option.cli, action="store_true", help=option.help)
        return
    shown = option.said or (None if option.default is None else option.text(option.default))
    parser.add_argument(option.cli, help=option.help + (f" (default {shown})" if shown else ""))


def flag_options(schema: Sequence[Option], args: argparse.Namespace) -> dict[str, Any]:
    """The options of a job from its command's flags, checked as a server checks them; a
    ConfigError names the flag."""
    given: dict[str, Any] = {}
    worded: dict[str, Any] = {}  # a word's value is the flag's own ("device"): not checked
    try:
        for option in schema:
            raw = None if option.cli is None else getattr(args, option.dest, None)
            words = dict(option.words)
            if option.type == SWITCH:
                if raw:
                    given[option.name] = not option.default
            elif raw is not None and raw.strip().lower() in words:
                worded[option.name] = words[raw.strip().lower()]
            elif raw is not None:
                given[option.name] = option.parse(raw)
        return check_options(schema, given) | worded
    except ConfigError as exc:
        flags = {o.name: o.cli for o in schema}
        raise ConfigError(flags.get(exc.field) or exc.field, exc.value, exc.allowed) from None
