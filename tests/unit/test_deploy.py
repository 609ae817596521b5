"""The deployment's contract, checked without a Docker engine (none runs on these machines):
the Dockerfile, docker-compose.yml, the shared install script and the production config."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def final_stage(dockerfile: str) -> list[str]:
    """Instructions of the last FROM stage, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", dockerfile)
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    starts = [i for i, line in enumerate(lines) if line.upper().startswith("FROM ")]
    return lines[starts[-1] :]


def test_dockerfile_runs_as_non_root_with_healthcheck_and_port():
    text = (ROOT / "Dockerfile").read_text()
    stage = final_stage(text)
    users = [line.split()[1] for line in stage if line.upper().startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), "the runtime stage must drop root"
    health = [line for line in stage if line.upper().startswith("HEALTHCHECK ")]
    assert health and "/_stcore/health" in health[0]
    assert any(line.upper() == "EXPOSE 8501" for line in stage)
    cmd = [line for line in stage if line.upper().startswith("CMD ")][-1]
    # `streamlit run` through the launcher, which starts the scheduler and metrics first
    assert "bsdemo.ui.launch" in cmd and "app.py" in cmd and "8501" in cmd
    assert stage[0].split()[1].startswith("python:") and "slim" in stage[0]


def test_dockerfile_and_makefile_install_the_same_way():
    docker = (ROOT / "Dockerfile").read_text()
    make = (ROOT / "Makefile").read_text()
    assert "scripts/install.sh" in docker and "scripts/install.sh" in make
    assert re.search(r"scripts/install\.sh \S+ \"\$TORCH_REQUIREMENT\" app", docker)
    assert re.search(r"scripts/install\.sh \$\(BIN\)/pip \"\$\(TORCH\)\" dev", make)
    script = (ROOT / "scripts/install.sh").read_text()
    assert script.startswith("#!/bin/sh") and "set -eu" in script
    assert (ROOT / "scripts/install.sh").stat().st_mode & 0o111, "install.sh must be executable"


def _install_plan(
    index: str, torch_req: str = "", nvidia: bool = False, tmp_path=None, extras: str = "", mode: str = "dev"
) -> str:
    """What scripts/install.sh would do (its dry run), with or without an nvidia-smi on PATH."""
    import subprocess

    bindir = tmp_path / ("with" if nvidia else "without")
    bindir.mkdir(exist_ok=True)
    if nvidia:
        (bindir / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
        (bindir / "nvidia-smi").chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "BSDEMO_INSTALL_DRY_RUN": "1"}
    out = subprocess.run(
        ["/bin/sh", str(ROOT / "scripts/install.sh"), "/venv/bin/pip", torch_req, mode, index, extras],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if out.returncode != 0:
        raise ValueError(f"exit {out.returncode}: {out.stderr}")
    return out.stdout


def test_install_takes_the_projects_torch_range_and_the_cpu_build_without_a_driver(tmp_path):
    import os
    import platform

    rng = re.search(r'"(torch[<>=][^"]*)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert "<" in rng and ">=" in rng, "the torch range needs a floor and an upper bound"
    ci = (ROOT / ".ci/run").read_text()
    pinned = re.search(r'TORCH="torch==([\d.]+)"', ci).group(1)
    low, high = re.search(r">=([\d.]+),<([\d.]+)", rng).groups()
    as_tuple = lambda v: tuple(int(x) for x in v.split("."))
    assert as_tuple(low) <= as_tuple(pinned) < as_tuple(high), "CI's pin must lie in the range"
    assert "TORCH_INDEX=default" in ci, "CI takes its pinned build from pip's configured index"

    with_driver = _install_plan("auto", nvidia=True, tmp_path=tmp_path)
    assert f"install --quiet --no-cache-dir {rng}" in with_driver and "--index-url" not in with_driver
    assert "NVIDIA driver is present" in with_driver
    if platform.system() == "Linux" and not os.path.exists("/proc/driver/nvidia/version"):
        without = _install_plan("auto", tmp_path=tmp_path)
        assert "--index-url https://download.pytorch.org/whl/cpu " + rng in without
        assert "no NVIDIA driver found" in without and "-e .[dev]" in without
    pinned_plan = _install_plan("default", "torch==2.13.0", tmp_path=tmp_path)
    assert "no-cache-dir torch==2.13.0" in pinned_plan and "--index-url" not in pinned_plan


def test_the_cluster_extra_brings_postgresqls_driver_and_ci_installs_it(tmp_path):
    """EXTRAS reach pip as extras (dev and app installs alike; Makefile, Dockerfile and CI pass
    them); the cluster extra is PostgreSQL's driver; a malformed EXTRAS is refused."""
    toml = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^cluster = \["psycopg\[binary\]>=3', toml, re.M)
    assert "-e .[dev,cluster]" in _install_plan("default", extras="cluster", tmp_path=tmp_path)
    assert "-e .[dev]" in _install_plan("default", tmp_path=tmp_path)
    app = _install_plan("default", extras="cluster", mode="app", tmp_path=tmp_path)
    assert "--no-cache-dir .[cluster]" in app
    with pytest.raises(ValueError, match="exit 2.*EXTRAS"):
        _install_plan("default", extras="cluster;rm", tmp_path=tmp_path)
    assert '"$(EXTRAS)"' in (ROOT / "Makefile").read_text()
    assert '"$EXTRAS"' in (ROOT / "Dockerfile").read_text()
    ci = (ROOT / ".ci/run").read_text()
    assert "EXTRAS=cluster" in ci and "postgresql" in ci and "BSDEMO_REQUIRE_SERVICES" in ci
    assert "need+=(nginx)" in ci and "postgres,ray,nginx" in ci  # the course's browser test


def test_dockerfile_copies_what_the_app_needs():
    stage = " ".join(final_stage((ROOT / "Dockerfile").read_text()))
    for path in ("app.py", "pages", ".streamlit", "assets"):
        assert re.search(rf"COPY \S* ?{re.escape(path)} ", stage + " "), path
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_compose_reserves_the_gpu_restarts_and_keeps_the_run_store():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    lab = compose["services"]["lab"]
    assert lab["restart"] in ("unless-stopped", "always")
    devices = lab["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    volume, target = lab["volumes"][0].split(":")
    assert volume in compose["volumes"] and target == lab["environment"]["BSDEMO_DATA_DIR"]
    assert "8501:8501" in lab["ports"]


def test_production_streamlit_settings():
    config = tomllib.loads((ROOT / ".streamlit/config.toml").read_text())
    assert config["server"]["headless"] is True
    assert config["server"]["fileWatcherType"] == "none"
    assert config["server"]["enableXsrfProtection"] is True
    assert config["browser"]["gatherUsageStats"] is False
    assert config["client"]["showErrorDetails"] == "type"
    # a full collection after every script run (fragment polls too) held a room's web process
    assert config["runner"]["postScriptGC"] is False


def test_healthcheck_command_is_valid_python():
    stage = final_stage((ROOT / "Dockerfile").read_text())
    health = next(line for line in stage if line.upper().startswith("HEALTHCHECK "))
    exec_form = health[health.index("CMD") + 3 :].strip()
    argv = yaml.safe_load(exec_form)  # the JSON exec form
    assert argv[:2] == ["python", "-c"]
    compile(argv[2], "<healthcheck>", "exec")
    assert shlex.split(" ".join(shlex.quote(a) for a in argv)) == argv


def test_datasets_are_fetched_at_build_time_as_the_app_user():
    stage = final_stage((ROOT / "Dockerfile").read_text())
    user_at = max(i for i, line in enumerate(stage) if line.upper().startswith("USER "))
    fetch_at = next(i for i, line in enumerate(stage) if "bsdemo datasets fetch" in line)
    assert fetch_at > user_at
    assert any("BSDEMO_DATASETS_DIR=/opt/datasets" in line for line in stage)


def test_compose_environment_is_settings_the_server_accepts():
    """Every limit the compose file sets loads as the server would load it (no typo'd knob)."""
    from bsdemo.limits import Limits

    env = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["lab"]["environment"]
    limits = Limits.load({k: str(v) for k, v in env.items()})
    assert limits.workers == int(env["BSDEMO_WORKERS"])
    assert limits.memory_margin == float(env["BSDEMO_MEMORY_MARGIN"])
    unknown = set(env) - {f"BSDEMO_{name.upper()}" for name in vars(limits)} - {"BSDEMO_DATA_DIR"}
    assert not unknown, unknown


def test_every_data_file_of_the_package_is_installed_with_it():
    """The image installs bsdemo with pip: a data file (the quiz's questions) not declared as
    package data would be missing there while every test from the checkout still passed."""
    import fnmatch

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "bsdemo"
    ]
    files = [
        p.relative_to(ROOT / "bsdemo").as_posix()
        for p in (ROOT / "bsdemo").rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert files, "the quiz's questions live in bsdemo/"
    missing = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in declared)]
    assert missing == [], f"not in [tool.setuptools.package-data]: {missing}"


def test_the_course_compose_file_wires_replicas_ray_and_postgresql_together():
    """deploy/cluster/compose.yml: a sticky proxy the replicas trust, replicas that join the Ray
    head and the database with settings the server accepts, GPU nodes with a GPU each, one
    image with the cluster extra, workers at normal priority, the runs on a volume."""
    from bsdemo.cluster import ray_address
    from bsdemo.limits import Limits
    from bsdemo.store import database_url

    compose = yaml.safe_load((ROOT / "deploy/cluster/compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"proxy", "docker-api", "lab", "ray-head", "gpu-node", "db"}
    lab, proxy = services["lab"], services["proxy"]
    env = {k: str(v) for k, v in lab["environment"].items()}
    assert ray_address(env["BSDEMO_RAY_ADDRESS"]) == "ray-head:6379"
    assert database_url(env["BSDEMO_DATABASE_URL"]).endswith("@db:5432/bsdemo")
    Limits.load(
        {
            k: v
            for k, v in env.items()
            if k.startswith("BSDEMO_")
            and k
            not in (
                "BSDEMO_RAY_ADDRESS",
                "BSDEMO_DATABASE_URL",
                "BSDEMO_TRUSTED_PROXIES",
                "BSDEMO_PUBLIC_URL",
                "BSDEMO_CLASS_PASSWORD",
            )
        }
    )
    assert env["BSDEMO_TRUSTED_PROXIES"] == proxy["networks"]["edge"]["ipv4_address"]
    labels = "\n".join(lab["labels"])
    assert "loadbalancer.sticky.cookie=true" in labels and "server.port=8501" in labels
    assert "ray start --address=ray-head:6379 --num-cpus=0" in lab["command"][-1]
    assert "exec python -m bsdemo.ui.launch app.py" in lab["command"][-1]
    for name in ("lab", "ray-head", "gpu-node"):
        service = services[name]
        assert service["build"]["args"]["EXTRAS"] == "cluster", name
        assert service["environment"]["RAY_worker_niceness"] == "0", name
    head, node = services["ray-head"], services["gpu-node"]
    assert "--head" in head["command"] and "--num-cpus=0" in head["command"]
    gpu = node["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["driver"] == "nvidia" and gpu["count"] == 1
    assert "--num-gpus=1" in node["command"][-1]
    volume, target = services["db"]["volumes"][0].split(":")
    assert volume in compose["volumes"] and target == "/var/lib/postgresql/data"
    assert (ROOT / "deploy/cluster/kubernetes.md").exists()


def test_the_course_has_no_default_password_and_tls_for_the_open_internet():
    """The course's database password must be given (no fallback an attacker could guess), and
    deploy/cluster/tls.yml puts the proxy on HTTPS: a Let's Encrypt certificate for LAB_DOMAIN,
    plain HTTP redirected, the replicas' join links on https."""
    text = (ROOT / "deploy/cluster/compose.yml").read_text()
    assert "change-me" not in text and ":-" not in text.split("POSTGRES_PASSWORD")[-1][:3]
    assert text.count("${POSTGRES_PASSWORD:?") == 2
    tls = yaml.safe_load((ROOT / "deploy/cluster/tls.yml").read_text())
    command = "\n".join(tls["services"]["proxy"]["command"])
    assert "--entrypoints.websecure.address=:443" in command
    assert "redirections.entrypoint.to=websecure" in command
    assert "acme.email=${ACME_EMAIL:?" in command and "acme.tlschallenge=true" in command
    labels = "\n".join(tls["services"]["lab"]["labels"])
    assert "Host(`${LAB_DOMAIN:?" in labels and "tls.certresolver=le" in labels
    assert tls["services"]["lab"]["environment"]["BSDEMO_PUBLIC_URL"].startswith("https://${LAB_DOMAIN")
    assert "deploy/cluster/tls.yml" in (ROOT / "docs/deploy.md").read_text()


# ----- exposure: what a stranger on the internet can reach -----
COMPOSE_FILES = ("docker-compose.yml", "deploy/cluster/compose.yml", "deploy/cluster/tls.yml")
# Ray's ports (GCS, client server, dashboard, its nodes' defaults), PostgreSQL's, the metrics'
INNER_PORTS = {6379, 10001, 8265, 8076, 52365, 5432, 9100}
SOCKET = "/var/run/docker.sock"
SECRETS = ("PASSWORD", "TOKEN")


def exposure(compose: dict, text: str) -> list[str]:
    """What in one compose file lets a stranger in: a published Ray, database or metrics port;
    the Docker socket mounted where it is more than a read-only API on an internal network, or
    in a service that publishes a port; a secret with a default ("${X:-y}" or a literal);
    Ray without token authentication; Ray or the database on a network that is not internal."""
    found = []
    services = compose.get("services", {})
    networks = compose.get("networks", {}) or {}
    for name, service in services.items():
        published = []
        for port in service.get("ports", []) or []:
            spec = str(port).split("/")[0]
            target = int(spec.rsplit(":", 1)[-1]) if spec.rsplit(":", 1)[-1].isdigit() else None
            published.append(target)
            if target in INNER_PORTS:
                found.append(f"{name} publishes port {target}")
        mounts = [str(v) for v in service.get("volumes", []) or []]
        if any(SOCKET in m for m in mounts):
            env = service.get("environment", {}) or {}
            own = service.get("networks", []) or []
            own = list(own) if isinstance(own, list) else list(own)
            if published:
                found.append(f"{name} mounts the Docker socket and publishes a port")
            if str(env.get("POST", "1")) != "0" or not all(m.endswith(":ro") for m in mounts if SOCKET in m):
                found.append(f"{name} mounts the Docker socket with writes allowed")
            if not own or any(not (networks.get(n) or {}).get("internal") for n in own):
                found.append(f"{name} mounts the Docker socket on a network that is not internal")
        env = service.get("environment", {}) or {}
        for key, value in env.items() if isinstance(env, dict) else []:
            # a secret comes from the operator: required (${X:?…}), or off when unset (${X:-},
            # the class password); never a value written here or a default one
            if (
                any(word in key for word in SECRETS)
                and value is not None
                and not (str(value).startswith("${") and ":-" not in str(value).replace(":-}", ""))
            ):
                found.append(f"{name}: {key} has a default")
        command = " ".join(map(str, service.get("command", []) or []))
        if "ray start" in command or service.get("command", [None])[0] == "ray":
            if env.get("RAY_AUTH_MODE") != "token" or not str(env.get("RAY_AUTH_TOKEN", "")).startswith(
                "${RAY_AUTH_TOKEN:?"
            ):
                found.append(f"{name} runs Ray without token authentication")
        image = str(service.get("image", ""))
        if "ray start" in command and "--head" not in command and "bsdemo.ui.launch" in command:
            continue  # a replica: on the proxy's network too, by design
        if ("ray" in command.split()[:1] or "postgres" in image) and networks:
            own = service.get("networks", []) or []
            if any(not (networks.get(n) or {}).get("internal") for n in own):
                found.append(f"{name} is on a network that is not internal")
    for match in re.finditer(r"\$\{(\w*(?:PASSWORD|TOKEN)\w*):-[^}]", text):
        found.append(f"{match.group(1)} has a default")
    if "change-me" in text:
        found.append("a default password: change-me")
    return found


@pytest.mark.parametrize("path", COMPOSE_FILES)
def test_no_compose_file_lets_a_stranger_in(path):
    """No published Ray, database or metrics port, no Docker socket on the internet-facing proxy
    (only a read-only API on an internal network), no secret with a default, Ray with token
    authentication, Ray and the database only on the internal network."""
    text = (ROOT / path).read_text()
    assert exposure(yaml.safe_load(text), text) == []


def test_the_exposure_check_finds_each_way_in():
    """The check above can fail: a course file with each hole put back is caught for each."""
    text = (ROOT / "deploy/cluster/compose.yml").read_text()
    compose = yaml.safe_load(text)
    services = compose["services"]
    services["ray-head"]["ports"] = ["6379:6379"]
    services["proxy"]["volumes"] = [SOCKET + ":" + SOCKET]
    services["docker-api"]["environment"]["POST"] = "1"
    services["gpu-node"]["environment"]["RAY_AUTH_MODE"] = "disabled"
    services["db"]["environment"]["POSTGRES_PASSWORD"] = "change-me"
    compose["networks"]["course"]["internal"] = False
    found = "\n".join(exposure(compose, text + "\n# ${RAY_AUTH_TOKEN:-x}"))
    for hole in (
        "ray-head publishes port 6379",
        "proxy mounts the Docker socket and publishes",
        "docker-api mounts the Docker socket with writes allowed",
        "gpu-node runs Ray without token authentication",
        "db: POSTGRES_PASSWORD has a default",
        "RAY_AUTH_TOKEN has a default",
        "ray-head is on a network that is not internal",
    ):
        assert hole in found, (hole, found)


def test_every_ray_process_of_the_course_proves_the_token():
    """The head, the GPU nodes and the replicas (Ray drivers) all run with token authentication
    from one secret the operator must give; docs/deploy.md says what each secret guards."""
    compose = yaml.safe_load((ROOT / "deploy/cluster/compose.yml").read_text())
    for name in ("lab", "ray-head", "gpu-node"):
        env = compose["services"][name]["environment"]
        assert env["RAY_AUTH_MODE"] == "token", name
        assert env["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?"), name
    assert "ports" not in compose["services"]["ray-head"]
    assert compose["networks"]["course"]["internal"] is True
    docs = (ROOT / "docs/deploy.md").read_text()
    security = docs.split("## Security", 1)[1].split("\n## ", 1)[0]
    for word in (
        "RAY_AUTH_TOKEN",
        "POSTGRES_PASSWORD",
        "BSDEMO_CLASS_PASSWORD",
        "BSDEMO_METRICS_ADDRESS",
        "docker-api",
        "tls.yml",
    ):
        assert word in security, word
