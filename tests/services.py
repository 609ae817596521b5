"""Real servers for the tests that need them, started here and ended by process id.

PostgreSQL: Debian's `postgresql` (initdb, pg_ctl; on PATH or in /usr/lib/postgresql/N/bin),
a cluster initialised in a temporary folder, owned and run by an unprivileged user when the
tests run as root (PostgreSQL refuses root), listening on 127.0.0.1 at a free port, trust login
for the one user `bsdemo`. The Python driver is psycopg 3 (the `cluster` extra).

nginx: Debian's `nginx`, one master and one worker process in the foreground with everything it
writes in a temporary folder: a sticky proxy in front of web replicas (cookie affinity, the
WebSocket upgraded, X-Forwarded-For appended) as a course deployment puts one.

Ray: `ray.cluster_utils.Cluster` from the `cluster` extra.

A test that needs a service the machine lacks is skipped, unless BSDEMO_REQUIRE_SERVICES names
it (comma-separated: CI sets it, so a missing install fails instead of silently skipping).
"""

from __future__ import annotations

import gc
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings

import pytest

from tests.timeouts import scaled

REQUIRED = {s.strip() for s in os.environ.get("BSDEMO_REQUIRE_SERVICES", "").split(",") if s}
RUN_AS = "nobody"  # PostgreSQL will not run as root
_databases = itertools.count(1)


def unavailable(service: str, why: str):
    """Skip the test, or fail it when the service is required (CI)."""
    if service in REQUIRED:
        pytest.fail(f"{service} is required (BSDEMO_REQUIRE_SERVICES) but {why}")
    pytest.skip(f"{service}: {why}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    return versions[-1] if versions else None


class PostgresServer:
    """One PostgreSQL server of the test's own; `url(db)` for a database on it."""

    def __init__(self):
        self.initdb, self.pg_ctl = postgres_bin("initdb"), postgres_bin("pg_ctl")
        if not (self.initdb and self.pg_ctl):
            unavailable("postgres", "initdb/pg_ctl not found (apt-get install postgresql)")
        try:
            import psycopg  # noqa: F401
        except ImportError:
            unavailable("postgres", "psycopg is not installed (pip install -e '.[cluster]')")
        self.folder = tempfile.mkdtemp(prefix="bsdemo-pg-")  # not under pytest's root-only tmp
        self.data = os.path.join(self.folder, "data")
        self.port = free_port()
        self._as_user = []
        if os.geteuid() == 0:
            user = pwd.getpwnam(RUN_AS)
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", RUN_AS, "--"]
        self._run(self.initdb, "-D", self.data, "-U", "bsdemo", "-A", "trust", "--no-sync", "-E", "UTF8")
        self.start()

    def _run(self, *argv: str) -> None:
        out = subprocess.run([*self._as_user, *argv], capture_output=True, text=True, timeout=scaled(120))
        if out.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {out.stdout[-800:]}{out.stderr[-800:]}")

    def start(self) -> None:
        self._run(
            self.pg_ctl,
            "-D",
            self.data,
            "-l",
            os.path.join(self.folder, "log"),
            "-w",
            "-t",
            str(int(scaled(60))),
            "-o",
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        )

    def stop(self) -> None:
        self._run(self.pg_ctl, "-D", self.data, "-m", "immediate", "-w", "stop")

    def processes(self) -> list[int]:
        """The postmaster's pid and those of every process it started (to freeze the server)."""
        with open(os.path.join(self.data, "postmaster.pid")) as pidfile:
            root = int(pidfile.readline())
        pids = [root]
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat) as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == root:
                pids.append(int(stat.split("/")[2]))
        return pids

    def url(self, database: str = "postgres", password: str = "") -> str:
        login = f"bsdemo:{password}" if password else "bsdemo"
        return f"postgresql://{login}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database's URL (each test its own)."""
        import psycopg

        name = f"test_{os.getpid()}_{next(_databases)}"
        with psycopg.connect(self.url(), autocommit=True) as db:
            db.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def close(self) -> None:
        try:
            self.stop()
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


class RayCluster:
    """A real Ray cluster of `nodes` nodes on this machine (ray.cluster_utils.Cluster), each
    declaring `gpus` logical GPUs (torch stays on the CPU), its files in a folder of its own;
    its head also serves Ray Client (`client_address`).
    The test process starts the nodes but never joins as a driver: replicas are subprocesses
    (`env` is what they need to join)."""

    def __init__(self, nodes: int = 2, cpus: int = 1, gpus: int = 1):
        try:
            from ray.cluster_utils import Cluster
        except ImportError:
            unavailable("ray", "ray is not installed (pip install -e '.[cluster]')")
        self.folder = tempfile.mkdtemp(prefix="bsdemo-ray-")
        os.makedirs(os.path.join(self.folder, "ray"))
        # RAY_worker_niceness=0: Ray starts its workers at nice 15 by default, so any other
        # load on the machine starves the training workers (docs/deploy.md sets it too)
        self.env = {
            "RAY_TMPDIR": self.folder,
            "RAY_AUTH_MODE": "disabled",
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_worker_niceness": "0",
            # a Ray Client's first try waits 5 s for the head to start a server for it
            # (a fresh Python process): too short on a machine the suite keeps busy
            "RAY_CLIENT_INITIAL_CONNECTION_TIMEOUT_S": str(int(scaled(15))),
        }
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)  # the nodes' processes inherit these
        try:
            client_port = free_port()
            with warnings.catch_warnings():  # Ray drops its client server's log files unclosed
                warnings.simplefilter("ignore", ResourceWarning)
                self.cluster = Cluster(
                    initialize_head=True,
                    head_node_args={
                        "num_cpus": cpus,
                        "num_gpus": gpus,
                        "include_dashboard": False,
                        "temp_dir": os.path.join(self.folder, "ray"),
                        "ray_client_server_port": client_port,
                    },
                )
                gc.collect()
            for _ in range(nodes - 1):
                self.cluster.add_node(num_cpus=cpus, num_gpus=gpus)
            self.cluster.wait_for_nodes()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.address = self.cluster.address
        self.client_address = f"ray://127.0.0.1:{client_port}"  # Ray Client, on the head
        self.env["BSDEMO_RAY_ADDRESS"] = self.address

    def client_server_logs(self, chars: int = 1500) -> str:
        """The ends of the Ray Client servers' error logs (why a client's server died)."""
        parts = []
        for path in sorted(
            glob.glob(os.path.join(self.folder, "ray", "session_2*", "logs", "ray_client_server*.err"))
        ):
            with open(path, errors="replace") as f:
                text = f.read()[-chars:].strip()
            if text:
                parts.append(f"\n--- {os.path.basename(path)}\n{text}")
        return "".join(parts)

    def node_ids(self) -> list[str]:
        return [node.node_id for node in self.cluster.list_all_nodes()]

    def close(self) -> None:
        try:
            self.cluster.shutdown()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


class TokenRayHead:
    """A one-node Ray cluster with token authentication on, as deploy/cluster/compose.yml runs
    its head: `ray start --head --block` in a process group of its own (the test process never
    joins it, so its own Ray stays as the other tests left it), ended by that group's id.
    `env` is what a process with the token needs to join it."""

    def __init__(self, token: str, cpus: int = 1):
        try:
            import ray  # noqa: F401 - only whether it is installed
        except ImportError:
            unavailable("ray", "ray is not installed (pip install -e '.[cluster]')")
        self.folder = tempfile.mkdtemp(prefix="bsdemo-raytoken-")
        port = free_port()
        self.address = f"127.0.0.1:{port}"
        self.env = {
            "RAY_TMPDIR": self.folder,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": token,
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_worker_niceness": "0",
            "BSDEMO_RAY_ADDRESS": self.address,
        }
        ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
        self.log = open(os.path.join(self.folder, "head.log"), "w")  # closed in close()
        self.process = subprocess.Popen(
            [
                ray_cli,
                "start",
                "--head",
                f"--port={port}",
                f"--num-cpus={cpus}",
                "--num-gpus=0",
                "--include-dashboard=false",
                f"--temp-dir={self.folder}/ray",
                "--block",
                "--disable-usage-stats",
            ],
            env={**os.environ, **self.env},
            start_new_session=True,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def client_server_logs(self, chars: int = 1500) -> str:
        """The end of the head's own output (what a failed test shows)."""
        with open(os.path.join(self.folder, "head.log"), errors="replace") as f:
            return "\n--- ray start --head\n" + f.read()[-chars:]

    def close(self) -> None:
        import signal

        try:
            os.killpg(self.process.pid, signal.SIGTERM)  # the head's own group: it and its children
            self.process.wait(timeout=scaled(60))
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        finally:
            self.log.close()
            shutil.rmtree(self.folder, ignore_errors=True)


NGINX_CONF = """
worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log {folder}/access.log;
  client_body_temp_path {folder}/body;
  proxy_temp_path {folder}/proxy;
  fastcgi_temp_path {folder}/fastcgi;
  uwsgi_temp_path {folder}/uwsgi;
  scgi_temp_path {folder}/scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
{upstreams}
  # cookie affinity: a browser's every request (page, static files, its WebSocket) goes to the
  # replica its cookie names; when that replica is down, to the next one
  map $cookie_{cookie} $replica {{
{routes}
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://$replica;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_read_timeout 3600s;
      proxy_connect_timeout 2s;
      add_header X-Replica $upstream_addr always;
    }}
  }}
}}
"""


class NginxProxy:
    """A real nginx in front of the replicas at `ports` (127.0.0.1): a browser whose cookie
    `cookie` holds "0", "1", … is sent to that replica, and to the next one while it is down;
    without the cookie, to the first. Each response says which replica served it (X-Replica)."""

    def __init__(self, ports: list[int], cookie: str = "bsdemo_replica"):
        self.binary = shutil.which("nginx") or next(
            (p for p in ("/usr/sbin/nginx",) if os.path.exists(p)), None
        )
        if self.binary is None:
            unavailable("nginx", "nginx not found (apt-get install nginx)")
        self.folder = tempfile.mkdtemp(prefix="bsdemo-nginx-")
        os.chmod(self.folder, 0o777)  # its worker process runs as nobody when the tests are root
        self.port = free_port()
        upstreams = "\n".join(
            f"  upstream replica_{i} {{ server 127.0.0.1:{ports[i]} max_fails=1 fail_timeout=60s; "
            + " ".join(
                f"server 127.0.0.1:{ports[(i + k) % len(ports)]} backup;" for k in range(1, len(ports))
            )
            + " }"
            for i in range(len(ports))
        )
        routes = "\n".join(f"    {'default' if i == 0 else i} replica_{i};" for i in range(len(ports)))
        conf = os.path.join(self.folder, "nginx.conf")
        with open(conf, "w") as f:
            f.write(
                NGINX_CONF.format(
                    folder=self.folder, port=self.port, cookie=cookie, upstreams=upstreams, routes=routes
                )
            )
        stderr = os.path.join(self.folder, "stderr.log")
        with open(stderr, "wb") as out:
            self.proc = subprocess.Popen(
                [self.binary, "-c", conf, "-p", self.folder], stdout=subprocess.DEVNULL, stderr=out
            )
        deadline = time.monotonic() + scaled(30)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                with open(stderr, errors="replace") as out:
                    raise RuntimeError(f"nginx exited: {out.read()[-1500:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            self.close()
            raise RuntimeError("nginx did not listen within 30 s")
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # the master ends its worker
            try:
                self.proc.wait(timeout=scaled(10))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


PROMETHEUS_CONF = """global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: bsdemo
    static_configs:
      - targets: ["{target}"]
"""


class Prometheus:
    """A real Prometheus server (Debian's `prometheus`) scraping `target` (host:port) every
    second, its data in a folder of its own, listening on 127.0.0.1 at a free port."""

    def __init__(self, target: str):
        binary = shutil.which("prometheus")
        if binary is None:
            unavailable("prometheus", "prometheus is not installed (apt-get install prometheus)")
        self.folder = tempfile.mkdtemp(prefix="bsdemo-prometheus-")
        config = os.path.join(self.folder, "prometheus.yml")
        with open(config, "w") as f:
            f.write(PROMETHEUS_CONF.format(target=target))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.folder, "log"), "w")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.folder}/data",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.close()
                unavailable("prometheus", "the server exited at start")
            try:
                if self.get("/-/ready").startswith("Prometheus"):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.close()
        unavailable("prometheus", "the server did not get ready within 60 s")

    def get(self, path: str) -> str:
        import urllib.request

        with urllib.request.urlopen(self.url + path, timeout=5) as response:
            return response.read().decode()

    def query(self, promql: str) -> list[dict]:
        """An instant query through Prometheus's own HTTP API: its result vector."""
        import json
        import urllib.parse

        body = json.loads(self.get("/api/v1/query?" + urllib.parse.urlencode({"query": promql})))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)
