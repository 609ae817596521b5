"""A time cap that is a cap, and a Stop that stops: every job kind, at settings made to hold a
worker (wide models, huge batches, long phases between two checks), ends within its cap (or its
Stop) plus the grace, whether its engine stops on its own or the scheduler has to kill its
worker; the worker is replaced and the next job runs. A step that cannot finish within the cap
at the device's peak is refused before it is queued, naming the setting."""

from __future__ import annotations

import time

import pytest

from bsdemo.config import ConfigError, RunConfig
from bsdemo.limits import Limits
from bsdemo.scheduler import Scheduler, admission
from tests.timeouts import scaled, wait_for

CAP, GRACE = 3.0, 2.0
WIDE = {"dataset": "synthetic", "model": "mlp", "width": 1536, "depth": 6, "samples": 20000}
# (kind, settings, options): each would run for minutes without its cap
HEAVY = [
    ("train", dict(WIDE, batch_size=64, accumulation_steps=12, epochs=None, max_steps=50), {}),
    ("sweep", dict(WIDE, epochs=1), {"batch_sizes": [256, 512, 1024], "min_timed_s": 30.0}),
    ("find", dict(WIDE, epochs=1), {"memory_budget_bytes": 2**33}),
    ("accum_check", dict(WIDE, epochs=1), {"micro_batch": 64, "accum": 12, "steps": 1000}),
    ("norms", dict(WIDE, epochs=20), {"batch_sizes": [2, 4], "norms": ["batch"]}),
    # narrower: its full gradient is summed in chunks of 4,096 samples, and a chunk of the wide
    # model (213 GFLOP) was refused on a CPU whose measured peak was 63 GFLOP/s
    ("noise", dict(WIDE, width=768, epochs=1), {"batch_sizes": [256, 1024], "draws": 256}),
    # the large batch at 1,000: a step of it stays admissible on a CPU whose measured peak is
    # as low as ~20 GFLOP/s (4,000 was refused at 60); the small batch's run to its target
    # holds the worker for minutes anyway
    ("sharpness", dict(WIDE, epochs=1, lr=0.01), {"batch_sizes": [16, 1000]}),
    ("critical", dict(WIDE, epochs=1), {"batch_sizes": [1, 1000]}),
    ("fit_batch", dict(WIDE, epochs=1), {"memory_budget_bytes": 2**33}),
    ("ddp", dict(WIDE, batch_size=512, epochs=1), {"processes": 2, "steps": 200}),
    ("pipeline", dict(WIDE, batch_size=1024, epochs=1), {"micro_batches": 4, "steps": 200}),
    ("architectures", {"epochs": 1}, {"seconds": 30.0}),
]


SLOWEST_PEAK = 20e9  # FLOP/s: the lowest peak a worker measured on a loaded CI machine, with room


@pytest.mark.parametrize("kind,settings,options", HEAVY, ids=[k for k, *_ in HEAVY])
def test_every_heavy_job_is_admitted_on_a_slow_cpu(kind, settings, options):
    # each job must reach its worker wherever the suite runs, so its cap (not admission) ends it
    slow_cpu = {"type": "cpu", "peak_flops": SLOWEST_PEAK}
    admission.checked(RunConfig(**settings), kind, dict(options), Limits(max_wall_s=CAP), slow_cpu)


@pytest.fixture(scope="module")
def capped():
    sched = Scheduler(workers=1, limits=Limits(max_wall_s=CAP, stop_grace_s=GRACE, submits_per_minute=1000))
    wait_for(lambda: sched.workers_ready(), timeout=60)
    yield sched
    sched.close()


def _ran_for(snap) -> float:
    return snap.finished_at - snap.started_at


@pytest.mark.slow
@pytest.mark.parametrize("kind,settings,options", HEAVY, ids=[k for k, *_ in HEAVY])
def test_every_kind_ends_within_its_cap_and_the_next_job_runs(capped, kind, settings, options):
    job = capped.submit(RunConfig(**settings), owner="heavy", kind=kind, options=options)
    snap = capped.wait(job, timeout=scaled(120))
    assert snap.done and snap.status == "cancelled", (snap.status, snap.end)
    assert snap.ending == "time_cap" or "time cap" in snap.end["message"], snap.end["message"]
    # the kill comes at cap + grace on the scheduler's clock; a killed worker takes a moment
    assert _ran_for(snap) < CAP + GRACE + scaled(4.0), (_ran_for(snap), snap.end["message"])
    tiny = capped.wait(capped.submit(RunConfig(epochs=None, max_steps=3), owner="next"), timeout=scaled(120))
    assert tiny.status == "completed"


@pytest.mark.slow
def test_stop_takes_effect_within_the_grace_inside_a_long_phase(capped):
    pids = capped.worker_pids()
    job = capped.submit(
        RunConfig(**HEAVY[8][1]), owner="heavy", kind="fit_batch", options={"memory_budget_bytes": 2**33}
    )
    wait_for(lambda: capped.snapshot(job).status == "running", timeout=60)
    time.sleep(0.5)
    asked = time.time()
    assert capped.cancel(job, owner="heavy")
    snap = capped.wait(job, timeout=scaled(60))
    assert snap.status == "cancelled" and snap.ending != "time_cap"
    assert snap.finished_at - asked < GRACE + scaled(4.0)
    if "worker was ended" in snap.end["message"]:  # killed, not stopped on its own: replaced
        assert capped.worker_pids() != pids


def test_a_step_that_cannot_finish_within_the_cap_is_refused_before_it_is_queued(capped):
    # the link: 250 micro-batches of 64 on an 8-layer MLP of width 2048
    cfg = RunConfig(
        dataset="synthetic",
        model="mlp",
        width=2048,
        depth=8,
        samples=20000,
        batch_size=64,
        accumulation_steps=250,
        epochs=None,
        max_steps=3,
        seed=21,
    )
    with pytest.raises(ConfigError) as err:
        capped.submit(cfg, owner="heavy")
    assert err.value.field == "accumulation_steps"
    assert "time cap of 3 s" in err.value.allowed and "lower accumulation_steps" in err.value.allowed
    assert capped.active_job("heavy") is None  # nothing was queued


def test_a_job_list_that_holds_the_huge_batch_is_named(capped):
    with pytest.raises(ConfigError) as err:
        capped.submit(
            RunConfig(**dict(WIDE, width=2048, depth=8, epochs=1, lr=0.01)),
            owner="heavy",
            kind="sharpness",
            options={"batch_sizes": [16, 16000]},
        )
    assert err.value.field == "batch_sizes" and "lower the largest batch size" in err.value.allowed


def test_a_run_waiting_behind_a_measurement_is_told_which():
    from types import SimpleNamespace

    from bsdemo.scheduler.admission import EXCLUSIVE_WAIT, exclusive_wait

    running = [SimpleNamespace(kind="train", exclusive=False), SimpleNamespace(kind="ddp", exclusive=True)]
    assert exclusive_wait(running) == "a data-parallel check has the device to itself until it ends"
    assert exclusive_wait([SimpleNamespace(kind="sweep", exclusive=True)]).startswith("a throughput sweep")
    assert exclusive_wait([]) == EXCLUSIVE_WAIT
