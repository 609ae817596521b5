"""WCAG AA contrast of the colours text is drawn in, computed (not eyeballed), in normal and in
presentation mode: 4.5:1 for text on its background."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from bsdemo.charts import style
from bsdemo.ui import links

ROOT = Path(__file__).resolve().parents[2]
WHITE = "#FFFFFF"
STREAMLIT_TEXT = "#31333F"  # Streamlit's light theme: body text (no textColor set in our theme)


def luminance(colour: str) -> float:
    r, g, b = (int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_formula_matches_known_pairs():
    assert contrast("#000000", WHITE) == pytest.approx(21.0)
    assert contrast("#777777", WHITE) == pytest.approx(4.48, abs=0.01)  # just fails AA


def css_colours(css: str) -> list[str]:
    return re.findall(r"color:\s*(#[0-9A-Fa-f]{6})", css)


@pytest.mark.parametrize("mode", ["normal", "presentation"])
def test_text_colours_meet_aa_on_white(mode):
    theme = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["theme"]
    primary = theme["primaryColor"]
    css = links.BASE_CSS + (links.PRESENT_CSS if mode == "presentation" else "")
    colours = [STREAMLIT_TEXT, *css_colours(css)]
    assert colours[1:], "the page's own CSS sets the caption colour"
    for colour in colours:
        assert contrast(colour, WHITE) >= 4.5, colour
    # a primary button's white label on the primary colour, and a link in the primary colour
    assert contrast(primary, WHITE) >= 4.5


def test_chart_text_colours_meet_aa_on_white():
    source = (ROOT / "bsdemo" / "charts" / "style.py").read_text()
    texts = re.findall(r"font=dict\([^)]*color=\"(#[0-9A-Fa-f]{6})\"", source)
    texts += re.findall(r"title_font=dict\([^)]*color=\"(#[0-9A-Fa-f]{6})\"", source)
    assert texts
    for colour in texts:
        assert contrast(colour, WHITE) >= 4.5, colour
    # the out-of-memory and divergence labels are written in OOM_COLOUR
    assert contrast(style.OOM_COLOUR, WHITE) >= 3.0  # large or bold marks: 3:1


def test_every_series_colour_is_3_to_1_on_white():
    """WCAG 1.4.11: lines and marks a reader needs at least 3:1 against the white plot."""
    for colour in (*style.BATCH_PALETTE, *style.OKABE_ITO, style.OOM_COLOUR):
        assert contrast(colour, WHITE) >= 3.0, colour
    assert len(set(style.BATCH_PALETTE)) == len(style.BATCH_PALETTE)
