"""Run records: the bounded series, field lists taken from the event classes, collect()."""

from __future__ import annotations

import dataclasses

from bsdemo.config import RunConfig
from bsdemo.events import EvalEvent, StepEvent
from bsdemo.runs import EVAL_FIELDS, STEP_FIELDS, Series, collect


def test_series_keeps_an_even_bounded_sample():
    s = Series(("step",), max_points=100)
    for i in range(1, 10_001):
        s.append({"step": i})
    steps = s.columns["step"]
    assert 50 <= len(steps) < 100
    assert steps[0] == 1
    gaps = {b - a for a, b in zip(steps, steps[1:], strict=False)}
    assert gaps == {s.stride}


def test_field_lists_are_the_event_classes_own():
    assert STEP_FIELDS == tuple(f.name for f in dataclasses.fields(StepEvent))
    assert EVAL_FIELDS == tuple(f.name for f in dataclasses.fields(EvalEvent))
    assert "samples_per_sec" in STEP_FIELDS and "test_accuracy" in EVAL_FIELDS


def test_collect_files_a_whole_run_as_the_scheduler_does():
    from bsdemo.engine.train import train

    run = collect((e.to_dict() for e in train(RunConfig(epochs=2))), max_points=50)
    assert run.start["kind"] == "start" and run.end["status"] == "completed"
    assert run.latest["step"] == run.end["summary"]["steps"] == 90
    assert len(run.steps) < 50 and run.steps.stride >= 2  # 90 steps, bounded to 50 rows
    assert run.evals.columns["test_accuracy"][-1] == run.end["summary"]["test_accuracy"]
