"""bsdemo.lecture: a lecture plan's Training Lab links, checked before anything trains; and
`bsdemo warm --plan` storing them so the scheduler serves them at once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from bsdemo.config import ConfigError, RunConfig
from bsdemo.lecture import lab_config, load_plan
from bsdemo.scheduler import Scheduler
from bsdemo.store import RunStore
from tests.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


def plan(tmp_path, text: str) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return path


def test_a_plan_reads_lab_links_in_every_form_a_person_copies(tmp_path):
    runs = load_plan(
        plan(
            tmp_path,
            """
[[run]]
title = "SGD is slow"
link = "http://localhost:8501/training_lab?batch_size=1&epochs=1&present=1&hide=seed&run=7"
[[run]]
link = "/training_lab?batch_size=1024&lr=0.5"
[[run]]
title = "the default"
link = "epochs=2"
""",
        )
    )
    assert [t for t, _ in runs] == ["SGD is slow", "run 2", "the default"]
    assert runs[0][1] == RunConfig(batch_size=1, epochs=1).validated()[0]
    assert runs[1][1].batch_size == 1024 and runs[1][1].lr == 0.5
    assert runs[2][1].epochs == 2


def test_the_example_plan_is_valid():
    assert len(load_plan(ROOT / "examples" / "lecture.toml")) >= 3


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "plan plan.toml: got '0 [[run]] tables'; allowed: 1 to 50"),
        ("[[run", '--plan: got "Expected'),
        (
            '[[run]]\nlink = "/throughput?largest=256"',
            "run 1 (run 1) link: got '/throughput?largest=256'; allowed: a link to the Training Lab",
        ),
        (
            '[[run]]\ntitle = "big"\nlink = "/training_lab?batch_size=-4"',
            "run 1 (big) link: got '/training_lab?batch_size=-4'; allowed: valid lab settings "
            "(batch_size: got -4",
        ),
        ('[[run]]\nlink = "epochs=1"\ncolour = "red"', "run 1: got ['colour', 'link']"),
        ("[[run]]\nlink = 7", "run 1 link: got 7; allowed: a page's link, as text"),
        (
            '[[run]]\nlink = "/regimes?mini=1"',
            "run 1 (run 1) link: got 'mini=1'; allowed: valid regimes settings (mini: got '1'; "
            "allowed: a whole number from 2 to 4096)",
        ),
        (
            '[[run]]\nlink = "/lr_scaling?kk=2"',
            "run 1 (run 1) link: got 'kk'; allowed: a parameter "
            "of lr_scaling: preset, size, optimizer, ref_batch",
        ),
    ],
)
def test_a_broken_plan_names_the_run_and_what_is_allowed(tmp_path, text, message):
    with pytest.raises(ConfigError) as err:
        load_plan(plan(tmp_path, text))
    assert str(err.value).startswith(message)


def test_warm_with_a_plan_stores_its_runs_for_the_scheduler(tmp_path):
    path = plan(tmp_path, '[[run]]\ntitle = "tiny"\nlink = "/training_lab?batch_size=64&epochs=1"\n')
    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "warm", "--plan", str(path), "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("tiny: completed") and "1 runs" in out.stdout
    sched = Scheduler(workers=1, store=RunStore(tmp_path / "runs.sqlite3"))
    try:
        deadline = time.monotonic() + scaled(60)
        while sched.device_info is None and time.monotonic() < deadline:
            time.sleep(0.05)
        snap = sched.snapshot(sched.submit(RunConfig(batch_size=64, epochs=1), owner="teacher"))
        assert snap.stored_at is not None and snap.status == "completed"
    finally:
        sched.close()


def test_a_bad_plan_is_one_line_and_exit_2_before_torch(tmp_path):
    path = plan(tmp_path, '[[run]]\nlink = "/memory?largest=64"\n')
    out = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "bsdemo",
            "warm",
            "--plan",
            str(path),
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        cwd=ROOT,
    )
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if not line.startswith("import time:")]
    assert len(lines) == 1 and "run 1 (run 1) link" in lines[0]
    assert not any(line.rstrip().endswith("| torch") for line in out.stderr.splitlines())
    both = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsdemo",
            "warm",
            "--plan",
            str(path),
            "--preset",
            "digits-mlp",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        cwd=ROOT,
    )
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_a_comparison_lessons_link_is_its_runs_as_the_page_builds_them(tmp_path):
    from bsdemo import lessonlinks

    runs = load_plan(
        plan(
            tmp_path,
            """
[[run]]
title = "regimes"
link = "http://host/regimes?preset=moons-mlp&sgd=4&mini=64&epochs=2&cap=10&budget=none&present=1"
[[run]]
title = "warm-up"
link = "/lr_scaling?optimizer=adam&ref_lr=0.002&k=32&grid_epochs=3"
""",
        )
    )
    assert [t for t, _ in runs][:3] == [
        "regimes: SGD (batch 4)",
        "regimes: full batch (3200)",
        "regimes: mini-batch (64)",
    ]
    assert len(runs) == 3 + 5 and runs[3][0] == "warm-up: reference: batch 16, lr 0.002"
    sgd = runs[0][1]
    assert (sgd.dataset, sgd.batch_size, sgd.epochs, sgd.time_limit_s) == ("moons", 4, 2, 10.0)
    assert runs[5][1].lr == pytest.approx(0.064) and runs[5][1].batch_size == 512
    # what the page would submit with the same values: the very same configs
    values = {c.param: c.default for c in lessonlinks.REGIMES_CONTROLS} | {
        "preset": "moons-mlp",
        "sgd": 4,
        "mini": 64,
        "epochs": 2,
        "cap": 10,
    }
    assert [c.validated()[0] for _, c in lessonlinks.regimes_runs(values)] == [c for _, c in runs[:3]]


def test_a_lessons_scenarios_are_warmed_once_each_and_the_live_lessons_refused():
    from bsdemo.lecture import lesson_plan

    lab = lesson_plan("training_lab")
    assert [c.batch_size for _, c in lab][:3] == [1, 32, 256]
    lr = lesson_plan("lr_scaling")
    assert len(lr) == 10 and len({c for _, c in lr}) == 10
    regimes = lesson_plan("regimes")  # the SGD and full-batch runs are shared by two scenarios
    assert len(regimes) == len({c for _, c in regimes}) < 9
    with pytest.raises(ConfigError, match="--lesson: got 'memory'"):
        lesson_plan("memory")


def test_warm_a_comparison_link_and_the_page_s_comparison_is_served_at_once(tmp_path):
    from bsdemo import lessonlinks

    link = "/regimes?sgd=16&mini=128&epochs=1&cap=10"
    path = plan(tmp_path, f'[[run]]\ntitle = "three"\nlink = "{link}"\n')
    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "warm", "--plan", str(path), "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(": completed") == 3 and "3 runs" in out.stdout
    values = {c.param: c.default for c in lessonlinks.REGIMES_CONTROLS} | {
        "sgd": 16,
        "mini": 128,
        "epochs": 1,
        "cap": 10,
    }
    cfgs = [cfg for _, cfg in lessonlinks.regimes_runs(values)]  # as the page submits them
    sched = Scheduler(workers=1, store=RunStore(tmp_path / "runs.sqlite3"))
    try:
        deadline = time.monotonic() + scaled(60)
        while sched.device_info is None and time.monotonic() < deadline:
            time.sleep(0.05)
        ids = sched.submit_group(cfgs, owner="teacher")
        snaps = [sched.snapshot(i) for i in ids]
        assert all(s.status == "completed" and s.stored_at is not None for s in snaps)
        fresh = sched.submit_group(cfgs, owner="teacher", fresh=True)
        assert sched.snapshot(fresh[0]).stored_at is None  # trained again, now
        sched.cancel(fresh[0], "teacher")
    finally:
        sched.close()


def test_every_lab_scenario_is_a_valid_lab_link():
    from bsdemo.presets import LAB_SCENARIOS

    configs = [lab_config(query, name) for name, query in LAB_SCENARIOS.items()]
    assert [c.batch_size for c in configs][:3] == [1, 32, 256]
    assert configs[-1].effective_batch_size == 256  # accumulation: 8 x 32


@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "huge", "deep"])
def test_a_plan_that_is_not_a_small_regular_file_is_refused_at_once(tmp_path, kind):
    import os

    from bsdemo.lecture import MAX_PLAN_BYTES, MAX_PLAN_DEPTH

    path = tmp_path / "plan.toml"
    if kind == "device":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)  # nobody writes it: reading it would block for ever
    elif kind == "folder":
        path.mkdir()
    elif kind == "huge":
        path.write_text("# " + "x" * MAX_PLAN_BYTES)
    else:
        path.write_text("a = " + "[" * 5000 + "]" * 5000)
    with pytest.raises(ConfigError) as err:
        load_plan(path)
    assert err.value.field == "--plan"
    expected = {
        "device": "a regular file",
        "fifo": "a regular file",
        "folder": "a regular file",
        "huge": f"at most {MAX_PLAN_BYTES:,} bytes",
        "deep": f"at most {MAX_PLAN_DEPTH}",
    }
    assert expected[kind] in err.value.allowed
