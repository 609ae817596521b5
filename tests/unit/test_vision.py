"""Every pair of series a chart draws is told apart by colour, with normal vision and with
protanopia, deuteranopia and tritanopia simulated (CIEDE2000 at least vision.MIN_DIFFERENCE)."""

from __future__ import annotations

import itertools
import random

import pytest

from bsdemo import charts
from bsdemo.charts import architectures, fitbatch, sweeps, vision
from tests.unit.test_charts import fake_snapshot

# Sharma, Wu and Dalal (2005), the CIEDE2000 test data: (Lab, Lab, difference)
SHARMA = [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((22.7233, 20.0904, -46.6940), (23.0331, 14.9730, -42.5619), 2.0373),
]


@pytest.mark.parametrize("lab1,lab2,expected", SHARMA)
def test_ciede2000_matches_the_published_test_data(lab1, lab2, expected):
    assert vision.ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)
    assert vision.ciede2000(lab2, lab1) == pytest.approx(expected, abs=1e-4)


def test_the_check_fails_the_pairs_colour_blind_readers_confuse():
    # red against green: far apart to most readers, one colour without red or green cones
    assert vision.difference("#D62728", "#2CA02C") > 40
    assert vision.difference("#D62728", "#2CA02C", "deuteranopia") < vision.MIN_DIFFERENCE
    assert not vision.distinguishable("#D62728", "#2CA02C")
    # the palette this lab used before: its darkened orange and yellow, under protanopia
    assert vision.closest_pair(["#C77C00", "#938A00", "#0072B2"])[1:] == ("protanopia", "#938a00", "#c77c00")
    # blue against yellow survives red-green blindness, not tritanopia's missing blue cones
    assert vision.least_difference("#0072B2", "#C77C00") >= vision.MIN_DIFFERENCE
    assert vision.simulate("#FFFFFF", "tritanopia") == pytest.approx((1.0, 1.0, 1.0), abs=2e-3)


@pytest.mark.parametrize(
    "name,colours",
    [
        ("batch palette", charts.BATCH_PALETTE),
        ("series colours", charts.OKABE_ITO),
        ("memory breakdown", sweeps.BREAKDOWN_COLOURS),
        ("fit-batch techniques", tuple(fitbatch.COLOURS.values())),
        ("architectures", tuple(architectures.COLOURS.values())),
    ],
)
def test_every_palette_pair_is_told_apart(name, colours):
    assert len(set(colours)) == len(colours), name
    hardest = vision.closest_pair(colours)
    assert hardest[0] >= vision.MIN_DIFFERENCE, (name, hardest)


def test_any_comparison_of_runs_is_told_apart_by_colour():
    """Up to eight runs, any batches (repeated ones too): every run a colour of its own, and
    every pair of them distinguishable."""
    rng = random.Random(0)
    sizes = [2**i for i in range(13)]
    for _ in range(300):
        batches = [rng.choice(sizes) for _ in range(rng.randint(2, 8))]
        colours = [s.colour for s in charts.styles([fake_snapshot(i, b, n=2) for i, b in enumerate(batches)])]
        assert len(set(colours)) == len(colours), batches
        assert vision.closest_pair(colours)[0] >= vision.MIN_DIFFERENCE, batches


def series_colours(fig) -> list[str]:
    """The colours of a figure's legend entries (a trace's line colour, else its marker's)."""
    out = []
    for trace in fig.data:
        if trace.showlegend is False or not trace.name:
            continue
        line = getattr(trace, "line", None)
        colour = line.color if line is not None and isinstance(line.color, str) else None
        marker = getattr(trace, "marker", None)
        if colour is None and marker is not None and isinstance(marker.color, str):
            colour = marker.color
        if colour and colour.startswith("#"):
            out.append(colour)
    return out


def test_a_comparison_chart_draws_what_the_check_passed():
    snaps = [fake_snapshot(i, b) for i, b in enumerate((32, 256, 256, 1, 512))]
    fig = charts.loss_chart(snaps, "steps").figure
    colours = series_colours(fig)
    assert len(colours) >= len(snaps)
    assert vision.closest_pair(colours)[0] >= vision.MIN_DIFFERENCE
    for a, b in itertools.combinations(set(colours), 2):
        assert vision.distinguishable(a, b), (a, b)
