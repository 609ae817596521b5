"""Finished runs waiting for the run store, kept on disk: one JSON file a run in a folder of the
server's data folder, written whole (a temporary file, flushed, then renamed into place) before
the store is asked, removed once the store has the run. A server restarted while the store was
down finds them here and writes them. Pure Python: no torch, no database driver."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bsdemo.store import StoredRun, run_key

log = logging.getLogger(__name__)
SUFFIX = ".run.json"
FOLDER = "pending-runs"  # in the server's data folder (BSDEMO_DATA_DIR)


def spool_folder(data_dir: str | Path | None) -> Path | None:
    """Where the server at data_dir keeps runs waiting for the store (None: no data folder)."""
    return Path(data_dir) / FOLDER if data_dir else None


@dataclass
class PendingRun:
    """A finished run as the store will keep it (the arguments of Store.put)."""

    config: dict[str, Any]
    device: dict[str, Any]
    start: dict[str, Any] | None
    steps: dict[str, list]
    evals: dict[str, list]
    end: dict[str, Any]
    created: float  # when it was measured (kept as such in the store)
    file: Path | None = field(default=None, compare=False)  # its spool file, once written
    spooled: bool = field(default=False, compare=False)  # saving it was tried (file says how)
    saving: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def key(self, version: str) -> str:
        return run_key(self.config, self.device, version)

    def stored(self, host: str | None) -> StoredRun:
        """As the store will return it (id 0: it has none yet)."""
        return StoredRun(
            0, self.created, self.device, self.config, self.start, self.steps, self.evals, self.end, host
        )

    def record(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "device": self.device,
            "start": self.start,
            "steps": self.steps,
            "evals": self.evals,
            "end": self.end,
            "created": self.created,
        }


class Spool:
    """The folder of waiting runs. A folder that cannot be written is logged and `usable` turns
    False: the runs then wait in memory only."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.usable = True
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._unusable(exc)

    def load(self) -> list[PendingRun]:
        """The runs a previous server left waiting, oldest first (a file that cannot be read is
        left where it is and logged)."""
        runs = []
        if not self.usable:
            return runs
        for path in sorted(self.folder.glob(f"*{SUFFIX}")):
            try:
                record = json.loads(path.read_text())
                runs.append(PendingRun(**record, file=path, spooled=True))
            except (OSError, ValueError, TypeError) as exc:
                log.warning("spooled run %s could not be read (%s); left in place", path, exc)
        return runs

    def save(self, run: PendingRun) -> None:
        if not self.usable:
            return
        path = self.folder / f"{time.time_ns()}-{os.getpid()}{SUFFIX}"
        partial = path.with_suffix(".partial")
        try:
            with open(partial, "w") as out:
                json.dump(run.record(), out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, path)
            run.file = path
        except (OSError, TypeError, ValueError) as exc:
            partial.unlink(missing_ok=True)
            self._unusable(exc)

    def remove(self, run: PendingRun) -> None:
        if run.file is not None:
            try:
                run.file.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("spooled run %s could not be removed (%s)", run.file, exc)
            run.file = None

    def _unusable(self, exc: BaseException) -> None:
        self.usable = False
        log.warning(
            "the spool %s cannot be written (%s): waiting runs are kept in memory only", self.folder, exc
        )
