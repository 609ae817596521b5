"""Units and lists a person types: byte sizes, batch-size lists, powers of two (pure Python).

One home for them: the config, the CLI, the limits, the scheduler's messages and the pages all
read and write sizes the same way ("512MiB", "1.50 GiB").
"""

from __future__ import annotations

import math

from bsdemo.config import MAX_BATCH_SIZE, ConfigError

MIB, GIB = 2**20, 2**30

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


def parse_batch_sizes(text: str, field_name: str = "batch_sizes") -> list[int]:
    """'1,2,4,8' -> [1, 2, 4, 8]: a non-empty, strictly increasing list within the batch limits."""
    raw = str(text).strip()
    allowed = f"a comma-separated, increasing list of whole numbers from 1 to {MAX_BATCH_SIZE}"
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or len(parts) > 64:
        raise ConfigError(field_name, raw, allowed + " (1 to 64 of them)")
    try:
        sizes = [int(p) for p in parts]
    except ValueError:
        raise ConfigError(field_name, raw, allowed) from None
    if any(not 1 <= b <= MAX_BATCH_SIZE for b in sizes):
        raise ConfigError(field_name, raw, allowed)
    if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise ConfigError(field_name, raw, allowed + " (sorted, no repeats)")
    return sizes


def powers_of_two(up_to: int) -> list[int]:
    return [2**i for i in range(int(math.log2(max(up_to, 1))) + 1)]
