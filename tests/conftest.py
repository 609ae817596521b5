"""Shared fixtures: one warm scheduler for the scheduler tests (workers take seconds to start)."""

from __future__ import annotations

import time

import pytest

from bsdemo.jobs import Scheduler


@pytest.fixture(scope="module")
def scheduler():
    sched = Scheduler(workers=1)
    deadline = time.monotonic() + 60
    while not sched.workers_ready() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sched.workers_ready(), "the worker did not start within 60 s"
    yield sched
    sched.close()
