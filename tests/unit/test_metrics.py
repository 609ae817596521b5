"""The lab as an observability target: Prometheus metrics from the real scheduler's totals,
scraped by a real Prometheus server and read back through Prometheus's own HTTP API."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from bsdemo.config import ConfigError, RunConfig
from bsdemo.metrics import metrics_port, registry_for, serve
from tests.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 2 * 2**20  # batch 8 of the digits MLP fits; batch 1024 does not (a simulated OOM)


def test_the_metrics_port_setting_is_checked():
    assert metrics_port(None) is None and metrics_port(" ") is None
    assert metrics_port(" 9464 ") == 9464
    for bad in ("0", "65536", "x", "-1", "9464x", "9" * 300):
        with pytest.raises(ConfigError, match="BSDEMO_METRICS_PORT"):
            metrics_port(bad)


@pytest.fixture(scope="module")
def finished(scheduler):
    """A training run that completed and a sweep whose large batch ran out of memory."""
    cfg = RunConfig(dataset="digits", model="mlp", batch_size=32, max_steps=5)
    run = scheduler.submit(cfg, "metrics-test")
    assert scheduler.wait(run, scaled(120)).status == "completed"
    sweep = scheduler.submit(
        cfg,
        "metrics-test",
        kind="sweep",
        options={"batch_sizes": [8, 1024], "memory_budget_bytes": BUDGET, "rounds": 1, "min_timed_s": 0.0},
    )
    snap = scheduler.wait(sweep, scaled(120))
    assert snap.status == "completed"
    assert [p["status"] for p in snap.points] == ["ok", "oom"], snap.points
    return scheduler


def test_the_scheduler_s_totals_are_prometheus_metrics(finished):
    text = generate_latest(registry_for(lambda: finished)).decode()
    assert 'bsdemo_runs_total{kind="train",status="completed"} 1.0' in text
    assert 'bsdemo_runs_total{kind="sweep",status="completed"} 1.0' in text
    assert 'bsdemo_oom_events_total{kind="sweep"} 1.0' in text
    assert 'bsdemo_queue_wait_seconds_count{kind="train"} 1.0' in text
    assert "bsdemo_queue_length 0.0" in text and "bsdemo_scheduler_up 1.0" in text
    # the training run's samples/s, by its batch's bucket (32)
    assert 'bsdemo_run_samples_per_second{batch="32"}' in text
    assert "metrics-test" not in text  # no owner, run id or user string is a label value


def dashboard_queries() -> list[str]:
    board = json.loads((ROOT / "deploy" / "grafana" / "bsdemo-dashboard.json").read_text())
    return [t["expr"] for p in board["panels"] for t in p["targets"]]


def test_the_grafana_dashboard_asks_only_for_metrics_the_lab_exposes(finished):
    text = generate_latest(registry_for(lambda: finished)).decode()
    # what has samples now, and every family declared (a gauge of running jobs has none while
    # nothing runs), with a histogram's series
    exposed = set(re.findall(r"^(bsdemo_\w+)", text, re.MULTILINE))
    for name in re.findall(r"^# HELP (bsdemo_\w+)", text, re.MULTILINE):
        exposed |= {name, f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    queries = dashboard_queries()
    asked = {name for q in queries for name in re.findall(r"bsdemo_\w+", q)}
    assert len(queries) >= 8 and asked and asked <= exposed, asked - exposed
    for needed in (
        "bsdemo_run_samples_per_second",
        "bsdemo_job_peak_memory_bytes",
        "bsdemo_oom_events_total",
    ):  # throughput by batch, memory, OOM events
        assert needed in asked


def test_a_lost_scheduler_is_a_scrape_that_says_so():
    class Lost:
        def metrics(self):
            raise RuntimeError("gone")

    text = generate_latest(registry_for(lambda: Lost())).decode()
    assert "bsdemo_scheduler_up 0.0" in text and "bsdemo_runs_total" not in text


def test_a_real_prometheus_scrapes_the_runs_and_the_oom(finished):
    from tests.services import Prometheus, free_port

    port = serve(lambda: finished, port=free_port(), address="127.0.0.1")
    prometheus = Prometheus(f"127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + scaled(60)
        runs, oom = [], []
        while time.monotonic() < deadline and not (runs and oom):
            runs = prometheus.query('bsdemo_runs_total{kind="train",status="completed"}')
            oom = prometheus.query("sum(bsdemo_oom_events_total)")
            time.sleep(0.5)
        assert runs and float(runs[0]["value"][1]) == 1.0, runs
        assert oom and float(oom[0]["value"][1]) == 1.0, oom
        up = prometheus.query('up{job="bsdemo"}')
        assert float(up[0]["value"][1]) == 1.0
        for expr in dashboard_queries():  # Prometheus itself accepts every panel's query
            prometheus.query(expr)
    finally:
        prometheus.close()


def test_the_batch_label_is_a_bounded_bucket():
    from bsdemo.scheduler.tally import batch_bucket

    assert [batch_bucket(b) for b in (1, 2, 3, 5, 8, 9, 1000, 65536)] == [1, 2, 4, 8, 8, 16, 1024, 65536]
    assert len({batch_bucket(b) for b in range(1, 65537)}) == 17


def test_the_metrics_address_setting_is_checked():
    from bsdemo.metrics import metrics_address

    assert metrics_address(None) == "127.0.0.1" and metrics_address(" ") == "127.0.0.1"
    assert metrics_address(" 0.0.0.0 ") == "0.0.0.0" and metrics_address("::1") == "::1"
    for bad in ("localhost", "10.0.0.300", "x" * 5000, "0.0.0.0:9464"):
        with pytest.raises(ConfigError, match="BSDEMO_METRICS_ADDRESS"):
            metrics_address(bad)


def _listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp writes them) listening on port."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hexport = local.split(":")
        if int(hexport, 16) == port and state == "0A":  # LISTEN
            found.append(address)
    return found


def test_a_server_started_by_the_launcher_serves_metrics_before_any_browser(tmp_path):
    """`python -m bsdemo.ui.launch app.py`: /metrics answers (scheduler up, its worker, this
    replica's name) no later than the page server's health check, with no browser ever
    connecting; on loopback only, by default."""
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    from tests.services import free_port

    web, port = free_port(), free_port()
    env = {
        **os.environ,
        "BSDEMO_METRICS_PORT": str(port),
        "BSDEMO_REPLICA": "replica-7",
        "BSDEMO_DATA_DIR": str(tmp_path),
    }
    env.pop("BSDEMO_METRICS_ADDRESS", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bsdemo.ui.launch",
            str(ROOT / "app.py"),
            "--server.port",
            str(web),
            "--server.address",
            "127.0.0.1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )

    def get(url: str) -> str | None:
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                return reply.read().decode()
        except OSError:
            return None

    try:
        deadline = time.monotonic() + scaled(120)
        while time.monotonic() < deadline and get(f"http://127.0.0.1:{web}/_stcore/health") is None:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.1)
        text = get(f"http://127.0.0.1:{port}/metrics")  # already there when the pages are
        assert text is not None and "bsdemo_scheduler_up 1.0" in text
        assert 'bsdemo_replica_info{replica="replica-7"} 1.0' in text
        assert "bsdemo_workers 1.0" in text and "bsdemo_queue_length 0.0" in text
        assert _listening(port) == ["0100007F"]  # 127.0.0.1 only
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stderr.close()
