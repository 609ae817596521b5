"""One factor for every wait in the tests.

BSDEMO_TEST_TIMEOUT_SCALE (default 1) multiplies each timeout a test waits up to (a job to end, a
worker to start, a page to reach a state, pytest-timeout's per-test limit), so a loaded or
one-core machine gets more time without any test changing. A timeout is a ceiling, never a
measurement: no test asserts how fast anything ran.
"""

from __future__ import annotations

import os

SCALE = float(os.environ.get("BSDEMO_TEST_TIMEOUT_SCALE", "1") or 1)


def scaled(seconds: float) -> float:
    return seconds * SCALE
