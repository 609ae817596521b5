"""Numbers, units and lists a person types: bounded whole and real numbers, byte sizes,
batch-size lists, powers of two (pure Python).

One home for them: the config, the CLI, the limits, the job kinds, the scheduler's messages and
the pages all read numbers, and read and write sizes, the same way ("512MiB", "1.50 GiB"), with
the same messages.
"""

from __future__ import annotations

import math
from typing import Any

from bsdemo.errors import ConfigError

MIB, GIB = 2**20, 2**30

_TEXT_CHARS = 32  # longer text is no number we accept (and is not parsed)


def _count(n: float) -> str:
    return f"{n:,}" if abs(n) >= 10**6 else f"{n:g}" if isinstance(n, float) else str(n)


def whole_number(name: str, value: Any, low: int, high: int, exact: bool = True) -> int:
    """value as a whole number from low to high, or ConfigError naming `name`.

    exact (a config's field): only an int is one. Otherwise text is read ("12", from a flag, an
    environment variable or a limits file) and a whole float (3.0, from JSON) counts as its int.
    A bool is never a number.
    """
    number = value
    if not exact and isinstance(value, str) and len(value) <= _TEXT_CHARS:
        try:
            number = int(value.strip())
        except ValueError:
            pass
    elif not exact and isinstance(value, float) and value.is_integer():
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
        raise ConfigError(name, value, f"a whole number from {_count(low)} to {_count(high)}")
    return number


def real_number(name: str, value: Any, low: float, high: float, low_open: bool = False,
                exact: bool = True) -> float:
    """value as a finite number from low (excluded with low_open) to high, or ConfigError.
    exact: only an int or a float is one; otherwise text is read too."""
    number = value
    if not exact and isinstance(value, str) and len(value) <= _TEXT_CHARS:
        try:
            number = float(value)
        except ValueError:
            pass
    ok = (isinstance(number, (int, float)) and not isinstance(number, bool)
          and math.isfinite(number) and (low < number if low_open else low <= number)
          and number <= high)
    if not ok:
        bound = f"greater than {low:g} and at most" if low_open else f"from {low:g} to"
        raise ConfigError(name, value, f"a finite number {bound} {high:g}")
    return float(number)


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text: str, field_name: str = "memory_budget") -> int:
    """'512MiB', '8GiB', '0.5GB', '1048576' -> bytes. Raises ConfigError naming field_name."""
    raw = str(text).strip()
    number = raw.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ")
    unit = raw[len(number):].strip().lower()
    allowed = "a size such as 512MiB, 8GiB or 0.5GB (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
    try:
        value = float(number)
    except ValueError:
        raise ConfigError(field_name, raw, allowed) from None
    if unit not in _UNITS or not math.isfinite(value) or value <= 0:
        raise ConfigError(field_name, raw, allowed)
    scaled = value * _UNITS[unit]  # 1e306GiB overflows to inf: no int() of that
    if not scaled < 2**50 + 1 or int(scaled) < 1:
        raise ConfigError(field_name, raw, "a size from 1 B to 1 PiB")
    return int(scaled)


def format_bytes(size: float) -> str:
    """Bytes in the largest binary unit that keeps the number >= 1 (e.g. '1.50 GiB')."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(size) >= scale:
            return f"{size / scale:.2f} {unit}"
    return f"{size:.0f} B"


def parse_batch_sizes(text: str, field_name: str, largest: int) -> list[int]:
    """'1,2,4,8' -> [1, 2, 4, 8]: a non-empty, strictly increasing list from 1 to largest."""
    raw = str(text).strip()
    allowed = f"a comma-separated, increasing list of whole numbers from 1 to {largest}"
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or len(parts) > 64:
        raise ConfigError(field_name, raw, allowed + " (1 to 64 of them)")
    try:
        sizes = [int(p) for p in parts]
    except ValueError:
        raise ConfigError(field_name, raw, allowed) from None
    if any(not 1 <= b <= largest for b in sizes):
        raise ConfigError(field_name, raw, allowed)
    if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise ConfigError(field_name, raw, allowed + " (sorted, no repeats)")
    return sizes


def powers_of_two(up_to: int) -> list[int]:
    return [2**i for i in range(int(math.log2(max(up_to, 1))) + 1)]
