"""The room benchmarks' server side: a lab server started on a free port (and stopped with its
workers), and the threads that sample its CPU time and its health while a room presses Run.
Shared by bench/room_bench.py, bench/class_bench.py and bench/class_sweep_bench.py."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.chromium import free_port, healthy, stop_group  # noqa: E402,F401 - free_port, stop_group: the room benchmarks'

HEALTH_EVERY_S = 0.5
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ----- the server -----
def start_server(port: int, data_dir: str, flags: list[tuple[str, str]], log: Path) -> subprocess.Popen:
    """`streamlit run app.py` in its own process group; returns once /_stcore/health answers."""
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(ROOT / "app.py"),
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
    ]
    for key, value in flags:
        cmd += [f"--{key}", value]
    env = dict(os.environ, BSDEMO_DATA_DIR=data_dir, BSDEMO_TRUSTED_PROXIES="127.0.0.1")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    if healthy(proc, port, 60):
        return proc
    stop_group(proc)
    raise RuntimeError(f"the server did not start; its log:\n{log.read_text()[-2000:]}")


# ----- what the server costs: CPU and health, sampled in threads -----
def _stat(pid: int) -> tuple[int, float, float] | None:
    """(ppid, own CPU s, reaped children's CPU s) of a process, from /proc/PID/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text.rpartition(")")[2].split()
    return (
        int(rest[1]),
        (int(rest[11]) + int(rest[12])) / CLK_TCK,
        (int(rest[13]) + int(rest[14])) / CLK_TCK,
    )


class CpuSampler(threading.Thread):
    """The server process's CPU time, and its descendants' (the workers'), every 0.5 s: the
    last value seen for each descendant is kept, so one that ends (a replaced worker) still
    counts, as does what the server reaped (its children's cutime)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.stop, self.lock = pid, threading.Event(), threading.Lock()
        self.web = self.reaped = 0.0
        self.kids: dict[int, float] = {}
        self.sample()

    def sample(self) -> None:
        with self.lock:
            self._sample()

    def _sample(self) -> None:
        own = _stat(self.pid)
        if own is None:
            return
        self.web, self.reaped = own[1], own[2]
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (st := _stat(int(entry))) is not None:
                parents[int(entry)] = st[0]
        tree, grew = {self.pid}, True
        while grew:
            grew = False
            for pid, ppid in parents.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree - {self.pid}:
            if (st := _stat(pid)) is not None:
                self.kids[pid] = st[1] + st[2]

    def totals(self) -> tuple[float, float]:
        """(web process CPU s, workers' CPU s) so far."""
        with self.lock:
            return self.web, self.reaped + sum(self.kids.values())

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.sample()


class HealthProber(threading.Thread):
    """GET /_stcore/health every 0.5 s; latencies in ms (a failure counts as its timeout)."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.url, self.stop = f"http://127.0.0.1:{port}/_stcore/health", threading.Event()
        self.since = float("inf")  # time.monotonic() from which latencies count (the room's)
        self.latencies_ms: list[float] = []
        self.failures = 0

    def run(self) -> None:
        while not self.stop.is_set():
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    response.read()
            except OSError:
                self.failures += 1 if time.monotonic() >= self.since else 0
            if time.monotonic() >= self.since:
                self.latencies_ms.append((time.perf_counter() - t) * 1e3)
            self.stop.wait(max(0.0, HEALTH_EVERY_S - (time.perf_counter() - t)))
