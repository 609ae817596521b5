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
for step in steps:
    op = step["op"]
    if isinstance(step.get("job"), str):  # a job this replica submitted in an earlier step
        step["job"] = seen[step["job"]]
    try:
        if op == "submit":
            cfg = RunConfig(epochs=None, max_steps=step.get("steps", 3))
            seen[step["as"]] = sched.submit(cfg, owner=step["owner"], address=step["address"],
                                            fresh=step.get("fresh", True))
        elif op == "load":
            seen[step["as"]] = sched.load()
        elif op == "wait":
            snap = sched.wait(step["job"], timeout=step["timeout"])
            seen[step["as"]] = {"status": snap.status, "loss": snap.steps["loss"],
                                "stored_at": snap.stored_at, "owner": snap.owner}
        elif op == "snapshot":
            snap = sched.snapshot(step["job"])
            seen[step["as"]] = {"status": snap.status, "owner": snap.owner}
        elif op == "shutdown":
            import ray
            from bsdemo.cluster import ACTOR_NAME, NAMESPACE
            ray.get(sched.actor.shutdown.remote())
            ray.kill(sched.actor)
            time.sleep(0.5)
            try:
                ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
                seen["left_behind"] = True
            except ValueError:
                seen["left_behind"] = False
    except ActiveRunError as exc:
        seen[step["as"]] = {"refused": str(exc)}
print(json.dumps(seen, default=str))
"""


def replica(cluster, steps: list[dict], **env) -> dict:
    out = subprocess.run([sys.executable, "-c", REPLICA, json.dumps(steps)], capture_output=True,
                         text=True, timeout=scaled(240),
                         env={**os.environ, **cluster.env, **env})
    assert out.returncode == 0, out.stderr[-3000:]
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
    for bad in ("ray://head:10001", "http://head:6379", "head", "a b:1", "x" * 300):
        with pytest.raises(ConfigError, match="BSDEMO_RAY_ADDRESS"):
            ray_address(bad)


def test_two_replicas_share_one_queue_one_set_of_limits_and_the_store(ray_cluster, postgres_url):
    """Replica A creates the course's scheduler (one run per address), queues a run and exits;
    replica B, another process, sees that run in the queue and its owner, is refused a second
    run from the same address but not from another, and gets A's run whole when it finishes;
    a third replica asking for the same run is served it from the shared store. Then the
    scheduler is shut down and no actor is left behind."""
    limits = {"BSDEMO_MAX_ACTIVE_PER_ADDRESS": "1", "BSDEMO_DATABASE_URL": postgres_url}
    a = replica(ray_cluster, [{"op": "submit", "as": "job", "owner": "student-a",
                               "address": "10.0.0.7", "steps": 60}], **limits)
    assert a["where"]["node_id"] in ray_cluster.node_ids()
    job = a["job"]
    b = replica(ray_cluster, [
        {"op": "snapshot", "as": "a_job", "job": job},
        {"op": "submit", "as": "same_address", "owner": "student-b", "address": "10.0.0.7"},
        {"op": "submit", "as": "other_address", "owner": "student-b", "address": "10.0.0.8"},
        {"op": "wait", "as": "a_done", "job": job, "timeout": scaled(120)},
    ])
    assert b["where"] == a["where"]  # one scheduler, whichever replica asks
    assert b["a_job"]["owner"] == "student-a"
    assert b["a_job"]["status"] in ("queued", "running", "completed")  # A's exit lost nothing
    assert "refused" in b["same_address"], b  # the per-address limit counts across replicas
    assert isinstance(b["other_address"], int) and b["other_address"] != job
    assert b["a_done"]["status"] == "completed" and len(b["a_done"]["loss"]) > 0
    c = replica(ray_cluster, [
        {"op": "wait", "as": "b_done", "job": b["other_address"], "timeout": scaled(120)},
        {"op": "submit", "as": "again", "owner": "student-c", "address": "10.0.0.9",
         "steps": 3, "fresh": False},
        {"op": "wait", "as": "served", "job": "again", "timeout": scaled(60)},
    ])
    assert c["b_done"]["status"] == "completed"
    assert c["served"]["status"] == "completed" and c["served"]["stored_at"] is not None
    assert c["served"]["loss"] == c["b_done"]["loss"]  # the same run, from the store
    end = replica(ray_cluster, [{"op": "shutdown", "as": "x"}])
    assert end["left_behind"] is False


LAB_THROUGH_THE_CLUSTER = r"""
import json, sys, time
from streamlit.testing.v1 import AppTest
from tests.timeouts import scaled
at = AppTest.from_file(sys.argv[1], default_timeout=scaled(120))
at.run()
at.switch_page("pages/training_lab.py").run()
notices = [w.value for w in at.sidebar.warning]
at.button(key="run").click().run()
for _ in range(600):
    at.run()
    if at.success or at.error or at.exception:
        break
    time.sleep(0.2)
from bsdemo.ui.state import scheduler  # the page's own (cached) scheduler
sched = scheduler()
print(json.dumps({"exception": bool(at.exception), "notices": notices,
                  "done": [s.value for s in at.success], "kind": type(sched).__name__,
                  "where": sched.where(), "queue": sched.load()}))
"""


def test_the_lab_page_trains_through_the_courses_scheduler(ray_cluster):
    """A replica's page with BSDEMO_RAY_ADDRESS set: its scheduler is the cluster's actor (no
    notice), Run trains there and the page draws the finished run; then the course is shut
    down."""
    from tests.app.helpers import APP

    out = subprocess.run([sys.executable, "-c", LAB_THROUGH_THE_CLUSTER, APP],
                         capture_output=True, text=True, timeout=scaled(300),
                         env={**os.environ, **ray_cluster.env})
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["kind"] == "RemoteScheduler" and seen["notices"] == []
    assert not seen["exception"] and seen["done"], seen
    assert seen["where"]["node_id"] in ray_cluster.node_ids()
    end = replica(ray_cluster, [{"op": "shutdown", "as": "x"}])
    assert end["where"] == seen["where"] and end["left_behind"] is False
