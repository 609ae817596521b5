"""Job ids that are never handed out twice, across restarts too: a link to a run from before a
restart names an id no new run gets, so it says that run is gone instead of showing somebody
else's under the old settings.

Ids come in blocks reserved from a small counter file (with an exclusive file lock, so two
servers or a test's many schedulers never share a block): the run store's folder where there is
one, else the temporary folder. Ids stay short enough to read in a legend ("#1003"). A counter
file that cannot be used falls back to ids counted from the clock (a hundred per second since
2026), unique as long as no server issued more than that over its whole life. Pure Python.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)
BLOCK = 1000  # ids reserved at a time: a restart skips at most this many
ID_EPOCH = 1_767_225_600  # 2026-01-01 UTC: the clock's ids count from here
IDS_PER_SECOND = 100


def clock_id(now: float | None = None) -> int:
    """The fallback first id: a hundred per second since ID_EPOCH."""
    return max(1, int(((now if now is not None else time.time()) - ID_EPOCH) * IDS_PER_SECOND))


def default_counter(data_dir: str | None = None) -> Path:
    folder = Path(data_dir) if data_dir else Path(tempfile.gettempdir())
    return folder / (f"bsdemo-job-ids-{os.getuid()}" if not data_dir else "job-ids")


class JobIds:
    """next() hands out increasing ids; thread-safe."""

    def __init__(self, counter: Path | None = None):
        self.counter = counter or default_counter()
        self._lock = threading.Lock()
        self._next = self._end = 0

    def next(self) -> int:
        with self._lock:
            if self._next >= self._end:
                self._next = self._reserve()
                self._end = self._next + BLOCK
            self._next += 1
            return self._next - 1

    def _reserve(self) -> int:
        """The first id of a fresh block (the counter moves past it), or a clock id."""
        try:
            self.counter.parent.mkdir(parents=True, exist_ok=True)
            with open(self.counter, "a+", encoding="ascii") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                f.seek(0)
                text = f.read().strip()
                first = int(text) if text.isdigit() else 1
                f.seek(0)
                f.truncate()
                f.write(str(first + BLOCK))
                f.flush()
                os.fsync(f.fileno())
                return first
        except (OSError, ValueError) as exc:
            log.warning("job id counter %s unusable (%s): ids from the clock", self.counter, exc)
            return max(clock_id(), self._end)
