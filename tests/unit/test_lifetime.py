"""Workers die with the server, a killed launcher's folder goes, job ids never repeat."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from bsdemo.lifetime import GROUP_PREFIX, remove_orphan_folders
from bsdemo.scheduler.core import IDS_PER_SECOND, first_job_id
from tests.timeouts import scaled, wait_for

SERVER = """
import sys, time
from bsdemo.config import RunConfig
from bsdemo.scheduler import Scheduler
sched = Scheduler(workers=1)
job = sched.submit(RunConfig(batch_size=1, epochs=50), owner="a")  # minutes of training
while sched.snapshot(job).latest is None:  # the worker is busy training, not idle
    sched.heartbeat("a")
    time.sleep(0.05)
print(sched.worker_pids()[0], flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its reaper is gone too
        return f.read().split(")")[-1].split()[0] != "Z"


def test_a_server_killed_outright_leaves_no_worker_even_one_busy_training():
    with subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True,
                          stderr=subprocess.DEVNULL) as server:
        try:
            worker = int(server.stdout.readline())
            assert _alive(worker)
            server.send_signal(signal.SIGKILL)
            server.wait(timeout=scaled(10))
            wait_for(lambda: not _alive(worker), timeout=10)
        finally:
            if server.poll() is None:
                server.kill()


def test_folders_of_launchers_that_are_gone_are_removed(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, timeout=scaled(30))
    dead = tmp_path / f"{GROUP_PREFIX}{int(gone.stdout)}-abc"
    live = tmp_path / f"{GROUP_PREFIX}{os.getpid()}-def"
    other = tmp_path / "unrelated-folder"
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "result-0.pickle").write_bytes(b"x")
    assert remove_orphan_folders(str(tmp_path)) == [dead]
    assert not dead.exists() and live.exists() and other.exists()


def test_job_ids_never_repeat_across_restarts():
    start = 1_800_000_000.0
    first = first_job_id(start)
    # a server that issued ids at its limit for an hour, then restarted
    last_of_old = first + 3600 * IDS_PER_SECOND - 1
    assert first_job_id(start + 3600) > last_of_old
    assert first_job_id(start + 1) > first and first < 10**12  # a link's id has 12 digits at most
