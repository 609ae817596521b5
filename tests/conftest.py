"""Shared fixtures: one warm scheduler for the scheduler tests (workers take seconds to start)."""

from __future__ import annotations

import time

import pytest

from bsdemo.scheduler import Scheduler
from tests.timeouts import SCALE, scaled


def pytest_collection_modifyitems(items):
    """pytest-timeout's per-test limit (pyproject's timeout) scales with the test waits."""
    for item in items:
        marker = item.get_closest_marker("timeout")
        seconds = marker.args[0] if marker and marker.args else 300
        item.add_marker(pytest.mark.timeout(seconds * SCALE))


@pytest.fixture(scope="module")
def scheduler():
    sched = Scheduler(workers=1)
    deadline = time.monotonic() + scaled(60)
    while not sched.workers_ready() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sched.workers_ready(), "the worker did not start within 60 s"
    yield sched
    sched.close()
