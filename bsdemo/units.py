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


def number_text(text: str) -> bool:
    """Whether text may be read as a number: ASCII digits only, without Python's digit-group
    underscores — "١٢" and "1_000" are refused, not read as 12 and 1000 (what a person types,
    "12", "+5", "1e3", "0.5", is read)."""
    return text.isascii() and "_" not in text


def whole_number(name: str, value: Any, low: int, high: int, exact: bool = True) -> int:
    """value as a whole number from low to high, or ConfigError naming `name`.

    exact (a config's field): only an int is one. Otherwise text is read ("12", from a flag, an
    environment variable or a limits file) and a whole float (3.0, from JSON) counts as its int.
    A bool is never a number.
    """
    number = value
    if not exact and isinstance(value, str) and len(value) <= _TEXT_CHARS and number_text(value):
        try:
            number = int(value.strip())
        except ValueError:
            pass
    elif not exact and isinstance(value, float) and value.is_integer():
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
        raise ConfigError(name, value, f"a whole number from {_count(low)} to {_count(high)}")
    return number


def real_number(
    name: str, value: Any, low: float, high: float, low_open: bool = False, exact: bool = True
) -> float:
    """value as a finite number from low (excluded with low_open) to high, or ConfigError.
    exact: only an int or a float is one; otherwise text is read too."""
    number = value
    if not exact and isinstance(value, str) and len(value) <= _TEXT_CHARS and number_text(value):
        try:
            number = float(value)
        except ValueError:
            pass
    ok = (
        isinstance(number, (int, float))
        and not isinstance(number, bool)
        and (isinstance(number, int) or math.isfinite(number))  # a huge int has no float
        and (low < number if low_open else low <= number)
        and number <= high
    )
    if not ok:
        bound = f"greater than {low:g} and at most" if low_open else f"from {low:g} to"
        raise ConfigError(name, value, f"a finite number {bound} {high:g}")
    return float(number)


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(text: str, field_name: str = "memory_budget") -> int:
    """'512MiB', '8GiB', '0.5GB', '1048576' -> bytes. Raises ConfigError naming field_name."""
    raw = str(text).strip()
    number = raw.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ")
    unit = raw[len(number) :].strip().lower()
    allowed = "a size such as 512MiB, 8GiB or 0.5GB (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
    try:
        if not number_text(number):
            raise ValueError
        value = float(number)
    except ValueError:
        raise ConfigError(field_name, raw, allowed) from None
    if unit not in _UNITS or not math.isfinite(value) or value <= 0:
        raise ConfigError(field_name, raw, allowed)
    scaled = value * _UNITS[unit]  # 1e306GiB overflows to inf: no int() of that
    if not scaled < 2**50 + 1 or int(scaled) < 1:
        raise ConfigError(field_name, raw, "a size from 1 B to 1 PiB")
    return int(scaled)


# ----- numbers as the pages write them -----
# One format everywhere: a quantity to three significant figures in a unit scaled to it, a real
# minus sign, never a signed zero ("−5.3 points", "0.987 MiB", "0", never "-0.000").
MINUS = "\u2212"


def _signless(text: str) -> str:
    """A formatted number's minus as a real minus sign, and none on a zero ("-0.00" -> "0.00")."""
    if text.startswith("-"):
        body = text[1:]
        return body if not body.strip("0.,") else MINUS + body
    return text


SMALL = 1e-3  # below this a number is written as a power of ten: "7.45 × 10⁻⁹"
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sig(x: float, digits: int = 3) -> str:
    """x to `digits` significant figures, thousands separated; a whole number of more digits in
    full (43,631, not 43,600); under 0.001 as a power of ten: 0.81234 -> '0.812', 2.2 -> '2.20',
    -5.31 -> '−5.31', 0 -> '0', 7.4512e-9 -> '7.45 × 10⁻⁹'. Never 'e-09', never a hyphen."""
    if not math.isfinite(x):
        return "∞" if x > 0 else MINUS + "∞" if x < 0 else "not a number"
    if x == 0:
        return "0"
    if abs(_rounded(x, digits)) < SMALL:
        return _power_of_ten(f"{x:.{digits - 1}e}")  # 9.996e-9 rounds to 1.00 × 10⁻⁸
    return _signless(f"{x:,.{_decimals(x, digits)}f}")


def _decimals(x: float, digits: int) -> int:
    """The decimals that show x (not 0) to `digits` significant figures, once rounded: 0.9996
    rounds to 1.00, not 1.000."""
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    rounded = round(x, decimals)
    if rounded and math.floor(math.log10(abs(rounded))) > math.floor(math.log10(abs(x))):
        decimals -= 1
    return max(decimals, 0)


def _rounded(x: float, digits: int = 3) -> float:
    return 0.0 if x == 0 or not math.isfinite(x) else round(x, _decimals(x, digits))


def setting(x: float, digits: int = 6) -> str:
    """A value a person sets (a learning rate, a k, epochs) written as short as it was typed, to
    at most `digits` significant figures: 0.1 -> '0.1', 0.28284271 (digits 3) -> '0.283',
    1e-05 -> '1 × 10⁻⁵', never '1e-05'."""
    text = f"{x:.{digits}g}"
    return _power_of_ten(text) if "e" in text else _signless(text)


def read_number(text: str) -> float:
    """A number as this module writes it, read back: '1,234' -> 1234.0, '−5.3' -> -5.3,
    '7.45 × 10⁻⁹' -> 7.45e-09, '96.1%' -> 96.1."""
    mantissa, _, power = text.strip().rstrip("%").partition(" × 10")
    power = power.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789"))
    return float(mantissa.replace(",", "").replace(MINUS, "-")) * 10.0 ** int(power or 0)


def _power_of_ten(text: str) -> str:
    """Python's '7.45e-09' as a person writes it: '7.45 × 10⁻⁹'."""
    mantissa, _, power = text.partition("e")
    return _signless(mantissa) + " × 10" + str(int(power)).translate(_SUPERSCRIPT)


def fixed(x: float, decimals: int = 1) -> str:
    """x with a fixed number of decimals ('12.5'), a real minus sign, never a signed zero."""
    return _signless(f"{x:,.{decimals}f}")


def signed(x: float, decimals: int = 1) -> str:
    """A change, its sign always written: '+1.2', '−5.3'; a change that rounds to nothing is
    '0.0' (no sign: it is neither)."""
    text = fixed(x, decimals)
    return text if text.startswith(MINUS) or not text.strip("0.,") else "+" + text


def percent(share: float, decimals: int = 1) -> str:
    """A share as a percentage: 0.9614 -> '96.1%', -0.053 -> '−5.3%', never '-0.0%'."""
    return fixed(100 * share, decimals) + "%"


def signed_percent(share: float, decimals: int = 0) -> str:
    """A change as a percentage, its sign always written: '+12%', '−5%', '0%'."""
    return signed(100 * share, decimals) + "%"


def format_bytes(size: float) -> str:
    """Bytes to three significant figures in the binary unit that keeps the number under 1,000
    ('578 KiB', '0.987 MiB', '2.22 MiB', '512 B')."""
    units = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))
    for unit, scale in units[:-1]:
        if abs(_rounded(size / scale)) < 1000:
            return f"{fixed(size, 0)} B" if scale == 1 else f"{sig(size / scale)} {unit}"
    return f"{sig(size / 2**40)} TiB"


def parse_batch_sizes(text: str, field_name: str, largest: int) -> list[int]:
    """'1,2,4,8' -> [1, 2, 4, 8]: a non-empty, strictly increasing list from 1 to largest."""
    raw = str(text).strip()
    allowed = f"a comma-separated, increasing list of whole numbers from 1 to {largest}"
    parts = [p.strip() for p in raw.split(",")]
    if "" in parts and raw:
        raise ConfigError(
            field_name, raw, allowed + " (no empty entries: one number between each two commas)"
        )
    if not raw or len(parts) > 64:
        raise ConfigError(field_name, raw, allowed + " (1 to 64 of them)")
    try:
        if not all(map(number_text, parts)):
            raise ValueError
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
