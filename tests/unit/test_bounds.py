"""Physical bounds on timed figures: a breach is measured once more, then shown as too noisy to
read, and the lesson 10 texts make no speed claim from it."""

from __future__ import annotations

from bsdemo.bounds import in_turn, noisy_line, speedup_breach, too_noisy
from bsdemo.recipes import ddp_verdict, pipeline_verdict


def test_a_speedup_past_the_processes_is_a_breach():
    assert speedup_breach(1.9, 2, "the group") is None
    assert speedup_breach(2.15, 2, "the group") is None  # within the noise band
    assert "4.6× as fast" in speedup_breach(4.64, 2, "the group")  # the 232 %


def _outcome(generator):
    """(what in_turn yielded, what it returned)."""
    yielded = []
    try:
        while True:
            yielded.append(next(generator))
    except StopIteration as stop:
        return yielded, stop.value


def test_a_breach_is_measured_once_more_and_only_then():
    single = iter([10.0, 2.0])  # one process's step: a slow first reading, then a calm one
    calls = []

    def first():
        calls.append("single")
        return next(single)

    def second():
        calls.append("group")
        return 1.0

    def breach(a, b):
        return speedup_breach(a / b, 2, "it")

    yielded, (a, b, problem, twice) = _outcome(in_turn(first, second, breach))
    assert (a, b, problem, twice) == (2.0, 1.0, None, True) and yielded == []
    assert calls == ["single", "group", "group", "single"]  # the other way round, once
    calls.clear()
    _, (a, _, problem, twice) = _outcome(in_turn(lambda: 9.0, second, breach))
    assert twice and "9.0× as fast" in problem  # still broken: the record says so
    assert _outcome(in_turn(lambda: 1.0, second, breach))[1] == (1.0, 1.0, None, False)


def test_the_first_side_is_announced_before_the_second_is_measured():
    order = []
    gen = in_turn(
        lambda: order.append("single") or 2.0,
        lambda: order.append("group") or 1.0,
        lambda a, b: None,
        progress=lambda a: {"kind": "progress", "step": a},
    )
    assert next(gen) == {"kind": "progress", "step": 2.0} and order == ["single"]
    assert _outcome(gen) == ([], (2.0, 1.0, None, False)) and order == ["single", "group"]


DDP = {
    "processes": 2,
    "per_process_batch_size": 32,
    "global_batch_size": 64,
    "steps": 3,
    "equivalent": True,
    "max_abs_param_diff": 7.5e-9,
    "gradient_bytes": 4096,
    "allreduce_s": 0.0116,
    "step_s": 0.0144,
    "single_process_step_s": 0.113,
    "samples_per_sec": 4441.0,
    "single_process_samples_per_sec": 566.0,
    "scaling_efficiency": 3.92,
}
PIPE = {
    "stage_parameter_bytes": [100, 100],
    "stage_activation_bytes": [50, 50],
    "single_parameter_bytes": 200,
    "single_activation_bytes": 100,
    "equivalent": True,
    "max_abs_param_diff": 1e-9,
    "transfer_bytes": 32768,
    "transfer_s": 5e-5,
    "micro_batches": 4,
    "bubble": 0.29,
    "ideal_bubble": 0.2,
    "step_s": 0.0289,
    "single_process_step_s": 0.2144,
    "schedule_step_s": 0.0046,
}


def test_lesson_10_texts_never_narrate_an_impossible_ratio():
    noisy = too_noisy(speedup_breach(7.8, 2, "the group"), 0.72)
    assert "in two measurements" in noisy and "72% busy" in noisy
    text = ddp_verdict(DDP | {"too_noisy": noisy})
    assert "too noisy to read" in text and "392%" not in text and "scaling efficiency" not in text
    assert "up to float32 rounding" in text  # parameters do not depend on the load
    plain = ddp_verdict(DDP | {"scaling_efficiency": 0.8, "too_noisy": None})
    assert "a scaling efficiency of 80%" in plain and noisy_line({"too_noisy": None}) is None
    timed = ddp_verdict(
        DDP
        | {
            "scaling_efficiency": 0.8,
            "too_noisy": None,
            "clock": "thread CPU time",
            "single_process_threads": 1,
        }
    )
    assert "one member's share of the cores (1 thread)" in timed
    assert "own CPU time" in timed and "wall clock once both processes reached it" in timed
    pipe = pipeline_verdict(PIPE | {"too_noisy": too_noisy(speedup_breach(7.4, 2, "it"), None)})
    assert "too noisy to read" in pipe and "no faster" not in pipe and "214.4 ms" not in pipe
    calm = pipeline_verdict(PIPE | {"step_s": 0.3, "too_noisy": None})
    assert (
        "The pipelined step took 300.0 ms by the wall clock, one process 214.4 ms; the "
        "stages' compute, scheduled, fills 4.6 ms of it — the rest is the stages waiting on "
        "each other's messages and for the shared cores."
    ) in calm
