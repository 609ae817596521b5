"""Admission device by device: a course's workers sit on several GPUs of several nodes, and a
measurement holds only its own GPU. The real Scheduler, with a pool of workers that report
devices and take jobs but never train (no torch, no processes): what starts where is all the
test looks at."""

from __future__ import annotations

import queue
import time

from bsdemo.config import RunConfig
from bsdemo.limits import Limits
from bsdemo.scheduler import Scheduler
from bsdemo.scheduler.devices import device_key
from bsdemo.scheduler.pool import Worker, WorkerPool
from tests.timeouts import scaled

GIB = 2**30
SWEEP = {"batch_sizes": [8, 64], "timed_steps": 2}


class _Up:
    pid = None

    def is_alive(self) -> bool:
        return True

    def kill(self) -> None:
        pass

    def join(self, timeout=None) -> None:
        pass


def cluster(layout: list[dict]):
    """A pool factory: one worker per entry of layout (its hello's device), none training."""

    class Devices(WorkerPool):
        def __init__(self, size: int, threads: int, limits: Limits):
            self.results, self.restarts = queue.Queue(), 0
            self.workers = [Worker(i, _Up(), None, None) for i in range(size)]
            for i, info in enumerate(layout[:size]):
                self.results.put(("hello", i, {"type": "cuda", "name": "test GPU", **info}))

        def give(self, worker: Worker, job_id: int, task: tuple) -> None:
            worker.jobs.append(job_id)

        def stop(self, index: int, job_id: int) -> None:
            pass

        def close(self) -> None:
            pass

    return Devices


def started_on(sched: Scheduler, jobs: list[int]) -> list[int | None]:
    """The worker each job runs on (None: waiting), once the scheduler has handled the hellos."""
    deadline = time.monotonic() + scaled(10)
    while sched.workers_ready() < len(sched._pool) and time.monotonic() < deadline:
        time.sleep(0.01)
    with sched._lock:
        return [sched._jobs[j].worker if sched._jobs[j].status == "running" else None for j in jobs]


def test_device_keys_tell_a_nodes_gpus_apart_and_this_machine_is_one_device():
    assert device_key(None) is None and device_key({"type": "cpu", "cores": 2}) is None
    assert device_key({"node_id": "a", "gpus": ["0"]}) == ("a", ("0",))
    assert device_key({"node_id": "a", "gpus": ["1"]}) != device_key({"node_id": "a", "gpus": ["0"]})
    assert device_key({"node_id": "b"}) == ("b", ())  # a CPU-only node: its memory is one


def test_a_measurement_holds_its_own_gpu_while_runs_go_on_on_the_others():
    """Workers 0 and 1 share node A's GPU; workers 2 and 3 hold node B's two GPUs. A sweep takes
    A's GPU (worker 0); a training run then skips worker 1 (same GPU) for worker 2; a second
    sweep takes B's other GPU alone; the next run waits, told which measurement holds the GPU."""
    layout = [{"node_id": "A", "gpus": ["0"], "total_memory_bytes": 80 * GIB}] * 2 + [
        {"node_id": "B", "gpus": [g], "total_memory_bytes": 80 * GIB} for g in ("0", "1")
    ]
    sched = Scheduler(
        workers=4,
        pool=cluster(layout),
        limits=Limits(workers=4, max_active_per_session=10, max_active_per_address=10),
    )
    try:
        started_on(sched, [])
        sweep = sched.submit(RunConfig(), owner="s1", kind="sweep", options=SWEEP)
        run = sched.submit(RunConfig(seed=1), owner="s2")  # distinct seeds: no two ride one run
        sweep2 = sched.submit(RunConfig(seed=2), owner="s3", kind="sweep", options=SWEEP)
        waiting = sched.submit(RunConfig(seed=3), owner="s4")
        assert started_on(sched, [sweep, run, sweep2, waiting]) == [0, 2, 3, None]
        why = sched.snapshot(waiting).wait_reason
        assert "has the device to itself" in why and "sweep" in why, why
        assert not sched.snapshot(run).shared_device  # alone on its GPU
    finally:
        sched.close()


def test_memory_is_admitted_against_each_gpus_own_memory():
    """Two workers on a small GPU, two on a large one: two runs that do not fit the small GPU
    together go to the small one and the large one; on one device they would have shared."""
    small = {"node_id": "A", "gpus": ["0"], "total_memory_bytes": 0}
    large = {"node_id": "B", "gpus": ["0"], "total_memory_bytes": 80 * GIB}
    probe = Scheduler(workers=4, pool=cluster([large] * 4), limits=Limits(workers=4))
    try:
        first = probe.submit(RunConfig(), owner="p")
        started_on(probe, [first])
        need = probe._jobs[first].predicted_bytes  # the cost model's prediction for this run
    finally:
        probe.close()
    # room for the two contexts and one run's prediction, not two (margin 10% by default)
    small["total_memory_bytes"] = int((2 * 512 * 2**20 + need * 1.5) / 0.9)
    sched = Scheduler(
        workers=4,
        pool=cluster([small, small, large, large]),
        limits=Limits(workers=4, max_active_per_session=10, max_active_per_address=10),
    )
    try:
        started_on(sched, [])
        one, two, three = (sched.submit(RunConfig(seed=i), owner=f"s{i}") for i in range(3))
        assert started_on(sched, [one, two, three]) == [0, 2, 3]
        assert sched.snapshot(three).shared_device and not sched.snapshot(one).shared_device
    finally:
        sched.close()
