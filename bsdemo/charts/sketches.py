"""Home's card pictures: a sketch of each lesson's main chart, its shape only.

No numbers and no data: axes, the kind of mark the lesson draws (curves, bars, a point that
fails) and a "sketch" label, so nothing here reads as a result. The lesson's own page draws
the real chart from the student's runs.
"""

from __future__ import annotations

from bsdemo.charts.style import OKABE_ITO, OOM_COLOUR
from bsdemo.units import fixed

W, H = 160, 72  # the picture's own units; it scales to the card's width
AREA = (14, 6, W - 22, H - 18)  # the plot area inside them: left, top, width, height
INK, SECOND, THIRD, FAIL = OKABE_ITO[0], OKABE_ITO[1], OKABE_ITO[2], OOM_COLOUR  # the pages' own


def _path(points: list[tuple[float, float]]) -> str:
    """Points in a unit square (y up) to an SVG path in the plot's area."""
    x0, y0, w, h = AREA
    return "M" + " L".join(f"{fixed(x0 + x * w, 1)},{fixed(y0 + (1 - y) * h, 1)}" for x, y in points)


def _curve(f, n: int = 24) -> list[tuple[float, float]]:
    return [(i / n, f(i / n)) for i in range(n + 1)]


def _line(points, colour: str, width: float = 2, dash: str = "") -> str:
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<path d="{_path(points)}" fill="none" stroke="{colour}" stroke-width="{width}" '
        f'stroke-linecap="round" stroke-linejoin="round"{extra}/>'
    )


def _bars(heights: list[float], colours: list[str]) -> str:
    x0, y0, w, h = AREA
    step = w / len(heights)
    return "".join(
        f'<rect x="{fixed(x0 + i * step + step * 0.2, 1)}" y="{fixed(y0 + (1 - v) * h, 1)}" '
        f'width="{fixed(step * 0.6, 1)}" height="{fixed(v * h, 1)}" fill="{c}"/>'
        for i, (v, c) in enumerate(zip(heights, colours, strict=True))
    )


def _cross(x: float, y: float) -> str:
    x0, y0, w, h = AREA
    cx, cy = x0 + x * w, y0 + (1 - y) * h
    return (
        f'<path d="M{cx - 4},{cy - 4} L{cx + 4},{cy + 4} M{cx - 4},{cy + 4} L{cx + 4},'
        f'{cy - 4}" stroke="{FAIL}" stroke-width="2.5"/>'
    )


def _falling(rate: float, floor: float = 0.08, wobble: float = 0.0):
    def f(x: float) -> float:
        return floor + (0.9 - floor) * 2.718 ** (-rate * x) + wobble * ((x * 97) % 1 - 0.5)

    return f


def _marks(slug: str) -> tuple[str, str]:
    """(the SVG marks, what they show, for the alt text) for a lesson's main chart."""
    if slug == "training_lab":
        return (
            _line(_curve(_falling(5, wobble=0.12), 40), INK, 1.5) + _line(_curve(_falling(2.5)), SECOND),
            "two loss curves falling, one noisy and one smooth",
        )
    if slug == "throughput":
        return (
            _line(_curve(lambda x: 0.05 + 0.85 * (1 - 2.718 ** (-4 * x))), INK),
            "samples per second rising with the batch, then levelling off",
        )
    if slug == "memory":
        return (
            _line([(0, 0.2), (0.75, 0.8)], INK) + _cross(0.9, 0.92),
            "memory rising in a straight line with the batch, then a batch that fails",
        )
    if slug == "regimes":
        return (
            _line(_curve(_falling(7, wobble=0.15), 40), INK, 1.5)
            + _line(_curve(_falling(4)), SECOND)
            + _line(_curve(_falling(0.8)), THIRD),
            "three loss curves: noisy and fast, smooth, and slow",
        )
    if slug == "lr_scaling":
        return (
            _line(_curve(_falling(4)), INK)
            + _line(_curve(_falling(1.2)), SECOND, dash="4 3")
            + _line(_curve(_falling(3.5, 0.12)), THIRD, dash="1 3"),
            "loss curves of one reference and two larger batches",
        )
    if slug == "accumulation":
        return (
            _bars([0.9, 0.8, 0.85, 0.3, 0.25, 0.28], [INK] * 3 + [SECOND] * 3),
            "bars: gradient sizes against much smaller differences",
        )
    if slug == "sharpness":

        def valleys(x: float) -> float:  # a narrow minimum and a wide one, equally deep
            dips = (2.718 ** (-(((x - 0.25) / 0.05) ** 2)), 2.718 ** (-(((x - 0.72) / 0.17) ** 2)))
            return 0.9 - 0.75 * max(dips)

        return _line(_curve(valleys, 80), INK), "a narrow valley and a wide one, equally deep"
    if slug == "noise":
        return (
            _line(_curve(lambda x: 0.08 + 0.1 / (x + 0.12)), INK),
            "the gradient's variance falling as the batch grows",
        )
    if slug == "norms":
        return (
            _line([(0, 0.85), (1, 0.85)], INK)
            + _line([(0, 0.8), (1, 0.82)], THIRD, dash="4 3")
            + _line(_curve(lambda x: 0.85 - 0.6 * 2.718 ** (-6 * x)), SECOND),
            "accuracy flat across batches, one normalisation dropping at small batches",
        )
    if slug == "fit_batch":
        return (
            _bars([0.3, 0.55, 0.7, 0.9], [INK, SECOND, THIRD, INK]),
            "bars: the largest batch each technique fits",
        )
    if slug == "finder":
        return (
            _line(_curve(lambda x: 0.05 + 0.85 * (1 - 2.718 ** (-4 * x))), INK) + _cross(0.95, 0.95),
            "throughput rising to where memory ends",
        )
    return (
        _line([(0.1, 0.5), (0.3, 0.25), (0.8, 0.85)], THIRD, 3),
        "a check mark, for each answer your runs back up",
    )


def sketch(slug: str) -> tuple[str, str]:
    """(an SVG, its alt text): the shape of the lesson's main chart, labelled a sketch."""
    marks, shows = _marks(slug)
    axes = f'<path d="M14,6 L14,{H - 12} L{W - 6},{H - 12}" fill="none" stroke="#777777" stroke-width="1"/>'
    label = (
        f'<text x="{W - 6}" y="{H - 2}" text-anchor="end" font-size="8" '
        'font-family="sans-serif" fill="#666666">sketch</text>'
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W * 2}" '
        f'height="{H * 2}">{axes}{marks}{label}</svg>',
        f"Sketch of the main chart: {shows}",
    )
