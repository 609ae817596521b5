"""A course on a Ray cluster: every web replica talks to one scheduler actor, so queue, limits
and runs are the same whichever replica a student lands on. A real two-node Ray cluster on this
machine (tests/services.py); each replica is a process of its own that joins it as Ray does in a
deployment, and may exit (die) while its runs go on."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bsdemo.cluster import ray_address
from bsdemo.config import ConfigError
from tests.timeouts import scaled

# A replica: join the cluster (creating the scheduler actor with this process's limits if none
# exists), do the steps given as JSON, print what it saw as one JSON line.
REPLICA = r"""
import json, os, sys, time
from bsdemo.cluster.actor import connect
from bsdemo.config import RunConfig
from bsdemo.limits import Limits
from bsdemo.scheduler import ActiveRunError

steps = json.loads(sys.argv[1])
sched = connect(os.environ["BSDEMO_RAY_ADDRESS"], Limits.load(), 1, None,
                os.environ.get("BSDEMO_DATABASE_URL"))
seen = {"where": sched.where(), "pid": os.getpid()}
attended = set()  # the owners whose pages this replica keeps open (heartbeats while it waits)


def until(job, timeout, done):
    deadline = time.monotonic() + timeout
    while True:
        for owner in attended:
            sched.heartbeat(owner)
        snap = sched.snapshot(job)
        if done(snap) or time.monotonic() > deadline:
            return snap
        time.sleep(0.1)


for step in steps:
    attended.update(step.get("attend", []))
    op = step["op"]
    if isinstance(step.get("job"), str):  # a job this replica submitted in an earlier step
        step["job"] = seen[step["job"]]
    try:
        if op == "submit":
            cfg = RunConfig(epochs=None, max_steps=step.get("steps", 3),
                            time_limit_s=step.get("cap", 600.0))
            seen[step["as"]] = sched.submit(cfg, owner=step["owner"], address=step["address"],
                                            fresh=step.get("fresh", True),
                                            kind=step.get("kind", "train"),
                                            options=step.get("options"))
            if not step.get("unattended"):
                attended.add(step["owner"])
        elif op == "metrics":  # what a replica's Prometheus endpoint serves (bsdemo.metrics)
            from prometheus_client import generate_latest
            from bsdemo.metrics import registry_for
            seen[step["as"]] = generate_latest(registry_for(lambda: sched)).decode()
        elif op == "load":
            seen[step["as"]] = sched.load()
        elif op == "wait":
            snap = until(step["job"], step["timeout"], lambda snap: snap.done)
            seen[step["as"]] = {"status": snap.status, "loss": snap.steps["loss"],
                                "stored_at": snap.stored_at, "owner": snap.owner,
                                "node": snap.node, "message": (snap.end or {}).get("message"),
                                "result": snap.result}
        elif op == "snapshot":
            snap = sched.snapshot(step["job"])
            seen[step["as"]] = {"status": snap.status, "owner": snap.owner, "node": snap.node,
                                "why": snap.wait_reason, "ready": sched.workers_ready()}
        elif op == "running":  # wait until the job has taken a step (it is on a node)
            snap = until(step["job"], step["timeout"],
                         lambda snap: snap.done or snap.status == "running" and snap.steps["step"])
            seen[step["as"]] = {"status": snap.status, "node": snap.node}
        elif op == "measuring":  # wait until a measurement has filed its first record
            snap = until(step["job"], step["timeout"],
                         lambda snap: snap.done or snap.status == "running" and snap.points)
            seen[step["as"]] = {"status": snap.status, "points": len(snap.points)}
        elif op == "cancel":
            seen[step["as"]] = sched.cancel(step["job"], step["owner"])
        elif op == "actors":  # the cluster's live actors (Ray's own table)
            import ray._private.state as state
            seen[step["as"]] = sorted(a.get("ActorClassName") or "?" for a in state.actors().values()
                                      if a.get("State") == "ALIVE")
        elif op == "members":  # the nodes a group's member actors ran on (Ray's own table)
            import ray._private.state as state
            seen[step["as"]] = [(a.get("State"), a.get("Address", {}).get("NodeID"))
                                for a in state.actors().values()
                                if "GroupMember" in (a.get("ActorClassName") or "")]
        elif op == "shutdown":
            import ray
            from bsdemo.cluster import ACTOR_NAME, NAMESPACE
            ray.get(sched.actor.shutdown.remote())
            ray.kill(sched.actor)
            time.sleep(0.5)
            import ray._private.state as state
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # a killed actor is marked dead within moments
                alive = [a.get("ActorClassName") for a in state.actors().values()
                         if a.get("State") not in ("DEAD",)]
                if not alive:
                    break
                time.sleep(0.2)
            seen["left_behind"] = alive
    except ActiveRunError as exc:
        seen[step["as"]] = {"refused": str(exc)}
print(json.dumps(seen, default=str))
"""


def replica(cluster, steps: list[dict], **env) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", REPLICA, json.dumps(steps)],
        capture_output=True,
        text=True,
        timeout=scaled(240),
        env={**os.environ, **cluster.env, **env},
    )
    assert out.returncode == 0, out.stderr[-3000:] + cluster.client_server_logs()
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ray_cluster():
    from tests.services import RayCluster

    cluster = RayCluster(nodes=2)
    yield cluster
    cluster.close()


def test_the_ray_address_setting_is_checked():
    assert ray_address(None) is None and ray_address(" ") is None
    assert ray_address("auto") == "auto" and ray_address(" head-0.lab:6379 ") == "head-0.lab:6379"
    assert ray_address("ray://head:10001") == "ray://head:10001"  # Ray Client
    for bad in ("ray://head", "ray://", "http://head:6379", "head", "a b:1", "x" * 300):
        with pytest.raises(ConfigError, match="BSDEMO_RAY_ADDRESS"):
            ray_address(bad)


def test_a_ray_client_whose_server_died_starting_is_tried_again(monkeypatch):
    """Through Ray Client the head starts a server process per client; one that dies starting
    (a busy head) is tried again, up to three times; other failures, and any failure at a
    cluster address that is not Ray Client, end at once as ClusterUnreachable."""
    from bsdemo.cluster import actor

    calls = []

    def fails(times, exc):
        def init(**kwargs):
            calls.append(kwargs["address"])
            if len(calls) <= times:
                raise exc

        return init

    monkeypatch.setattr(actor.time, "sleep", lambda s: None)
    died = ConnectionAbortedError(
        "Initialization failure from server: Starting Ray client "
        "server failed. See ray_client_server_23000.err"
    )
    monkeypatch.setattr(actor.ray, "init", fails(2, died))
    actor.join("ray://head:10001")
    assert calls == ["ray://head:10001"] * 3
    for address, exc, tries in (
        ("ray://head:10001", died, 3),
        ("ray://head:10001", ConnectionError("refused"), 1),
        ("head:6379", died, 1),
    ):
        calls.clear()
        monkeypatch.setattr(actor.ray, "init", fails(99, exc))
        with pytest.raises(actor.ClusterUnreachable, match=type(exc).__name__):
            actor.join(address)
        assert len(calls) == tries


def test_two_replicas_share_one_queue_one_set_of_limits_and_the_store(ray_cluster, postgres_url):
    """Replica A creates the course's scheduler (one run per address), queues a run and exits;
    replica B, another process that reaches the cluster through Ray Client, sees that run in
    the queue and its owner, is refused a second run from the same address but not from
    another, and gets A's run whole when it finishes;
    a third replica asking for the same run is served it from the shared store. Then the
    scheduler is shut down and no actor is left behind."""
    limits = {"BSDEMO_MAX_ACTIVE_PER_ADDRESS": "1", "BSDEMO_DATABASE_URL": postgres_url}
    a = replica(
        ray_cluster,
        [{"op": "submit", "as": "job", "owner": "student-a", "address": "10.0.0.7", "steps": 400_000}],
        **limits,
    )
    # (minutes of training: still going while B connects, however long Ray Client takes to
    # start B's server, and asks; B stops it when it has seen what it came for)
    assert a["where"]["node_id"] in ray_cluster.node_ids()
    job = a["job"]
    b = replica(
        ray_cluster,
        [  # student A's page reconnects here: B keeps it attended
            {"op": "snapshot", "as": "a_job", "job": job, "attend": ["student-a"]},
            {"op": "submit", "as": "same_address", "owner": "student-b", "address": "10.0.0.7"},
            {"op": "submit", "as": "other_address", "owner": "student-b", "address": "10.0.0.8"},
            {"op": "running", "as": "a_running", "job": job, "timeout": scaled(120)},
            {"op": "cancel", "as": "a_stopped", "job": job, "owner": "student-a"},
            {"op": "wait", "as": "a_done", "job": job, "timeout": scaled(120)},
        ],
        BSDEMO_RAY_ADDRESS=ray_cluster.client_address,
    )  # B stays outside: Ray Client
    assert b["where"] == a["where"]  # one scheduler, whichever replica asks
    assert b["a_job"]["owner"] == "student-a"
    assert b["a_job"]["status"] in ("queued", "running")  # A's exit lost nothing
    assert "refused" in b["same_address"], b  # the per-address limit counts across replicas
    assert isinstance(b["other_address"], int) and b["other_address"] != job
    assert b["a_running"]["status"] == "running" and b["a_stopped"] is True
    assert b["a_done"]["status"] == "cancelled" and len(b["a_done"]["loss"]) > 0
    c = replica(
        ray_cluster,
        [
            {"op": "wait", "as": "b_done", "job": b["other_address"], "timeout": scaled(120)},
            {
                "op": "submit",
                "as": "again",
                "owner": "student-c",
                "address": "10.0.0.9",
                "steps": 3,
                "fresh": False,
            },
            {"op": "wait", "as": "served", "job": "again", "timeout": scaled(60)},
            {"op": "metrics", "as": "metrics"},
        ],
    )
    # any replica's metrics are the course's: the run B stopped, the one it ran
    assert "bsdemo_scheduler_up 1.0" in c["metrics"]
    assert 'bsdemo_runs_total{kind="train",status="cancelled"} 1.0' in c["metrics"]
    assert 'bsdemo_runs_total{kind="train",status="completed"}' in c["metrics"]
    assert c["b_done"]["status"] == "completed"
    assert c["served"]["status"] == "completed" and c["served"]["stored_at"] is not None
    assert c["served"]["loss"] == c["b_done"]["loss"]  # the same run, from the store
    end = replica(ray_cluster, [{"op": "shutdown", "as": "x"}])
    assert end["left_behind"] == []


def test_the_lab_page_trains_through_the_courses_scheduler(ray_cluster):
    """A replica's page with BSDEMO_RAY_ADDRESS set: its scheduler is the cluster's actor (no
    notice), Run trains there and the page draws the finished run; then the course is shut
    down."""
    from tests.app.helpers import APP
    from tests.app.test_hostile_links import SERVER_WITH_BAD_SETTINGS as LAB_RUN

    out = subprocess.run(
        [sys.executable, "-c", LAB_RUN, APP],
        capture_output=True,
        text=True,
        timeout=scaled(300),
        env={**os.environ, **ray_cluster.env},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["kind"] == "RemoteScheduler" and seen["notices"] == []
    assert not seen["exception"] and seen["done"], seen
    assert seen["where"]["node_id"] in ray_cluster.node_ids()
    end = replica(ray_cluster, [{"op": "shutdown", "as": "x"}])
    assert end["where"] == seen["where"] and end["left_behind"] == []


LOST_SCHEDULER = r"""
import json, sys, time
import ray
from streamlit.testing.v1 import AppTest
from tests.timeouts import scaled
at = AppTest.from_file(sys.argv[1], default_timeout=scaled(120))
at.run()
at.switch_page("pages/training_lab.py").run()
from bsdemo.ui.state import scheduler  # the page's own (cached) scheduler: the course's
sched = scheduler()
kind = type(sched).__name__
ray.kill(sched.actor, no_restart=True)  # the scheduler actor dies for good
time.sleep(0.5)
at.button(key="run").click().run()  # Run's callback meets it first, then the page
import ray._private.state as state
deadline = time.monotonic() + scaled(30)
while time.monotonic() < deadline:  # its worker actors go with it (Ray's fate-sharing)
    alive = [a.get("ActorClassName") for a in state.actors().values() if a.get("State") != "DEAD"]
    if not alive:
        break
    time.sleep(0.2)
print(json.dumps({"kind": kind, "exception": [str(e.value) for e in at.exception],
                  "errors": [e.value for e in at.error], "alive": alive}))
"""


def test_a_lost_scheduler_is_a_message_on_the_page_not_a_trace(ray_cluster):
    """A page of a course replica whose scheduler actor dies (killed, not restarted): pressing
    Run (a callback, run before the page) and the page after it say so in plain words, with no
    exception box."""
    from tests.app.helpers import APP

    out = subprocess.run(
        [sys.executable, "-c", LOST_SCHEDULER, APP],
        capture_output=True,
        text=True,
        timeout=scaled(300),
        env={**os.environ, **ray_cluster.env},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["kind"] == "RemoteScheduler" and seen["exception"] == [], seen
    said = [e.replace("\\", "") for e in seen["errors"]]  # plain text: Markdown escaped
    assert any(e.startswith("The course's scheduler was lost") and "Reload the page" in e for e in said), seen
    assert seen["alive"] == [], seen  # nothing left behind


def test_runs_land_on_both_nodes_a_lost_node_fails_only_its_job_and_stop_and_the_reaper_work(ray_cluster):
    """Two workers (one CPU each, one per node): two runs at once run on the two nodes. The
    worker node is then removed mid-run: its job fails with a message naming what was lost,
    the other runs on, and the next run goes to the node that is left. Stop ends a run between
    two steps; a run nobody watches is cancelled by the reaper. Nothing is left behind."""
    import time

    env = {"BSDEMO_WORKERS": "2", "BSDEMO_UNATTENDED_GRACE_S": str(scaled(10))}
    long_run = {"op": "submit", "steps": 400_000, "cap": 120.0}
    a = replica(
        ray_cluster,
        [
            {**long_run, "as": "one", "owner": "s1", "address": "10.0.0.1"},
            {**long_run, "as": "two", "owner": "s2", "address": "10.0.0.2"},
            {"op": "running", "as": "one_on", "job": "one", "timeout": scaled(120)},
            {"op": "running", "as": "two_on", "job": "two", "timeout": scaled(120)},
        ],
        **env,
    )
    nodes = {a["one_on"]["node"], a["two_on"]["node"]}
    assert nodes == set(ray_cluster.node_ids()), a  # one run on each node
    head = ray_cluster.cluster.head_node.node_id
    assert a["where"]["node_id"] == head  # the queue lives on the head node
    lost_job, kept_job = ("one", "two") if a["one_on"]["node"] != head else ("two", "one")
    other = next(n for n in ray_cluster.cluster.list_all_nodes() if n.node_id != head)
    started = time.monotonic()
    ray_cluster.cluster.remove_node(other)  # the worker node goes away mid-run
    b = replica(
        ray_cluster,
        [  # another replica: the students' pages reconnect to it
            {"op": "wait", "as": "lost", "job": a[lost_job], "timeout": scaled(120), "attend": ["s1", "s2"]},
            {"op": "snapshot", "as": "kept", "job": a[kept_job]},
            {
                "op": "cancel",
                "as": "stopped",
                "job": a[kept_job],
                "owner": {"one": "s1", "two": "s2"}[kept_job],
            },
            {"op": "wait", "as": "kept_end", "job": a[kept_job], "timeout": scaled(60)},
            {"op": "submit", "as": "next", "owner": "s3", "address": "10.0.0.3", "steps": 3},
            {"op": "wait", "as": "next_end", "job": "next", "timeout": scaled(120)},
            {**long_run, "as": "orphan", "owner": "s4", "address": "10.0.0.4", "unattended": True},
            {"op": "wait", "as": "orphan_end", "job": "orphan", "timeout": scaled(120)},
        ],
    )
    assert b["lost"]["status"] == "failed" and "Ray actor was lost" in b["lost"]["message"], b
    assert b["lost"]["message"].count(other.node_id[:12]) == 1  # it names the node
    assert time.monotonic() - started < scaled(150)
    assert b["kept"]["status"] == "running"  # the other job went on
    assert b["stopped"] is True and b["kept_end"]["status"] == "cancelled"
    assert b["kept_end"]["message"].startswith("Stopped after")  # between two steps
    assert b["next_end"]["status"] == "completed" and b["next_end"]["node"] == head
    assert b["orphan_end"]["status"] == "cancelled"  # nobody polled it: the reaper
    assert "nobody watched this run" in b["orphan_end"]["message"]
    ray_cluster.cluster.add_node(num_cpus=1, num_gpus=1)  # for the tests after this one
    end = replica(ray_cluster, [{"op": "shutdown", "as": "x"}])
    assert end["left_behind"] == []


def test_a_data_parallel_group_spans_the_nodes_in_one_placement_group():
    """A data-parallel check on the course's cluster: its two processes are actors placed
    together (one placement group) on the two nodes, meet over gloo across them, and give the
    same parameters as one process; when it ends, no member is left. A second check stopped
    while its group starts is cancelled, its members ended."""
    from bsdemo.engine.group import member_threads
    from tests.services import RayCluster

    # room on each node for the worker (1 CPU) and one member (a member's threads, as here)
    cluster = RayCluster(nodes=2, cpus=1 + member_threads(2))
    try:
        out = replica(
            cluster,
            [
                {
                    "op": "submit",
                    "as": "ddp",
                    "owner": "s1",
                    "address": "10.0.0.1",
                    "kind": "ddp",
                    "options": {"processes": 2, "steps": 3},
                },
                {"op": "wait", "as": "done", "job": "ddp", "timeout": scaled(180)},
                {"op": "members", "as": "members"},
                {
                    "op": "submit",
                    "as": "long",
                    "owner": "s2",
                    "address": "10.0.0.2",
                    "kind": "ddp",
                    "options": {"processes": 2, "steps": 200},
                },
                {"op": "measuring", "as": "timed", "job": "long", "timeout": scaled(120)},
                {"op": "cancel", "as": "stopped", "job": "long", "owner": "s2"},
                {"op": "wait", "as": "long_end", "job": "long", "timeout": scaled(120)},
                {"op": "members", "as": "after"},
            ],
        )
        assert out["done"]["status"] == "completed", out["done"]
        result = out["done"]["result"]
        assert result["kind"] == "ddp_check" and result["equivalent"] is True, result
        nodes = {node for _, node in out["members"]}
        assert len(out["members"]) == 2 and nodes == set(cluster.node_ids()), out["members"]
        assert all(state == "DEAD" for state, _ in out["members"])  # none left behind
        # Stop while the group's members start (each loads PyTorch): the members are ended
        assert out["timed"]["points"] >= 1 and out["stopped"] is True, out
        assert out["long_end"]["status"] == "cancelled", out["long_end"]
        assert out["after"] and all(state == "DEAD" for state, _ in out["after"]), out["after"]
        end = replica(cluster, [{"op": "shutdown", "as": "x"}])
        assert end["left_behind"] == []
    finally:
        cluster.close()


JOIN = "import ray, sys; ray.init(address=sys.argv[1]); print('joined')"


def test_a_course_cluster_refuses_every_process_without_its_token():
    """Ray with token authentication, as deploy/cluster/compose.yml runs the course: a replica
    with RAY_AUTH_TOKEN makes the course's scheduler and queues a run that trains; a process
    at the same address without the token (Ray's default, no authentication) or with another
    token is refused — it could otherwise run any code on the cluster."""
    from tests.services import TokenRayHead
    from tests.timeouts import wait_for

    head = TokenRayHead("course-" + "7" * 40)
    try:

        def joined(env):
            return subprocess.run(
                [sys.executable, "-c", JOIN, head.address],
                text=True,
                capture_output=True,
                timeout=scaled(120),
                env={**os.environ, **env},
            )

        wait_for(lambda: joined(head.env).returncode == 0, timeout=120)  # the head is up
        seen = replica(
            head,
            [
                {"op": "submit", "as": "job", "owner": "s1", "address": "10.0.0.1", "steps": 3},
                {"op": "wait", "job": "job", "as": "end", "timeout": scaled(180)},
            ],
        )
        assert seen["end"]["status"] == "completed" and len(seen["end"]["loss"]) == 3
        for env in (
            {**head.env, "RAY_AUTH_MODE": "disabled", "RAY_AUTH_TOKEN": ""},
            {**head.env, "RAY_AUTH_TOKEN": "stranger-" + "1" * 40},
        ):
            out = joined(env)
            assert out.returncode != 0 and "joined" not in out.stdout, out.stdout
            assert "ConnectionError" in out.stderr or "Authentication" in out.stderr, out.stderr[-2000:]
    finally:
        head.close()
