"""Decision regions on the 2-D datasets: the engine predicts a class over a grid at every
evaluation, and the Lab's chart draws the compared runs side by side."""

from __future__ import annotations

import pytest

from bsdemo.charts.regions import latest_regions, regions_chart
from bsdemo.config import RunConfig
from bsdemo.engine.regions import GRID, POINTS
from bsdemo.engine.train import train
from tests.unit.test_charts import fake_snapshot


def evaluations(cfg: RunConfig) -> list:
    return [e for e in train(cfg) if e.kind == "eval"]


def test_a_planar_dataset_reports_its_regions_at_every_evaluation():
    evs = evaluations(RunConfig(dataset="moons", epochs=3, width=32, depth=2, lr=0.1, seed=3))
    assert len(evs) == 4 and all(e.regions for e in evs)
    last = evs[-1].regions
    assert last["size"] == GRID and len(last["classes"]) == GRID * GRID
    assert set(last["classes"]) <= {"0", "1"} and len(last["points"]) == POINTS
    x0, x1, y0, y1 = last["box"]
    assert all(x0 <= x <= x1 and y0 <= y <= y1 for x, y, _ in last["points"])
    # trained, the regions put most drawn test points on their own side (what accuracy says)
    wrong = sum(last["classes"][_index(p, last)] != str(p[2]) for p in last["points"])
    assert wrong < 0.25 * POINTS, wrong


def _index(point, regions) -> int:
    from bsdemo.charts.regions import _cell

    return _cell(point, regions)


def test_images_and_sequences_carry_no_regions():
    assert all(e.regions is None for e in evaluations(RunConfig(dataset="digits", max_steps=2, epochs=None)))


@pytest.fixture(scope="module")
def spiral_runs():
    """Two real runs on the spirals, a small and a large batch, as snapshots."""
    snaps = []
    for i, batch in enumerate((8, 256), start=1):
        snap = fake_snapshot(i, batch)
        evs = evaluations(RunConfig(dataset="spirals", batch_size=batch, epochs=4, width=32, depth=2, lr=0.1))
        snap.evals = {f: [getattr(e, f) for e in evs] for f in snap.evals}
        snaps.append(snap)
    return snaps


def test_the_chart_draws_each_run_beside_the_others(spiral_runs):
    fig = regions_chart(spiral_runs).figure
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    assert len(heatmaps) == 2 and all(len(h.z) == GRID for h in heatmaps)
    titles = [a.text for a in fig.layout.annotations]
    assert any("batch 8" in t for t in titles) and any("batch 256" in t for t in titles)
    # one legend entry a class, dark points over tinted regions
    legend = [t.name for t in fig.data if t.type == "scatter" and t.showlegend]
    assert legend == ["class 0", "class 1"]
    assert "wrong side" in regions_chart(spiral_runs).alt


def test_no_regions_no_panels():
    chart = regions_chart([fake_snapshot(1, 32)])
    assert not [t for t in chart.figure.data if t.type == "heatmap"]
    assert latest_regions(fake_snapshot(1, 32)) is None
    assert chart.alt == "Decision regions: none yet."
