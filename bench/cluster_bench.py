"""The course deployment against the embedded lab, on this machine (issue 27's benchmarks).

1. Ray backend ÷ local pool on the same run, alternated A/B/A/B (so load hits both alike):
   Run → first point (submit to the first step in a snapshot, as a page polls) and the run's
   steady samples/s (the engine's own median). Target: ratio >= 0.9 for both.
2. The scheduler's per-call latency from a replica: snapshot of a finished run, load,
   can_submit — RemoteScheduler (a Ray call) against the local Scheduler (a method call).
3. 200 simulated sessions over 2 replicas (processes), 2 nodes, 2 workers: each session submits
   one short run and polls it at 4 Hz until it ends: errors, queue wait p50/p95 (submitted ->
   started), per-call latency p50/p95 while they run, runs per minute per worker.
4. What a student sees, in real Chromium: two Streamlit servers, the embedded one (local pool)
   and a course replica (BSDEMO_RAY_ADDRESS), alternated: the Training Lab's Run pressed ->
   the first loss point drawn in the chart, and Run -> "Completed". Target: ratio >= 0.9.

    .venv/bin/python bench/cluster_bench.py [--rounds 6] [--sessions 200] [--skip-sessions]
                                            [--skip-pages]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bsdemo.config import RunConfig  # noqa: E402
from bsdemo.limits import Limits  # noqa: E402
from bsdemo.scheduler import Scheduler  # noqa: E402

LAB_RUN = RunConfig()  # the Training Lab's default run


def first_point(sched, cfg: RunConfig, owner: str) -> tuple[float, float | None, str, float]:
    """(seconds from submit to a snapshot with a step, the run's median samples/s, status,
    seconds from submit to the snapshot that shows it ended)."""
    started = time.perf_counter()
    job = sched.submit(cfg, owner=owner, fresh=True)
    first = None
    while True:
        snap = sched.snapshot(job)
        sched.heartbeat(owner)
        if first is None and snap.steps["step"]:
            first = time.perf_counter() - started
        if snap.done:
            break
        time.sleep(0.01)
    speed = (snap.end or {}).get("summary", {}).get("samples_per_sec")
    return (first if first is not None else float("nan"), speed, snap.status, time.perf_counter() - started)


def calls(sched, job: int, n: int = 200) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"snapshot": [], "load": [], "can_submit": []}
    for _ in range(n):
        for name, call in (
            ("snapshot", lambda: sched.snapshot(job)),
            ("load", sched.load),
            ("can_submit", lambda: sched.can_submit("bench")),
        ):
            t = time.perf_counter()
            call()
            out[name].append((time.perf_counter() - t) * 1e3)
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def ab(rounds: int, cluster) -> None:
    from bsdemo.cluster.actor import connect

    local = Scheduler(workers=1, threads_per_worker=1)
    remote = connect(cluster.address, Limits(), 1, None, None)
    for s in (local, remote):
        while not s.workers_ready():
            time.sleep(0.1)
        first_point(s, RunConfig(epochs=None, max_steps=3), "warm")  # both warm
    rows = []
    for r in range(rounds):
        for name, s in (
            (("local", local), ("ray", remote)) if r % 2 == 0 else (("ray", remote), ("local", local))
        ):
            rows.append((name, r, *first_point(s, LAB_RUN, f"{name}-{r}")))
    print("\n1. Run -> first point and steady samples/s, the lab's default run, alternated")
    print(f"{'round':>5} {'backend':>8} {'first point s':>14} {'samples/s':>10} {'status':>10} {'run s':>6}")
    for name, r, fp, speed, status, wall in rows:
        print(f"{r:>5} {name:>8} {fp:>14.3f} {speed or float('nan'):>10,.0f} {status:>10} {wall:>6.2f}")
    med = {
        n: [statistics.median(row[k] for row in rows if row[0] == n) for k in (2, 3, 5)]
        for n in ("local", "ray")
    }
    print(
        f"median first point: local {med['local'][0]:.3f} s, ray {med['ray'][0]:.3f} s -> "
        f"local/ray {med['local'][0] / med['ray'][0]:.2f} (speed ratio; target >= 0.9)"
    )
    print(
        f"median samples/s: local {med['local'][1]:,.0f}, ray {med['ray'][1]:,.0f} -> "
        f"ray/local {med['ray'][1] / med['local'][1]:.2f} (target >= 0.9)"
    )
    print(
        f"median run, submit to done: local {med['local'][2]:.2f} s, ray {med['ray'][2]:.2f} s "
        f"-> {60 / med['ray'][2]:.0f} default runs per minute per worker on the cluster"
    )
    job = remote.submit(RunConfig(epochs=None, max_steps=200), owner="calls", fresh=True)
    remote.wait(job, 120)
    ljob = local.submit(RunConfig(epochs=None, max_steps=200), owner="calls", fresh=True)
    local.wait(ljob, 120)
    print("\n2. Per-call latency (ms) — a finished 200-step run's snapshot, load, can_submit")
    print(f"{'call':>11} {'local p50':>10} {'local p95':>10} {'ray p50':>8} {'ray p95':>8}")
    lc, rc = calls(local, ljob), calls(remote, job)
    for name in lc:
        print(
            f"{name:>11} {pct(lc[name], 0.5):>10.3f} {pct(lc[name], 0.95):>10.3f} "
            f"{pct(rc[name], 0.5):>8.3f} {pct(rc[name], 0.95):>8.3f}"
        )
    local.close()


SESSIONS = r"""
import json, os, sys, threading, time
from bsdemo.cluster.actor import connect
from bsdemo.config import RunConfig
from bsdemo.limits import Limits
from bsdemo.scheduler import ActiveRunError
n, tag = int(sys.argv[1]), sys.argv[2]
sched = connect(os.environ["BSDEMO_RAY_ADDRESS"], Limits.load(), 1, None, None)
out = {"errors": [], "waits": [], "calls": [], "done": 0}
lock = threading.Lock()
def session(i):
    owner = f"{tag}-{i}"
    try:
        job = sched.submit(RunConfig(epochs=None, max_steps=20), owner=owner,
                           address=f"10.{i % 200}.0.1", fresh=True)
        while True:
            t = time.perf_counter()
            snap = sched.snapshot(job)
            sched.heartbeat(owner)
            with lock:
                out["calls"].append((time.perf_counter() - t) * 1e3)
            if snap.done:
                break
            time.sleep(0.25)
        with lock:
            out["done"] += snap.status == "completed"
            if snap.status != "completed":
                out["errors"].append(snap.status)
            out["waits"].append(snap.started_at - snap.submitted_at)
    except Exception as exc:
        with lock:
            out["errors"].append(f"{type(exc).__name__}: {exc}")
threads = [threading.Thread(target=session, args=(i,)) for i in range(n)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(out))
"""


def sessions(total: int, cluster) -> None:
    env = {
        **os.environ,
        **cluster.env,
        "BSDEMO_WORKERS": "2",
        "BSDEMO_MAX_QUEUED": "1000",
        "BSDEMO_SUBMITS_PER_MINUTE": "1000",
    }
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SESSIONS, str(total // 2), f"r{k}"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(2)
    ]
    outs = [json.loads(p.communicate(timeout=1800)[0].strip().splitlines()[-1]) for p in procs]
    wall = time.perf_counter() - started
    waits = [w for o in outs for w in o["waits"]]
    lat = [c for o in outs for c in o["calls"]]
    done = sum(o["done"] for o in outs)
    errors = [e for o in outs for e in o["errors"]]
    print(f"\n3. {total} sessions over 2 replicas, 2 nodes, 2 workers (20-step runs, polled at 4 Hz)")
    print(f"completed {done}/{total}, errors {len(errors)} {errors[:3]}")
    print(f"queue wait s: p50 {pct(waits, 0.5):.1f}, p95 {pct(waits, 0.95):.1f}, max {max(waits):.1f}")
    print(
        f"per-call latency ms while they ran: p50 {pct(lat, 0.5):.2f}, p95 {pct(lat, 0.95):.2f} "
        f"({len(lat):,} calls)"
    )
    print(f"wall {wall:.0f} s: {done / wall * 60 / 2:.0f} runs per minute per worker")


LOSS_POINTS = (
    "() => { const p = document.querySelector('.js-plotly-plot');"
    " return p && p.data && p.data.length ? p.data[0].x.length : 0 }"
)


def pages(rounds: int, cluster) -> None:
    from playwright.sync_api import sync_playwright

    from tests.e2e.test_browser import CHROMIUM, CHROMIUM_ARGS, serving

    env = {"BSDEMO_WORKERS": "1"}
    folder = Path(tempfile.mkdtemp(prefix="bsdemo-bench-"))
    (folder / "local").mkdir()
    (folder / "ray").mkdir()
    with (
        serving(folder / "local", env=env) as local_port,
        serving(folder / "ray", env={**env, **cluster.env}) as ray_port,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def press_run(port: int) -> tuple[float, float]:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(f"http://127.0.0.1:{port}/training_lab")
            page.get_by_text("No GPU: runs train on the CPU").wait_for(timeout=180_000)
            page.wait_for_timeout(500)  # the page settled, as a student's is
            started = time.perf_counter()
            page.get_by_role("button", name="Run").click()
            page.wait_for_function(f"({LOSS_POINTS})() > 0", timeout=120_000, polling=5)
            first = time.perf_counter() - started
            page.get_by_text("Completed ", exact=False).first.wait_for(timeout=300_000)
            done = time.perf_counter() - started
            page.close()
            return first, done

        press_run(local_port), press_run(ray_port)  # both warm (the actor made, torch loaded)
        rows = []
        for r in range(rounds):
            order = [("local", local_port), ("ray", ray_port)]
            for name, port in order if r % 2 == 0 else order[::-1]:
                rows.append((name, *press_run(port)))
        browser.close()
    print(
        "\n4. In Chromium: the Training Lab's default run, Run pressed -> first loss point drawn"
        " and -> Completed (s), alternated"
    )
    print(f"{'backend':>8} {'first point p50':>16} {'min':>6} {'max':>6} {'completed p50':>14}")
    med = {}
    for name in ("local", "ray"):
        firsts = [row[1] for row in rows if row[0] == name]
        dones = [row[2] for row in rows if row[0] == name]
        med[name] = (statistics.median(firsts), statistics.median(dones))
        print(
            f"{name:>8} {med[name][0]:>16.3f} {min(firsts):>6.3f} {max(firsts):>6.3f} {med[name][1]:>14.2f}"
        )
    print(
        f"first point drawn local/ray {med['local'][0] / med['ray'][0]:.2f}, completed "
        f"local/ray {med['local'][1] / med['ray'][1]:.2f} (speed ratios; target >= 0.9)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--skip-sessions", action="store_true")
    parser.add_argument("--skip-pages", action="store_true")
    args = parser.parse_args()
    from tests.services import RayCluster

    cluster = RayCluster(nodes=2)
    os.environ.update(cluster.env)
    import ray

    try:
        ab(args.rounds, cluster)
        from bsdemo.cluster import ACTOR_NAME, NAMESPACE

        actor = ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
        ray.get(actor.shutdown.remote())
        ray.kill(actor)
        if not args.skip_sessions:
            sessions(args.sessions, cluster)
        if not args.skip_pages:
            pages(args.rounds, cluster)
    finally:
        ray.shutdown()
        cluster.close()


if __name__ == "__main__":
    main()
