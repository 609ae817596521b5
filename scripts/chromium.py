"""What the screenshot script and the benchmarks share: the lab served on a free port, and the
headless Chromium that opens it (the machine's own, never a downloaded one)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("BSDEMO_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(proc: subprocess.Popen, port: int, seconds: float) -> bool:
    """Whether the Streamlit server `proc` answers its health check on 127.0.0.1:port within
    `seconds` (False as soon as it has exited)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def stop_group(proc: subprocess.Popen) -> None:
    """End a server we started, and its process group (its workers with it)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def start_server(port: int) -> subprocess.Popen:
    """The lab (streamlit run app.py) on 127.0.0.1:port, once its health check answers."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    if not healthy(proc, port, 60):
        stop_group(proc)
        raise RuntimeError("server did not start")
    return proc


def settled(page) -> None:
    """Wait until no script run is in flight, no element is a loading skeleton (a rerun that
    ends a job redraws the page once) and none is stale (Streamlit dims an element while a
    fragment's rerun redraws it: the sidebar's polls while the worker starts)."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " && !document.querySelector('[data-testid=\"stSkeleton\"]')"
        " && !document.querySelector('[data-stale=\"true\"]')",
        timeout=60_000,
    )
    page.wait_for_timeout(500)
