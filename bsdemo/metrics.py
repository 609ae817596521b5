"""The lab as an observability target: Prometheus metrics of the scheduler, served on
BSDEMO_METRICS_PORT at BSDEMO_METRICS_ADDRESS (default 127.0.0.1: loopback only; a scraper in
another container needs the course network's address or 0.0.0.0), by prometheus_client's own
HTTP server in the lab server's process — from its start when it was started with
`python -m bsdemo.ui.launch` (bsdemo.server).

Read at scrape time from `scheduler.metrics()` (the embedded lab's, or a course's actor through
Ray), so every replica of a course exposes the same course-wide figures. Labels are bounded:
a job kind, an end status, a worker's index: never a run id, an owner or any user string.

    bsdemo_runs_total{kind,status}            jobs ended, by kind and how they ended
    bsdemo_oom_events_total{kind}             out-of-memory results: a run's end, a sweep's point
    bsdemo_queue_wait_seconds{kind}           how long jobs waited to start (histogram)
    bsdemo_queue_length                       jobs waiting now
    bsdemo_running_jobs{kind}                 jobs running now
    bsdemo_workers                            worker processes (or a course's worker actors)
    bsdemo_job_samples_per_second{worker,kind,batch}   each running job's latest step
    bsdemo_job_peak_memory_bytes{worker,kind,batch}    ... and its peak memory in that step
    bsdemo_job_gpu_utilization_ratio{worker,kind,batch}  ... NVML's kernel-busy share, where present
    bsdemo_run_samples_per_second{batch}      the latest completed training run's, per batch

`batch` is the effective batch's power-of-two bucket (8 holds 5 to 8): at most 17 values.
    bsdemo_device_memory_bytes                the device's total memory, where known
    bsdemo_replica_info{replica}              1, naming the server that answered (a course's
                                              replicas expose the same course-wide figures)
"""

from __future__ import annotations

import ipaddress
import os
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from bsdemo.config import ConfigError

PORT_ENV = "BSDEMO_METRICS_PORT"
ADDRESS_ENV = "BSDEMO_METRICS_ADDRESS"
DEFAULT_ADDRESS = "127.0.0.1"
_started: dict[int, Any] = {}
_lock = threading.Lock()


def metrics_port(raw: str | None) -> int | None:
    """The port from BSDEMO_METRICS_PORT (None: unset or empty); ConfigError names the
    setting."""
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ConfigError(PORT_ENV, raw, "a port number from 1 to 65535")
    return int(text)


def metrics_address(raw: str | None) -> str:
    """The address from BSDEMO_METRICS_ADDRESS (default loopback): an IPv4 or IPv6 address;
    ConfigError names the setting."""
    if raw is None or not raw.strip():
        return DEFAULT_ADDRESS
    try:
        return str(ipaddress.ip_address(raw.strip()))
    except ValueError:
        raise ConfigError(
            ADDRESS_ENV,
            raw,
            "an IP address to listen on: 127.0.0.1 (this "
            "machine only, the default), the course network's, or 0.0.0.0 (all)",
        ) from None


class LabCollector:
    """Collects from `source()` (a scheduler) at each scrape; `replica` names this server."""

    def __init__(self, source: Callable[[], Any], replica: str | None = None):
        self._source = source
        self._replica = replica

    def describe(self):
        return []  # collected at scrape time: no fixed description

    def collect(self):
        if self._replica:
            info = GaugeMetricFamily(
                "bsdemo_replica_info", "The lab server that answered", labels=["replica"]
            )
            info.add_metric([self._replica], 1)
            yield info
        try:
            m = self._source().metrics()
        except Exception:  # noqa: BLE001 - a lost scheduler is a scrape with fewer metrics
            up = GaugeMetricFamily("bsdemo_scheduler_up", "Whether the scheduler answered")
            up.add_metric([], 0)
            yield up
            return
        up = GaugeMetricFamily("bsdemo_scheduler_up", "Whether the scheduler answered")
        up.add_metric([], 1)
        yield up
        tally = m["tally"]
        runs = CounterMetricFamily(
            "bsdemo_runs", "Jobs ended, by kind and how they ended", labels=["kind", "status"]
        )
        for kind, status, n in tally["ended"]:
            runs.add_metric([kind, status], n)
        yield runs
        oom = CounterMetricFamily(
            "bsdemo_oom_events",
            "Out-of-memory results: a run that ended out of memory, or a measurement's point",
            labels=["kind"],
        )
        for kind, n in sorted(tally["oom"].items()):
            oom.add_metric([kind], n)
        yield oom
        waits = HistogramMetricFamily(
            "bsdemo_queue_wait_seconds", "Seconds jobs waited in the queue before starting", labels=["kind"]
        )
        for kind, w in sorted(tally["waits"].items()):
            buckets = [("+Inf" if le == float("inf") else repr(float(le)), n) for le, n in w["buckets"]]
            waits.add_metric([kind], buckets, w["sum"])
        yield waits
        queue = GaugeMetricFamily("bsdemo_queue_length", "Jobs waiting to start")
        queue.add_metric([], m["queued"])
        yield queue
        workers = GaugeMetricFamily("bsdemo_workers", "Worker processes (a course: worker actors)")
        workers.add_metric([], m["workers"])
        yield workers
        running = GaugeMetricFamily("bsdemo_running_jobs", "Jobs running now", labels=["kind"])
        by_kind: dict[str, int] = {}
        for job in m["running"]:
            by_kind[job["kind"]] = by_kind.get(job["kind"], 0) + 1
        for kind, n in sorted(by_kind.items()):
            running.add_metric([kind], n)
        yield running
        per_job = (
            (
                "bsdemo_job_samples_per_second",
                "samples_per_sec",
                1.0,
                "Samples per second of each running job's latest recorded step",
            ),
            (
                "bsdemo_job_peak_memory_bytes",
                "peak_memory_bytes",
                1.0,
                "Peak device memory in each running job's latest recorded step",
            ),
            (
                "bsdemo_job_gpu_utilization_ratio",
                "utilization_pct",
                0.01,
                "NVML: share of time a kernel ran, each running job's latest step",
            ),
        )
        for name, field, scale, text in per_job:
            family = GaugeMetricFamily(name, text, labels=["worker", "kind", "batch"])
            for job in m["running"]:
                if job.get(field) is not None and job.get("worker") is not None:
                    family.add_metric(
                        [str(job["worker"]), job["kind"], str(job["batch"])], job[field] * scale
                    )
            yield family
        speed = GaugeMetricFamily(
            "bsdemo_run_samples_per_second",
            "Samples per second of the "
            "latest completed training run, by effective batch (a "
            "power-of-two bucket)",
            labels=["batch"],
        )
        for batch, rate in tally.get("speed", []):
            speed.add_metric([str(batch)], rate)
        yield speed
        total = (m.get("device") or {}).get("total_memory_bytes")
        if total:
            device = GaugeMetricFamily("bsdemo_device_memory_bytes", "The device's total memory")
            device.add_metric([], total)
            yield device


def registry_for(source: Callable[[], Any], replica: str | None = None) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LabCollector(source, replica))
    return registry


def serve(
    source: Callable[[], Any], port: int | None = None, address: str | None = None, replica: str | None = None
) -> int | None:
    """Serve the metrics on `port` at `address` (defaults: BSDEMO_METRICS_PORT and
    BSDEMO_METRICS_ADDRESS) once per process; the port, or None when unset. Raises ConfigError
    for a bad setting, OSError when the port is taken."""
    port = port if port is not None else metrics_port(os.environ.get(PORT_ENV))
    if port is None:
        return None
    address = address or metrics_address(os.environ.get(ADDRESS_ENV))
    with _lock:
        if port not in _started:
            _started[port] = start_http_server(port, addr=address, registry=registry_for(source, replica))
    return port
