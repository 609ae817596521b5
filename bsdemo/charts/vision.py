"""Can every reader tell two series apart? Colour differences as seen with normal vision and
with the three common colour-vision deficiencies, simulated.

Each colour is simulated for protanopia, deuteranopia and tritanopia with the matrices of
Machado, Oliveira and Fernandes (2009, severity 1: the full dichromacy, the hardest case) in
linear RGB, then compared in CIELAB by CIEDE2000. Pure: hex strings in, numbers out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

# Machado et al. (2009), severity 1.0, applied to linear sRGB
DEFICIENCIES = {
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "tritanopia": (
        (1.255528, -0.076749, -0.178779),
        (-0.078411, 0.930809, 0.147602),
        (0.004733, 0.691367, 0.303900),
    ),
}
VISIONS = ("normal", *DEFICIENCIES)
# the least CIEDE2000 difference at which two lines on a white chart still read as two colours
# for this lab: about what separates the Okabe-Ito set's closest pair under deuteranopia
MIN_DIFFERENCE = 8.0
_WHITE = (0.95047, 1.0, 1.08883)  # D65


def _linear(hex_colour: str) -> tuple[float, float, float]:
    h = hex_colour.strip().lstrip("#")
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    if len(h) != 6:
        raise ValueError(f"not a #rrggbb colour: {hex_colour!r}")
    channels = (int(h[i : i + 2], 16) / 255 for i in (0, 2, 4))
    return tuple(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)


def simulate(hex_colour: str, vision: str) -> tuple[float, float, float]:
    """The colour in linear RGB as a reader with `vision` sees it (normal: unchanged)."""
    rgb = _linear(hex_colour)
    if vision == "normal":
        return rgb
    m = DEFICIENCIES[vision]
    return tuple(min(max(sum(m[i][j] * rgb[j] for j in range(3)), 0.0), 1.0) for i in range(3))


def _lab(rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    r, g, b = rgb
    xyz = (
        0.4124564 * r + 0.3575761 * g + 0.1804375 * b,
        0.2126729 * r + 0.7151522 * g + 0.0721750 * b,
        0.0193339 * r + 0.1191920 * g + 0.9503041 * b,
    )

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = (f(v / w) for v, w in zip(xyz, _WHITE, strict=True))
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def ciede2000(lab1: tuple[float, float, float], lab2: tuple[float, float, float]) -> float:
    """The CIEDE2000 colour difference (Sharma, Wu and Dalal's formulation)."""
    l1, a1, b1 = lab1
    l2, a2, b2 = lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar**7 / (c_bar**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dl, dc = l2 - l1, c2p - c1p
    dh = 0.0
    if c1p * c2p:
        dh = h2p - h1p
        dh -= 360 if dh > 180 else 0
        dh += 360 if dh < -180 else 0
    dhh = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    l_bar, cp_bar = (l1 + l2) / 2, (c1p + c2p) / 2
    h_bar = h1p + h2p
    if c1p * c2p:
        h_bar = (h1p + h2p + (360 if abs(h1p - h2p) > 180 else 0)) / 2
    t = (
        1
        - 0.17 * math.cos(math.radians(h_bar - 30))
        + 0.24 * math.cos(math.radians(2 * h_bar))
        + 0.32 * math.cos(math.radians(3 * h_bar + 6))
        - 0.20 * math.cos(math.radians(4 * h_bar - 63))
    )
    sl = 1 + 0.015 * (l_bar - 50) ** 2 / math.sqrt(20 + (l_bar - 50) ** 2)
    sc, sh = 1 + 0.045 * cp_bar, 1 + 0.015 * cp_bar * t
    rt = (
        -2
        * math.sqrt(cp_bar**7 / (cp_bar**7 + 25**7))
        * math.sin(math.radians(60 * math.exp(-(((h_bar - 275) / 25) ** 2))))
    )
    return math.sqrt((dl / sl) ** 2 + (dc / sc) ** 2 + (dhh / sh) ** 2 + rt * (dc / sc) * (dhh / sh))


def difference(c1: str, c2: str, vision: str = "normal") -> float:
    """CIEDE2000 between two hex colours as a reader with `vision` sees them."""
    return ciede2000(_lab(simulate(c1, vision)), _lab(simulate(c2, vision)))


def closest_pair(colours: Iterable[str]) -> tuple[float, str, str, str] | None:
    """(difference, vision, colour, colour) of the hardest pair of distinct colours to tell
    apart under any of VISIONS; None with fewer than two distinct colours."""
    distinct = sorted({c.lower() for c in colours})
    pairs = [(difference(a, b, v), v, a, b) for a, b in itertools.combinations(distinct, 2) for v in VISIONS]
    return min(pairs) if pairs else None


def least_difference(c1: str, c2: str) -> float:
    """The smallest CIEDE2000 between two colours under any of VISIONS."""
    return min(difference(c1, c2, v) for v in VISIONS)


def distinguishable(c1: str, c2: str) -> bool:
    """Whether every reader (normal vision or a simulated dichromacy) tells the two apart."""
    return c1.lower() == c2.lower() or least_difference(c1, c2) >= MIN_DIFFERENCE
