"""A class-sourced sweep: the grids, a member's seed and run, what a run reports, the room's runs
combined by cell; and the sweep kept in both run stores (SQLite and a real PostgreSQL): handed
out, a late member's cell, reports taken only for the member's own cell, a new sweep, the
export and the purge."""

from __future__ import annotations

import json

import pytest

from bsdemo.charts.room import class_curves_chart, class_grid_chart, class_speed_chart
from bsdemo.classroom import sweep
from bsdemo.classroom.store import INSTRUCTOR, ClassError
from bsdemo.config import RunConfig
from bsdemo.errors import ConfigError
from bsdemo.timing import THREAD_CLOCK, WALL_CLOCK


def report(
    batch: int,
    lr: float = 0.05,
    accuracy: float | None = 0.9,
    speed: float = 1000.0,
    status: str = "completed",
    shared: bool = False,
    device: str = "CPU",
    seed: int = 1,
    clock: str = THREAD_CLOCK,
    busy: float | None = 0.05,
):
    return {
        "batch": batch,
        "lr": lr,
        "seed": seed,
        "status": status,
        "accuracy": accuracy,
        "samples_per_sec": speed * 0.9,
        "speed": speed,
        "clock": clock,
        "others_busy_share": busy,
        "torch_threads": 1,
        "curve": [[0.5, 2.0], [1.0, 1.0]],
        "device": device,
        "shared": shared,
        "stored": False,
        "turns": 0,
        "run": 1,
        "time_capped": False,
    }


# ----- the pure part -----
def test_each_sweep_page_has_its_grid():
    lr = sweep.grid("lr_scaling")
    assert len(lr) == 24 and len(set(lr)) == 24
    assert {c.batch for c in lr} == set(sweep.LR_BATCHES) and {c.lr for c in lr} == set(sweep.LR_VALUES)
    for page in ("training_lab", "throughput", "noise"):
        cells = sweep.grid(page)
        assert [c.batch for c in cells] == list(sweep.BATCHES) and all(c.lr is None for c in cells)
    with pytest.raises(ValueError):
        sweep.grid("quiz")
    assert sweep.cells_from(json.loads(json.dumps([c.as_list() for c in lr]))) == lr


@pytest.mark.parametrize("bad", [-1, 24, 10**9, "3", 2.0, True, None])
def test_a_cell_outside_the_grid_is_refused_by_name(bad):
    with pytest.raises(ConfigError) as caught:
        sweep.check_cell(bad, sweep.grid("lr_scaling"))
    assert str(caught.value).startswith("cell: ") and "0 to 23" in str(caught.value)


def test_a_members_run_is_the_instructors_workload_with_the_cell_and_a_seed_of_its_own():
    base = RunConfig(epochs=7, seed=5, time_limit_s=60.0).__dict__
    seeds = {sweep.member_seed(5, f"{i:064x}") for i in range(200)}
    assert len(seeds) > 190 and all(5 < s < 5 + sweep.SEED_SPAN for s in seeds)
    assert sweep.member_seed(5, "abc") == sweep.member_seed(5, "abc")
    out = sweep.cell_config(base, sweep.Cell(128, 0.3), 77)
    assert (out["batch_size"], out["lr"], out["seed"], out["epochs"]) == (128, 0.3, 77, 7)
    assert out["time_limit_s"] == sweep.TIME_LIMIT_S  # capped: a room's sweep is minutes
    kept = sweep.cell_config(base, sweep.Cell(16), 9)
    assert kept["lr"] == base["lr"]  # a batch-only cell keeps the workload's lr
    RunConfig(**out).validated()  # a real, valid run


def test_a_report_comes_from_the_runs_record():
    steps = {"epoch": [i / 100 for i in range(500)], "loss": [2.0 - i / 500 for i in range(500)]}
    out = sweep.cell_report(
        status="completed",
        config={"batch_size": 8, "lr": 0.1, "seed": 3},
        summary={
            "test_accuracy": 0.91,
            "samples_per_sec": 1234.5,
            "cpu_samples_per_sec": 1500.0,
            "others_busy_share": 0.4,
            "torch_threads": 1,
        },
        steps=steps,
        start={"device": {"name": "CPU (2 cores)"}},
        shared_device=True,
        turns_with=4,
        stored_at=None,
        run=17,
    )
    assert out["accuracy"] == 0.91 and out["samples_per_sec"] == 1234.5
    # the class compares speeds by the training thread's CPU time where the run has it
    assert (out["speed"], out["clock"], out["others_busy_share"]) == (1500.0, THREAD_CLOCK, 0.4)
    assert len(out["curve"]) == sweep.CURVE_POINTS
    assert out["curve"][0] == [0.0, 2.0] and out["curve"][-1] == [4.99, steps["loss"][-1]]
    assert (out["device"], out["shared"], out["turns"], out["run"]) == ("CPU (2 cores)", True, 4, 17)
    diverged = sweep.cell_report(
        status="diverged",
        config={"batch_size": 8, "lr": 3.0},
        summary={"test_accuracy": 0.1},
        steps={},
        start=None,
        shared_device=False,
        turns_with=0,
        stored_at=5.0,
        run=1,
    )
    assert diverged["accuracy"] is None and diverged["stored"] and diverged["curve"] == []
    assert diverged["clock"] == WALL_CLOCK and diverged["speed"] is None
    assert json.loads(json.dumps(out)) == out  # kept as JSON


def test_the_room_combined_by_cell_median_spread_empty_and_conditions():
    cells = sweep.grid("throughput")
    results = [
        (0, report(8, accuracy=0.8, speed=100)),
        (0, report(8, accuracy=0.9, speed=300)),
        (0, report(8, accuracy=0.85, speed=200)),
        (2, report(32, status="diverged", accuracy=None)),
        (99, report(4)),
    ]  # outside the grid: left out
    combined = sweep.combine(cells, results)
    first = combined.cells[0]
    assert first.runs == 3 and first.median("accuracy") == 0.85
    assert first.spread("speed") == (100, 300) and first.median("speed") == 200
    assert combined.cells[2].diverged == 1 and combined.cells[2].median("accuracy") is None
    assert combined.empty == [1, 3, 4, 5, 6] and combined.filled == 2 and combined.runs == 4
    assert combined.conditions == ["CPU, by thread CPU time"] and not combined.mixed
    # by the thread's CPU time, load and a shared device do not part runs of one device
    same = sweep.combine(cells, [(0, report(8, busy=0.0)), (1, report(16, shared=True, busy=0.9))])
    assert not same.mixed
    mixed = sweep.combine(
        cells,
        [
            (0, report(8)),
            (1, report(16, device="NVIDIA H100")),
            (2, report(32, clock=WALL_CLOCK, busy=0.05)),
            (3, report(64, clock=WALL_CLOCK, busy=0.02)),
            (4, report(128, clock=WALL_CLOCK, busy=0.5)),
            (5, report(256, clock=WALL_CLOCK, busy=0.05, shared=True)),
        ],
    )
    assert mixed.mixed and len(mixed.conditions) == 5, mixed.conditions
    assert "CPU, wall clock, 1 torch thread(s), other processes 45%–60% busy" in mixed.conditions
    assert (
        "CPU, wall clock, 1 torch thread(s), shared with other jobs, other processes 0%–15% busy"
        in mixed.conditions
    )


def test_the_rooms_charts_show_medians_ranges_and_the_empty_cells():
    cells = sweep.grid("throughput")
    combined = sweep.combine(
        cells,
        [(0, report(8, speed=100)), (0, report(8, speed=300)), (1, report(16, speed=500, clock=WALL_CLOCK))],
    )
    speed = class_speed_chart(combined)
    lines = [t for t in speed.figure.data if t.mode == "lines+markers"]
    assert len(lines) == 2  # one line a condition: a wall-clock speed is not joined to the rest
    alone = next(t for t in lines if "thread CPU time" in t.name)
    assert list(alone.x) == [8] and list(alone.y) == [200]
    assert list(alone.error_y.array) == [100] and list(alone.error_y.arrayminus) == [100]
    empty = next(t for t in speed.figure.data if t.name == "not run yet")
    assert list(empty.x) == [32, 64, 128, 256, 512]
    assert "Not run: batch 32, 64, 128, 256, 512" in speed.alt
    curves = class_curves_chart(combined)
    assert len(curves.figure.data) == 3 and sum(bool(t.showlegend) for t in curves.figure.data) == 2
    grid = sweep.grid("lr_scaling")
    heat = class_grid_chart(
        sweep.combine(
            grid,
            [
                (0, report(8, 0.01, 0.7)),
                (0, report(8, 0.01, 0.9)),
                (5, report(8, 3.0, None, status="diverged")),
            ],
        )
    )
    texts = heat.figure.data[0].text
    assert texts[0][0] == "★ 80%<br>2 runs, 70%–90%" and texts[0][5] == "diverged ×1"
    assert texts[3][2] == "not run" and heat.alt.startswith("The room's map: 2 of 24 cells")


# ----- in the run stores (the `classes` fixture: SQLite and a real PostgreSQL) -----


def test_a_sweep_is_handed_out_run_and_read(classes):
    code, key = classes.start("Week 5")
    members = [classes.join(code, f"browser-{i}") for i in range(10)]
    assert classes.my_cell(code, members[0], "throughput") is None  # nothing handed out yet
    with pytest.raises(ClassError):
        classes.open_sweep(code, "not-the-key", "throughput", {"epochs": 2})
    held = classes.open_sweep(code, key, "throughput", {"epochs": 2, "seed": 0})
    assert held.number == 1 and len(held.cells) == 7
    got = {m: classes.my_cell(code, m, "throughput")[1] for m in members}
    counts = [list(got.values()).count(i) for i in range(7)]
    assert max(counts) - min(counts) <= 1  # balanced
    late = classes.join(code, "late")
    late_sweep, late_cell = classes.my_cell(code, late, "throughput")
    assert late_sweep.config == {"epochs": 2, "seed": 0}
    assert counts[late_cell] == min(counts)  # the late member fills the thinnest cell
    assert classes.my_cell(code, late, "throughput")[1] == late_cell  # and keeps it
    assert classes.my_cell(code, "not-a-member", "throughput") is None
    # a member reports their own cell only; a second run replaces the first
    mine = got[members[0]]
    classes.report(code, "throughput", 1, mine, report(8, accuracy=0.5), member=members[0])
    classes.report(code, "throughput", 1, mine, report(8, accuracy=0.6), member=members[0])
    other = (mine + 1) % 7
    with pytest.raises(ClassError, match="not this browser's"):
        classes.report(code, "throughput", 1, other, report(8), member=members[0])
    with pytest.raises(ConfigError, match="cell: got 7"):
        classes.report(code, "throughput", 1, 7, report(8), member=members[0])
    with pytest.raises(ClassError):  # a member id nobody was given
        classes.report(code, "throughput", 1, mine, report(8), member="forged")
    # the instructor fills any cell
    classes.report(code, "throughput", 1, other, report(16, accuracy=0.7), key=key)
    with pytest.raises(ClassError):
        classes.report(code, "throughput", 1, other, report(16), key="guess")
    held, results, holders = classes.sweep_results(code, "throughput")
    assert holders == 11 and sorted(c for c, _ in results) == sorted([mine, other])
    assert {r["accuracy"] for _, r in results} == {0.6, 0.7}
    # a new sweep starts empty; a run of the old one is not added to it
    assert classes.open_sweep(code, key, "throughput", {"epochs": 3}).number == 2
    with pytest.raises(ClassError, match="new sweep"):
        classes.report(code, "throughput", 1, mine, report(8), member=members[0])
    assert classes.sweep_results(code, "throughput")[1] == []
    assert classes.sweep_results(code, "noise") is None
    # the export has the runs by cell, no member ids
    out = classes.export(code, key)
    first = next(s for s in out["sweeps"] if s["sweep"] == 1)
    assert len(first["runs"]) == 2 and first["grid"][0] == [8, None]
    assert not any(m in json.dumps(out) for m in members) and INSTRUCTOR not in json.dumps(out)
    # ended: no more sweeps, cells or runs
    classes.end(code, key)
    assert classes.my_cell(code, members[0], "throughput") is None
    with pytest.raises(ClassError, match="ended"):
        classes.report(code, "throughput", 2, mine, report(8), key=key)
    with pytest.raises(ClassError, match="ended"):
        classes.open_sweep(code, key, "noise", {})


def test_an_expired_class_takes_its_sweeps_with_it(classes):
    now = [1_000_000.0]
    classes.clock = lambda: now[0]
    code, key = classes.start("old")
    member = classes.join(code, "a")
    classes.open_sweep(code, key, "lr_scaling", {})
    cell = classes.my_cell(code, member, "lr_scaling")[1]
    classes.report(code, "lr_scaling", 1, cell, report(8), member=member)
    classes.end(code, key)
    now[0] += 15 * 86400
    assert classes.purge(14) == 1
    assert classes.sweep_results(code, "lr_scaling") is None
    leftovers = classes._do(
        lambda q: [
            q(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("class_sweeps", "class_cells", "class_results")
        ]
    )
    assert leftovers == [0, 0, 0]
