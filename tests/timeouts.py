"""One factor for every wait in the tests.

BSDEMO_TEST_TIMEOUT_SCALE (default 1) multiplies each timeout a test waits up to (a job to end, a
worker to start, a page to reach a state, pytest-timeout's per-test limit), so a loaded or
one-core machine gets more time without any test changing. A timeout is a ceiling, never a
measurement: no test asserts how fast anything ran.
"""

from __future__ import annotations

import os
import time

SCALE = float(os.environ.get("BSDEMO_TEST_TIMEOUT_SCALE", "1") or 1)


def scaled(seconds: float) -> float:
    return seconds * SCALE


def wait_for(predicate, timeout: float = 30.0):
    """Poll predicate until it returns something true (returned), for at most scaled(timeout)."""
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met in time")
