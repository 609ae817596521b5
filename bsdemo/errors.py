"""The error every check raises: `ConfigError` names the field, the value given (quoted short)
and what is allowed. The lowest room of the house (pure Python, imports nothing of bsdemo), so
units, config, limits, the job kinds and the engine all raise the same thing."""

from __future__ import annotations

from typing import Any

QUOTE_CHARS = 64  # a message quotes at most this much of any name or value a user typed


ERROR_CHARS = 200  # a command line's error is one line of at most this many characters


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    """text cut to `limit` characters, with an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(text: str) -> str:
    """text as a command line's error: its whitespace one space, at most ERROR_CHARS."""
    return clip(" ".join(str(text).split()), ERROR_CHARS)


class ConfigError(ValueError):
    """An invalid setting: names the field, the value given and what is allowed.

    Both the name and the value are quoted short (QUOTE_CHARS): a 100 KB URL parameter must not
    become a 100 KB message.
    """

    def __init__(self, field_name: str, value: Any, allowed: str):
        self.field = clip(str(field_name))
        self.value = value
        self.allowed = allowed
        super().__init__(f"{self.field}: got {clip(repr(value))}; allowed: {allowed}")

    def __reduce__(self):
        """Rebuilt from its three parts (it crosses processes: a cluster's scheduler raises it
        for a replica's page); a value that cannot be pickled travels as its quoted text."""
        import pickle

        try:
            pickle.dumps(self.value)
            value = self.value
        except Exception:  # noqa: BLE001 - whatever a value's pickling raises
            value = clip(repr(self.value))
        return (type(self), (self.field, value, self.allowed))
