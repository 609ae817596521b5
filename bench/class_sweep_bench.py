"""Class sweep benchmark: a room fills the learning-rate lesson's 24-cell map together, against
its instructor running the 24 cells alone.

Against a real Streamlit server (`streamlit run app.py`, a fresh data folder), with the room
benchmark's WebSocket clients (bench/room_bench.py, through bench/class_bench.py's tab: each
client its own `bsdemo_browser` cookie and address, polling as the frontend does):

- room: a class is started in the server's store; the projector (the instructor's cookie, the
  Learning-rate scaling page in presentation mode) presses "Give each student a cell"; N members
  (24 by default: one a cell) open the join link, then the lesson, and each presses "Run my
  cell" at a moment drawn (seeded) over --within seconds. Their pages' polls report each run to
  the class when it ends. Timed: from the hand-out press to the projector's line first saying
  every cell has a run ("Sweep 1: 24 of 24 cells").
- alone: a fresh class with no members; the projector hands out the grid and presses "Fill the
  24 empty cells" (the instructor's browser runs them all). Timed the same way.

Printed: both times, the web process's CPU, the runs' count, health latency, errors.

    .venv/bin/python bench/class_sweep_bench.py [--members 24] [--within 5] [--hogs 0|2]

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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from class_bench import ClassTab, session, with_class  # noqa: E402
from room_bench import pct  # noqa: E402
from room_server import CpuSampler  # noqa: E402

PAGE = "lr_scaling"
LINE = re.compile(r"Sweep (\d+): \*\*(\d+) of (\d+) cells\*\* have a run \((\d+) runs?\)")
TIMEOUT_S = 600.0  # --timeout: the longest wait for the last cell


class SweepTab(ClassTab):
    """A tab that knows the sweep's buttons (by their keys) and the projector's line."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.buttons: dict[str, str] = {}  # key suffix -> widget id
        self.lines: list[tuple[float, int, int, int]] = []  # (when, filled, cells, runs)
        self.said: list[str] = []  # the page's alerts, in order

    def element(self, element) -> None:
        kind = element.WhichOneof("type")
        if kind == "button":
            for key in (f"class_sweep_open_{PAGE}", f"class_cell_run_{PAGE}", f"class_sweep_fill_{PAGE}"):
                if element.button.id.endswith(key):
                    self.buttons[key] = element.button.id
        elif kind == "alert":  # a member's "Sent to the room", or a refusal
            self.said.append(element.alert.body[:160])
        elif kind == "markdown":
            found = LINE.search(element.markdown.body)
            if found:
                self.lines.append(
                    (time.monotonic(), int(found.group(2)), int(found.group(3)), int(found.group(4)))
                )
        super().element(element)

    async def press(self, key: str, timeout: float = 60.0) -> float:
        """Press the button with this key (a full rerun triggered by it, as a click sends)."""
        deadline = time.monotonic() + timeout
        while key not in self.buttons:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no button {key} on the page")
            await asyncio.sleep(0.1)
        pressed = time.monotonic()
        await self.rerun(trigger=self.buttons[key])
        await self.full_run(60.0)
        return pressed

    async def until_full(self, timeout: float) -> float | None:
        """When the projector first showed every cell filled (None: not within timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            full = next((when for when, filled, cells, _ in self.lines if filled == cells), None)
            if full is not None:
                return full
            await asyncio.sleep(0.2)
        return None


async def room(
    port: int,
    code: str,
    key: str,
    n: int,
    within: float,
    seed: int,
    alone: bool,
    sampler: CpuSampler,
    timeout: float,
) -> dict:
    projector = SweepTab(
        port, -1, "10.255.0.1", {"bsdemo_browser": os.urandom(16).hex(), "bsdemo_teach": f"{code}.{key}"}
    )
    members = [
        SweepTab(port, i, f"10.0.{i // 250}.{i % 250 + 1}", {"bsdemo_browser": os.urandom(16).hex()})
        for i in range(n)
    ]
    rng = random.Random(seed)
    offsets = sorted(rng.uniform(0, within) for _ in range(n))
    joined, handed = asyncio.Event(), asyncio.Event()
    left = {"n": n}
    out: dict = {"errors": []}
    done = asyncio.Event()

    async def teach() -> None:
        try:
            await projector.open(PAGE, "present=1")
            if n:
                await joined.wait()
            sampler.sample()
            out["web0"] = sampler.totals()[0]
            out["t0"] = await projector.press(f"class_sweep_open_{PAGE}")
            handed.set()
            if alone:
                await projector.press(f"class_sweep_fill_{PAGE}")
            full = await projector.until_full(timeout)
            out["full_s"] = None if full is None else full - out["t0"]
            sampler.sample()
            out["web_s"] = sampler.totals()[0] - out["web0"]
            out["last"] = projector.lines[-1] if projector.lines else None
        finally:  # a projector that failed (its error counted) leaves no member waiting
            out.setdefault("t0", time.monotonic())
            handed.set()
            done.set()

    async def member(tab: SweepTab, offset: float) -> None:
        try:
            await tab.open("", f"join={code}")
        finally:  # a member whose page failed (counted as its error) holds nobody up
            left["n"] -= 1
            if left["n"] == 0:
                joined.set()
        await handed.wait()
        await tab.open(PAGE)
        await asyncio.sleep(max(0.0, out["t0"] + offset - time.monotonic()))
        await tab.press(f"class_cell_run_{PAGE}")
        await done.wait()  # the page stays open: its poll reports the run when it ends

    await asyncio.gather(
        session(projector, teach),
        *(session(t, lambda t=t, o=o: member(t, o)) for t, o in zip(members, offsets, strict=True)),
    )
    out["errors"] = [e for t in [projector, *members] for e in t.result.errors]
    if out.get("full_s") is None:  # what each member's page said last: where the room stopped
        out["errors"] += [
            f"member {t.result.index}: {t.said[-1] if t.said else 'said nothing'}"
            for t in members
            if not any(x.startswith("Sent to the room") for x in t.said)
        ]
    return out


def one(args, alone: bool) -> tuple[dict, list[float], int]:
    out, prober, tracebacks = with_class(
        lambda port, code, key, sampler: room(
            port,
            code,
            key,
            0 if alone else args.members,
            args.within,
            args.seed,
            alone,
            sampler,
            args.timeout,
        )
    )
    return out, prober.latencies_ms, tracebacks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=24)
    ap.add_argument("--within", type=float, default=5.0)
    ap.add_argument("--hogs", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S)
    args = ap.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    rows = []
    try:
        for alone in (False, True):
            out, health, tracebacks = one(args, alone)
            rows.append((alone, out, health, tracebacks))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(
        "| who runs the 24 cells | hogs | hand-out → every cell on the projector s | runs shown "
        "| web CPU s | health p50 / p95 / max ms | errors |"
    )
    print("|---|---|---|---|---|---|---|")
    for alone, out, health, tracebacks in rows:
        last = out.get("last")
        print(
            f"| {'the instructor alone (Fill)' if alone else f'{args.members} members'} | "
            f"{args.hogs} | "
            + (f"{out['full_s']:.1f}" if out.get("full_s") else f"not within {args.timeout:.0f}")
            + f" | {last[3] if last else 0} | {out.get('web_s', 0):.1f} | "
            + (
                f"{statistics.median(health):.0f} / {pct(health, 95):.0f} / {max(health):.0f}"
                if health
                else "—"
            )
            + f" | {len(out['errors']) + tracebacks} |"
        )
        for error in out["errors"][:5]:
            print("  error:", error)


if __name__ == "__main__":
    main()
