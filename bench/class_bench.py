"""Class benchmark: a room of members voting on a lesson's question, and the projector's tally.

Against a real Streamlit server (`streamlit run app.py`, a fresh data folder), with the room
benchmark's WebSocket clients (bench/room_bench.py: Streamlit's own protocol, the frontend's
polling and message cache, each client its own `bsdemo_browser` cookie and address):

1. A class is started in the server's store (bsdemo.classroom.store, as `bsdemo class start`
   does); the projector is a client holding the instructor's cookie on the Gradient noise page
   in presentation mode: its room panel polls every second.
2. N members each open the join link (`/?join=CODE`), then the lesson, and — at a moment drawn
   (seeded) uniformly over --within seconds after every member's page has loaded — choose an
   answer (a rerun carrying the radio's new value, as a click does).
3. Vote → projector: the projector's tally line ("vote 1: K of N answered") is read from every
   script run it receives; the member whose vote was the k-th sent is counted as seen when the
   projector first shows K ≥ k (votes land in about the order they are sent: close to the
   member's own latency, never an undercount of the last one's).

Printed: vote → projector p50/p95/max, votes counted, errors, the web process's CPU per member
over the voting window (from the first vote to the last one seen), and /_stcore/health latency.

    .venv/bin/python bench/class_bench.py [--members 30] [--within 5] [--hogs 0|2] [--seed 0]

A benchmark, not a test: it prints numbers and judges nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from room_bench import pct  # noqa: E402 - the room benchmark's report
from room_server import (  # noqa: E402 - the room benchmark's server side
    CpuSampler,
    HealthProber,
    free_port,
    start_server,
    stop_group,
)
from room_tab import LOAD_TIMEOUT_S, Result, Tab  # noqa: E402 - its student's tab
from streamlit.proto.WidgetStates_pb2 import WidgetState  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from bsdemo.classroom.store import ClassStore  # noqa: E402
from bsdemo.lessons import BY_SLUG  # noqa: E402
from bsdemo.store import open_store  # noqa: E402

LESSON = "noise"
ANSWERS = BY_SLUG[LESSON].answers
TALLY = re.compile(r"vote (\d+): \*\*(\d+)\*\* of (\d+) answered")


class ClassTab(Tab):
    """A tab of any page (the room benchmark's is the Training Lab's), with cookies of its own."""

    def __init__(self, port: int, index: int, address: str, cookies: dict[str, str]):
        super().__init__(port, Result(index, None), address)
        self.cookies = cookies
        self.page = ""
        self.radio: str | None = None  # the "Predict first" radio's widget id
        self.counts: list[tuple[float, int]] = []  # (when, answered) as the projector showed it

    def element(self, element) -> None:
        kind = element.WhichOneof("type")
        if kind == "radio" and element.radio.id.endswith(f"-predict_{LESSON}"):
            self.radio = element.radio.id
        elif kind == "markdown":
            found = TALLY.search(element.markdown.body)
            if found:
                self.counts.append((time.monotonic(), int(found.group(2))))
        elif kind == "exception":
            self.result.errors.append(f"exception: {element.exception.message[:120]}")

    async def open(self, page: str, query: str = "") -> None:
        """Go to a page (a new page: its hash unknown, the query the link's)."""
        self.page, self.page_hash, self.query, self.values = page, "", query, {}
        await self.rerun()
        await self.full_run(LOAD_TIMEOUT_S)


async def session(tab: ClassTab, work) -> None:
    headers = {
        "Cookie": "; ".join(f"{k}={v}" for k, v in tab.cookies.items()),
        "X-Forwarded-For": tab.address,
    }
    try:
        async with connect(
            f"ws://127.0.0.1:{tab.port}/_stcore/stream",
            subprotocols=["streamlit"],
            origin=f"http://127.0.0.1:{tab.port}",
            additional_headers=headers,
            max_size=None,
            open_timeout=LOAD_TIMEOUT_S,
        ) as ws:
            tab.ws = ws
            reader = asyncio.create_task(tab.read())
            try:
                await work()
            finally:
                reader.cancel()
    except Exception as exc:  # noqa: BLE001 - counted as this session's error
        tab.result.errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")


async def class_async(
    port: int, code: str, key: str, n: int, within: float, seed: int, sampler: CpuSampler
) -> dict:
    projector = ClassTab(
        port, -1, "10.255.0.1", {"bsdemo_browser": os.urandom(16).hex(), "bsdemo_teach": f"{code}.{key}"}
    )
    members = [
        ClassTab(port, i, f"10.0.{i // 250}.{i % 250 + 1}", {"bsdemo_browser": os.urandom(16).hex()})
        for i in range(n)
    ]
    rng = random.Random(seed)
    offsets = sorted(rng.uniform(0, within) for _ in range(n))
    ready, start = asyncio.Event(), {"left": n, "t0": 0.0}
    sent: list[float] = []
    finished = asyncio.Event()

    async def watch() -> None:
        await projector.open(LESSON, "present=1")
        await finished.wait()

    async def member(tab: ClassTab, offset: float) -> None:
        await tab.open("", f"join={code}")  # Home, by the join link
        await tab.open(LESSON)
        start["left"] -= 1
        if start["left"] == 0:
            start["t0"] = time.monotonic()
            sampler.sample()
            start["web0"] = sampler.totals()[0]
            ready.set()
        await ready.wait()
        await asyncio.sleep(max(0.0, start["t0"] + offset - time.monotonic()))
        if tab.radio is None:
            tab.result.errors.append("no Predict-first radio on the page")
            return
        state = WidgetState(id=tab.radio)
        # a radio sends its option's text (what a click on it sends)
        state.string_value = random.Random(seed + tab.result.index).choice(ANSWERS)
        tab.values[tab.radio] = state
        sent.append(time.monotonic())
        await tab.rerun()
        await tab.full_run(LOAD_TIMEOUT_S)

    async def members_then_wait() -> None:
        await asyncio.gather(
            *(session(t, lambda t=t, o=o: member(t, o)) for t, o in zip(members, offsets, strict=True))
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not projector.counts or projector.counts[-1][1] < len(sent)):
            await asyncio.sleep(0.1)
        finished.set()

    await asyncio.gather(session(projector, watch), members_then_wait())
    sampler.sample()
    sent.sort()
    seen = []
    for k, at in enumerate(sent, start=1):
        shown = next((when for when, count in projector.counts if count >= k and when >= at), None)
        if shown is not None:
            seen.append(shown - at)
    last = max((when for when, _ in projector.counts), default=time.monotonic())
    return {
        "sent": len(sent),
        "seen": seen,
        "shown": projector.counts[-1][1] if projector.counts else 0,
        "errors": [e for t in [projector, *members] for e in t.result.errors],
        "web_s": sampler.totals()[0] - start.get("web0", 0.0),
        "window_s": last - (sent[0] if sent else last),
    }


def with_class(work) -> tuple[dict, HealthProber, int]:
    """A fresh server with a class started in its store: asyncio.run(work(port, code, key,
    sampler)) while the web process's CPU and health are sampled; (its result, the prober,
    tracebacks in the server's log — printed)."""
    with tempfile.TemporaryDirectory(prefix="class-bench-") as data_dir:
        store = open_store(data_dir)
        code, key = ClassStore(store).start("bench")
        store.close()
        port, log = free_port(), Path(data_dir) / "server.log"
        proc = start_server(port, data_dir, [], log)
        sampler, prober = CpuSampler(proc.pid), HealthProber(port)
        try:
            sampler.start()
            prober.start()
            prober.since = time.monotonic()
            out = asyncio.run(work(port, code, key, sampler))
        finally:
            prober.stop.set()
            sampler.stop.set()
            prober.join(timeout=10)
            stop_group(proc)
        text = log.read_text(errors="replace")
        tracebacks = text.count("Traceback")
        if tracebacks:
            print(text[text.index("Traceback") :][:3000])
    return out, prober, tracebacks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=30)
    ap.add_argument("--within", type=float, default=5.0)
    ap.add_argument("--hogs", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    try:
        out, prober, tracebacks = with_class(
            lambda port, code, key, sampler: class_async(
                port, code, key, args.members, args.within, args.seed, sampler
            )
        )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    seen, health = out["seen"], prober.latencies_ms
    print(
        "| members | hogs | votes sent / on the projector | vote → projector p50 / p95 / max s "
        "| web CPU s per member | health p50 / max ms | errors |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {args.members} | {args.hogs} | {out['sent']} / {out['shown']} | "
        + (f"{statistics.median(seen):.2f} / {pct(seen, 95):.2f} / {max(seen):.2f}" if seen else "—")
        + f" | {out['web_s'] / max(1, args.members):.3f} | "
        + (f"{statistics.median(health):.0f} / {max(health):.0f}" if health else "—")
        + f" | {len(out['errors']) + tracebacks} |"
    )
    for error in out["errors"][:5]:
        print("  error:", error)


if __name__ == "__main__":
    main()
