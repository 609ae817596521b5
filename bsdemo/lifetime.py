"""Processes that end with their parent, and the folders of those that were killed.

Pure Python (no torch): the scheduler's workers, the members of a process group and the pool
that replaces a killed worker all use it. On Linux a child asks the kernel to kill it when its
parent dies (PR_SET_PDEATHSIG), so a server killed outright leaves no worker training to its cap
and then blocking for ever on a pipe nobody reads; a launcher killed outright leaves no group
member. A process killed outright cannot remove its temporary folder, so each such folder
carries its owner's process id and whoever comes next removes the folders of owners now gone.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

GROUP_PREFIX = "bsdemo-group-"  # a process group's private folder: bsdemo-group-<launcher pid>-…


def die_with(parent: int) -> None:
    """Have the kernel kill this process when its parent dies (Linux), and exit now if the parent
    is already gone. Called by the child itself as it starts: a preexec_fn is unsafe in a parent
    that has threads."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def group_folder() -> tempfile.TemporaryDirectory:
    """A private temporary folder for a process group launched by this process."""
    return tempfile.TemporaryDirectory(prefix=f"{GROUP_PREFIX}{os.getpid()}-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def remove_orphan_folders(root: str | None = None) -> list[Path]:
    """Remove the group folders whose launcher is gone; returns what was removed."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"{GROUP_PREFIX}*-*"):
        pid = folder.name[len(GROUP_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and folder.is_dir() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
