"""Workers die with the server, a killed launcher's folder goes, job ids never repeat."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from bsdemo.lifetime import GROUP_PREFIX, remove_orphan_folders
from bsdemo.scheduler.ids import BLOCK, IDS_PER_SECOND, JobIds, clock_id
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
    with subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True, stderr=subprocess.DEVNULL
    ) as server:
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
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        timeout=scaled(30),
    )
    dead = tmp_path / f"{GROUP_PREFIX}{int(gone.stdout)}-abc"
    live = tmp_path / f"{GROUP_PREFIX}{os.getpid()}-def"
    other = tmp_path / "unrelated-folder"
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "result-0.pickle").write_bytes(b"x")
    assert remove_orphan_folders(str(tmp_path)) == [dead]
    assert not dead.exists() and live.exists() and other.exists()


def test_job_ids_never_repeat_across_restarts(tmp_path):
    counter = tmp_path / "job-ids"
    first = JobIds(counter)
    old = [first.next() for _ in range(5)]
    assert old == [1, 2, 3, 4, 5]  # short enough to read in a legend
    restarted = JobIds(counter)  # a new server, same data folder
    assert restarted.next() > max(old)
    beside = JobIds(counter)  # two at once never share a block
    assert beside.next() > restarted.next()
    for _ in range(BLOCK + 1):  # past a block: the next one is reserved, still increasing
        last = first.next()
    assert last > max(old) and len({*old, last}) == 6


def test_an_unusable_counter_falls_back_to_the_clock(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    ids = JobIds(blocker / "job-ids")  # its folder is a file
    assert ids.next() >= clock_id() - 1 and ids.next() < 10**12
    assert clock_id(1_800_000_000 + 3600) > clock_id(1_800_000_000) + 3600 * IDS_PER_SECOND - 1
