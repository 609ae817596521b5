"""A lesson page's settings and view in its link: the controls a page links, their URL
parameters read back with the checks and messages of the lab's own link, and the view switches
(`present`, `hide`). Pure Python: bsdemo.ui.links draws, this module decides.

A link reproduces settings and a view, never the control of a run (that stays with the browser
that started it: bsdemo.ui.state).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bsdemo.config import VIEW_PARAMS
from bsdemo.errors import ConfigError, clip
from bsdemo.units import whole_number

MAX_PARAMS = 40  # a page links fewer controls than this; more is not a link of ours


@dataclass(frozen=True)
class Control:
    """One linked control: its URL parameter, the widget's key, its label, and what it takes:
    a whole number from `low` to `high` (kind "int"), one of `options` ("choice") or on/off
    ("bool")."""

    param: str
    key: str
    label: str
    kind: str
    low: int = 0
    high: int = 0
    options: tuple[Any, ...] = ()
    hides: tuple[str, ...] = ()  # more widget keys that hiding this control hides with it
    default: Any = None  # the page's value when neither the link nor the reader set one

    def text(self, value: Any) -> str:
        """value as the link writes it."""
        if self.kind == "bool":
            return "1" if value else "0"
        return option_text(value)

    def parse(self, raw: Any) -> Any:
        """A link's text -> the widget's value; a ConfigError names the parameter, the value
        (quoted short) and what is allowed."""
        if isinstance(raw, (list, tuple)):  # a repeated parameter: the last one wins
            raw = raw[-1] if raw else ""
        text = str(raw).strip()
        if self.kind == "bool":
            if text.lower() in ("1", "true", "on", "yes"):
                return True
            if text.lower() in ("0", "false", "off", "no"):
                return False
            raise ConfigError(self.param, clip(text), "1 or 0")
        if self.kind == "int":
            return whole_number(self.param, clip(text), self.low, self.high, exact=False)
        for option in self.options:
            if option_text(option) == text:
                return option
        raise ConfigError(
            self.param, clip(text), "one of " + clip(", ".join(option_text(o) for o in self.options), 200)
        )


def option_text(value: Any) -> str:
    """An option as a link spells it: none, 0.05, 8388608, adam."""
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"  # machine-read: a link's parameter, not a sentence
    return str(value)


@dataclass(frozen=True)
class View:
    """What a link asks of the page around its settings: presentation mode, and which linked
    controls to hide (by parameter)."""

    present: bool = False
    hidden: tuple[str, ...] = ()


def read(controls: Sequence[Control], params: Mapping[str, Any]) -> tuple[dict[str, Any], View, str | None]:
    """A link's parameters -> (widget key -> value for each control it sets, the view, None),
    or with the message of the first thing it could not use (plain text; the page escapes it).
    A bad link sets nothing: the page shows its defaults and says why."""
    by_param = {c.param: c for c in controls}
    if len(params) > MAX_PARAMS:
        return (
            {},
            View(),
            (
                f"This link has {len(params):,} parameters; a page link has at most "
                f"{MAX_PARAMS}. The defaults are shown instead."
            ),
        )
    try:
        unknown = [p for p in params if p not in by_param and p not in VIEW_PARAMS]
        if unknown:
            raise ConfigError("parameter", clip(str(unknown[0])), ", ".join([*by_param, *VIEW_PARAMS]))
        values = {by_param[p].key: by_param[p].parse(raw) for p, raw in params.items() if p in by_param}
        present = (
            Control("present", "", "", "bool").parse(params["present"]) if "present" in params else False
        )
        hidden = hidden_params(params.get("hide"), by_param)
    except ConfigError as exc:
        return (
            {},
            View(),
            (f"This link's settings could not be used — {exc}. The defaults are shown instead."),
        )
    return values, View(present, hidden), None


def hidden_params(raw: Any, by_param: Mapping[str, Control]) -> tuple[str, ...]:
    """A link's `hide` value -> the parameters of the controls it hides, each once."""
    if raw is None:
        return ()
    if isinstance(raw, (list, tuple)):
        raw = raw[-1] if raw else ""
    names = [n.strip() for n in str(raw).split(",") if n.strip()]
    for name in names:
        if name not in by_param:
            raise ConfigError("hide", clip(name), "a comma-separated list of " + ", ".join(by_param))
    return tuple(dict.fromkeys(names))


def write(controls: Sequence[Control], values: Mapping[str, Any], view: View) -> dict[str, str]:
    """The query parameters of the page as it stands: every control, then the view."""
    params = {c.param: c.text(values[c.key]) for c in controls if c.key in values}
    if view.present:
        params["present"] = "1"
    if view.hidden:
        params["hide"] = ",".join(view.hidden)
    return params
