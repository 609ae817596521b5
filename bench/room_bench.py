"""Room benchmark: a room of students pressing Run at once, against a real Streamlit server.

Each simulated student is a light WebSocket client that speaks Streamlit's own protocol (the
BackMsg/ForwardMsg protobufs on ws://127.0.0.1:PORT/_stcore/stream) the way the browser's
frontend does, without a browser:

1. It connects with its own `bsdemo_browser` cookie (32 hex characters: its own owner, see
   bsdemo/ui/state.py) and its own client address (`X-Forwarded-For: 10.x.y.z`, with the server
   trusting the loopback proxy, BSDEMO_TRUSTED_PROXIES=127.0.0.1: a room behind the course's
   reverse proxy, each laptop its own address, so the per-address limit applies per student),
   and asks for the Training Lab page as a browser opening /training_lab does (page_name
   "training_lab", no page hash yet; later reruns send the page hash the server named in
   new_session, and the query string of the server's latest page_info_changed).
2. Once the page's first script run has finished, it presses Run: a rerun whose widget states
   carry the Run button's trigger (the button found in the deltas: label "Run", key "run").
   --mix defaults: every student presses Run with the page's defaults (one configuration: the
   first run trains, the ones queued behind it are served from the run store once it is
   stored, as the lab serves a class). --mix varied: a third of the students (seeded) keep the
   defaults; the others first switch the Lab's Live mode off (on, the slider's release would
   start the run before the timed press), move the batch-size slider to a value drawn (seeded)
   from the slider's own options (a rerun carrying the slider's new value, as releasing it
   does), wait for that run, then press Run; they keep sending those values in every later
   rerun.
   Widgets a student never touched are left out of its reruns (the browser would send their
   unchanged values; the server keeps them either way).
3. It follows the page's polling like the frontend (App.handleAutoRerun in the bundled JS):
   every `auto_rerun` ForwardMsg (interval, fragment id) starts a timer that sends a rerun of
   that fragment (is_auto_rerun) every interval, whether or not a run is in flight (the server
   coalesces); a second auto_rerun with the same interval keeps the timer; a full script run
   (new_session without fragment ids) clears every timer, as does stop_auto_rerun for its
   fragments. The page's st.rerun() needs nothing from the client: it arrives as a new full
   script run. It also keeps the frontend's message cache (cacheable deltas by hash, aged per
   script run by max_cached_message_age) and reports its hashes in each rerun, so the server
   sends references for unchanged large deltas as it would to a browser.
4. First loss point: the first time, after the press, that the loss chart (the Plotly element
   keyed "loss_chart") has a trace with at least one x value (plain lists or Plotly's base64
   typed arrays). Completion: the run's end status as the student reads it, the success
   alert "Completed …" (trained) or "Stored result …" (served from the run store), the first
   time either appears in any script run (full or fragment) after the press. A full run after
   the press that leaves nothing polling and shows neither (within 2 s: a fragment rerun
   queued behind it can still draw it) is an error: a refused submit, a failed or cancelled
   run. (Not "nothing polls any more" alone: the sidebar's heartbeat
   fragment can be left polling every 20 s after the run ended, until the next full run.)

Per session: time from the press to the first loss point and to completion, and errors
(exceptions on the page, the connection closed, a refused or failed run, no first point within
--timeout). Meanwhile a prober thread gets /_stcore/health every 0.5 s and records its latency,
and a sampler reads /proc/PID/stat of the server (utime+stime: the web process) and of its
descendants (the training workers), reported as web CPU seconds per session and worker CPU
seconds; both over the room (from the first connection to the last completion). The server is warmed
first by one visit (the scheduler and its worker started, the device known), so the window
measures the room and not the server's start.

Every session count runs against a fresh server (`streamlit run app.py` in the repository, so
.streamlit/config.toml applies, plus any --config-flag) with a fresh temporary BSDEMO_DATA_DIR,
one server at a time. A "bare" row per count runs the same configurations back to back (submit,
wait, next) in this process through bsdemo.scheduler.Scheduler only (default limits, a fresh
run store like the server's): the training the room asked for, without the web.

    .venv/bin/python bench/room_bench.py [--sessions 10,20,30] [--within 5] [--hogs 0|2]
        [--mix defaults|varied] [--timeout 240] [--seed 0] [--config-flag KEY=VALUE ...]

--within: the window (s) the presses are spread over (uniformly random, seeded), counted from
the moment every session's page has loaded. --timeout: the bound (s, from a session's press) on
its first point and on its completion. --hogs N: N busy-loop processes for the whole benchmark.
--config-flag runner.postScriptGC=true passes `--runner.postScriptGC true` to streamlit run.
A benchmark, not a test: it prints numbers and judges nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.room_server import (  # noqa: E402
    CpuSampler,
    HealthProber,
    free_port,
    start_server,
    stop_group,
)
from bench.room_tab import (  # noqa: E402
    PAGE,
    Result,
    Room,
    Tab,
)
from bsdemo.lessons import BY_SLUG  # noqa: E402 - the repository's package, found from ROOT


# ----- one room on one fresh server -----
@dataclass
class RoomRun:
    n: int
    results: list[Result]
    health_ms: list[float]
    health_failures: int
    web_cpu_s: float
    worker_cpu_s: float
    client_cpu_s: float
    span_s: float | None  # the first press to the last completion
    server_errors: int  # tracebacks in the server's log
    load_web_cpu_s: float  # of web_cpu_s: until every page had loaded (before the presses)


def batch_choices(n: int, mix: str, seed: int) -> list[random.Random | None]:
    """Per session: None (the defaults) or the seeded generator its slider pick is drawn from."""
    rng = random.Random(seed)
    keep = set(range(n)) if mix == "defaults" else set(rng.sample(range(n), n // 3))
    return [None if i in keep else random.Random(seed * 1000 + i) for i in range(n)]


async def room_async(
    port: int,
    n: int,
    mix: str,
    within: float,
    timeout: float,
    seed: int,
    sampler: CpuSampler,
    prober: HealthProber,
) -> tuple[list[Result], float, float, float, float]:
    warm = Tab(port, Result(-1, None), "10.255.255.254")
    await warm.visit(None, 0.0, None, timeout)
    if warm.result.errors:
        raise RuntimeError(f"warm-up visit failed: {warm.result.errors}")
    prober.since = time.monotonic()
    sampler.sample()
    web0, workers0 = sampler.totals()
    client0 = time.process_time()
    rng = random.Random(seed)
    offsets = [rng.uniform(0, within) for _ in range(n)]
    picks = batch_choices(n, mix, seed)
    room = Room(n)
    loaded: list[float] = []

    async def mark() -> None:  # the web CPU the page loads (and slider picks) took
        await room.loaded.wait()
        sampler.sample()
        loaded.append(sampler.totals()[0] - web0)

    marker = asyncio.create_task(mark())
    tabs = [Tab(port, Result(i, None), f"10.0.{i // 250}.{i % 250 + 1}") for i in range(n)]
    await asyncio.gather(*(tab.visit(room, offsets[i], picks[i], timeout) for i, tab in enumerate(tabs)))
    marker.cancel()
    sampler.sample()
    web1, workers1 = sampler.totals()
    return (
        [tab.result for tab in tabs],
        web1 - web0,
        workers1 - workers0,
        time.process_time() - client0,
        loaded[0] if loaded else float("nan"),
    )


def one_room(
    n: int, mix: str, within: float, timeout: float, seed: int, flags: list[tuple[str, str]]
) -> RoomRun:
    with tempfile.TemporaryDirectory(prefix="room-bench-") as data_dir:
        port, log = free_port(), Path(data_dir) / "server.log"
        proc = start_server(port, data_dir, flags, log)
        sampler, prober = CpuSampler(proc.pid), HealthProber(port)
        try:
            sampler.start()
            prober.start()
            results, web, workers, client, load_web = asyncio.run(
                room_async(port, n, mix, within, timeout, seed, sampler, prober)
            )
        finally:
            prober.stop.set()
            sampler.stop.set()
            prober.join(timeout=10)
            stop_group(proc)
        server_errors = log.read_text(errors="replace").count("Traceback")
    pressed = [r.pressed_at for r in results if r.pressed_at is not None]
    ends = [r.done_at for r in results if r.done_at is not None]
    span = max(ends) - min(pressed) if ends and pressed else None
    return RoomRun(
        n, results, prober.latencies_ms, prober.failures, web, workers, client, span, server_errors, load_web
    )


# ----- the same runs without the web -----
def bare(configs: list[int | None], timeout: float) -> tuple[float, int, int, int]:
    """The configurations back to back through the Scheduler (default limits, a fresh run
    store): (total s, trained, stored, errors)."""
    from bsdemo.config import config_from_query
    from bsdemo.limits import Limits
    from bsdemo.scheduler import Scheduler
    from bsdemo.store import open_store

    with tempfile.TemporaryDirectory(prefix="room-bench-bare-") as data_dir:
        sched = Scheduler(limits=Limits(), store=open_store(data_dir))
        try:
            deadline = time.monotonic() + 120
            while not sched.workers_ready() and time.monotonic() < deadline:
                time.sleep(0.05)
            trained = stored = errors = 0
            t = time.perf_counter()
            for i, batch in enumerate(configs):
                cfg, _ = config_from_query({} if batch is None else {"batch_size": str(batch)})
                snap = sched.wait(sched.submit(cfg, owner=f"bare-{i}"), timeout=timeout)
                if snap is None or snap.status != "completed":
                    errors += 1
                elif snap.stored_at is not None:
                    stored += 1
                else:
                    trained += 1
            return time.perf_counter() - t, trained, stored, errors
        finally:
            sched.close()


# ----- the report -----
def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def trio(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    if not values:
        return "–"
    values = [v * scale for v in values]
    return f"{statistics.median(values):.{digits}f}/{pct(values, 0.95):.{digits}f}/{max(values):.{digits}f}"


HEADER = (
    f"{'sessions':>9} {'seen':>6} {'first pt p50/p95/max s':>23} "
    f"{'done p50/p95/max s':>20} {'errors':>6} {'health p50/p95/max ms':>22} "
    f"{'runs/min':>8} {'web CPU s/sess':>14} {'worker CPU s':>12} {'trained/stored':>14} "
    f"{'span s':>7}"
)


def row(run: RoomRun) -> str:
    rs = run.results
    firsts = [r.first_point_s for r in rs if r.first_point_s is not None]
    dones = [r.done_s for r in rs if r.done_s is not None]
    completed = [r for r in rs if r.outcome]
    rate = len(completed) / run.span_s * 60 if run.span_s else float("nan")
    errors = sum(1 for r in rs if r.errors)
    outcome = f"{sum(r.outcome == 'trained' for r in rs)}/{sum(r.outcome == 'stored' for r in rs)}"
    return (
        f"{run.n:>9} {f'{len(firsts)}/{run.n}':>6} {trio(firsts, digits=2):>23} "
        f"{trio(dones, digits=2):>20} "
        f"{errors:>6} {trio(run.health_ms, digits=0):>22} {rate:>8.1f} "
        f"{run.web_cpu_s / run.n:>14.2f} {run.worker_cpu_s:>12.1f} {outcome:>14} "
        f"{run.span_s if run.span_s is not None else float('nan'):>7.1f}"
    )


def bare_row(n: int, total: float, trained: int, stored: int, errors: int) -> str:
    rate = (trained + stored) / total * 60 if total else float("nan")
    return (
        f"{f'bare {n}':>9} {'–':>6} {'–':>23} {'–':>20} {errors:>6} {'–':>22} {rate:>8.1f} "
        f"{'–':>14} {'–':>12} {f'{trained}/{stored}':>14} {total:>7.1f}"
    )


def details(run: RoomRun) -> list[str]:
    lines = [
        f"  {run.n} sessions: web CPU {run.web_cpu_s:.1f} s, of it {run.load_web_cpu_s:.1f} s "
        f"while the pages loaded; bench client CPU {run.client_cpu_s:.1f} s; health probe "
        f"failures {run.health_failures}; tracebacks in the server log {run.server_errors}; "
        f"fragment reruns sent {sum(r.fragment_reruns for r in run.results)}"
    ]
    if any(r.batch is not None for r in run.results):
        lines.append("    batch sizes picked: " + ", ".join(str(r.batch or "default") for r in run.results))
    late = sorted(
        (r for r in run.results if (r.first_point_s or 0) > TARGET_S), key=lambda r: -r.first_point_s
    )
    if late:  # who waited past the target, and for what
        lines.append(
            f"    first point after {TARGET_S:g} s: "
            + ", ".join(
                f"session {r.index} (batch {r.batch or 'default'}, {r.outcome or 'not done'}) "
                f"{r.first_point_s:.1f} s"
                for r in late
            )
        )
    for r in run.results:
        for error in r.errors:
            lines.append(f"    session {r.index} (batch {r.batch or 'default'}): {error}")
    return lines


TARGET_S = 5.0  # the bound on a room's first points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", default="10,20,30", help="comma-separated session counts")
    ap.add_argument("--within", type=float, default=5.0, help="the presses' window (s)")
    ap.add_argument("--hogs", type=int, default=0, help="busy-loop CPU hog processes")
    ap.add_argument("--mix", choices=("defaults", "varied"), default="defaults")
    ap.add_argument(
        "--timeout",
        type=float,
        default=240.0,
        help="bound (s from a press) on its first point and on its completion",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--config-flag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to streamlit run as --KEY VALUE (repeatable)",
    )
    ap.add_argument("--no-bare", action="store_true", help="skip the scheduler-only rows")
    args = ap.parse_args()
    counts = [int(c) for c in args.sessions.split(",") if c.strip()]
    flags = [tuple(f.split("=", 1)) for f in args.config_flag]
    if any(len(f) != 2 for f in flags):
        ap.error("--config-flag takes KEY=VALUE")
    assert PAGE in BY_SLUG, f"no lesson page {PAGE!r} in bsdemo.lessons"
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(args.hogs)
    ]
    label = (
        f"mix={args.mix}, within={args.within:g} s, hogs={args.hogs}, timeout="
        f"{args.timeout:g} s, config flags: "
        f"{' '.join(f'--{k} {v}' for k, v in flags) or 'none (.streamlit/config.toml)'}"
    )
    rows, notes = [], []
    try:
        for n in counts:
            run = one_room(n, args.mix, args.within, args.timeout, args.seed, flags)
            rows.append(row(run))
            notes += details(run)
            print(f"[{n} sessions done]", flush=True)
            if not args.no_bare:
                configs = [r.batch for r in run.results]
                rows.append(bare_row(n, *bare(configs, args.timeout)))
    finally:
        for hog in hogs:
            stop_group(hog)
    print(f"\nRoom benchmark: {label}")
    print(HEADER)
    for line in rows:
        print(line)
    for line in notes:
        print(line)


if __name__ == "__main__":
    main()
