"""Load test: a class at once, on this machine (loopback only, bounded in count and time).

1. N concurrent headless-Chromium contexts (default 10) each open the Training Lab and press Run:
   time to first loss point (p50/p95), queue positions seen, errors (target: 0, p95 <= 10 s).
2. Scheduler level, no browser: 200 simulated sessions submit short runs at once: all finish,
   0 errors, queue positions seen.
3. Server memory (RSS) before and after 100 sessions opened and closed (target: <= 50 MB).
4. Stored-result lookup time in a run store of 1,000 runs (target: <= 50 ms).

    .venv/bin/python bench/load_test.py [--browsers 10] [--sessions 100] [--repeats 3]
        [--varied] [--browsers-only]

--varied: each student asks for a run of its own (its own seed, new each round): nothing rides
another's run or comes from the run store, as when a class picks its own settings.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.chromium import CHROMIUM, CHROMIUM_ARGS, free_port, start_server  # noqa: E402

POINTS = (
    "() => { const p = document.querySelector('.js-plotly-plot');"
    " return p && p.data && p.data.length ? p.data[0].x.length : 0 }"
)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def student(browser, url: str, index: int, seed: int | None = None) -> dict:
    """One student: open the lab, press Run (a short run), wait for the first point and the end."""
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    page = await context.new_page()
    positions: set[int] = set()
    result = {"index": index, "error": None, "first_point_s": None}
    try:
        own = f"&seed={seed}" if seed is not None else ""
        await page.goto(f"{url}/training_lab?epochs=3&batch_size=64{own}", timeout=60_000)
        await page.get_by_role("button", name="Run").wait_for(timeout=60_000)
        await page.wait_for_function(
            "() => document.querySelectorAll('.js-plotly-plot').length >= 3", timeout=60_000
        )
        t0 = time.perf_counter()
        await page.get_by_role("button", name="Run").click()
        while time.perf_counter() - t0 < 120:
            text = await page.evaluate("() => document.body.innerText")
            positions.update(int(m) for m in re.findall(r"position (\d+) in the queue", text))
            if await page.evaluate(POINTS) > 0:
                result["first_point_s"] = time.perf_counter() - t0
                break
            await asyncio.sleep(0.1)
        else:
            result["error"] = "no loss point within 120 s"
        await page.get_by_text(re.compile(r"^Completed \d+ steps")).wait_for(timeout=180_000)
        if await page.locator(".stException").count():
            result["error"] = "an exception on the page"
    except Exception as exc:  # noqa: BLE001 - any failure is a counted error, the test goes on
        result["error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    result["positions"] = sorted(positions)
    await context.close()
    return result


async def open_and_close(browser, url: str, n: int, parallel: int = 4) -> None:
    sem = asyncio.Semaphore(parallel)

    async def one() -> None:
        async with sem:
            context = await browser.new_context()
            page = await context.new_page()
            await page.goto(f"{url}/training_lab", timeout=60_000)
            await page.get_by_role("button", name="Run").wait_for(timeout=60_000)
            await context.close()

    await asyncio.gather(*(one() for _ in range(n)))


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else float("nan")


async def browsers_part(
    url: str, n_browsers: int, n_sessions: int, pid: int, repeats: int, varied: bool = False
) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        print(
            f"1. {n_browsers} browser sessions at once, each opening the lab and pressing Run "
            f"({repeats} rounds, one server):"
        )
        every: list[float] = []
        errors: list[dict] = []
        for round_ in range(1, repeats + 1):
            results = await asyncio.gather(
                *(student(browser, url, i, round_ * 1000 + i if varied else None) for i in range(n_browsers))
            )
            firsts = [r["first_point_s"] for r in results if r["first_point_s"] is not None]
            every += firsts
            errors += [r for r in results if r["error"]]
            seen = sorted({q for r in results for q in r["positions"]})
            print(
                f"   round {round_}: time to first loss point p50 {statistics.median(firsts):.2f} s, "
                f"p95 {p95(firsts):.2f} s; queue positions seen {seen or 'none'}; errors "
                f"{sum(1 for r in results if r['error'])}"
            )
        print(
            f"   all {len(every)} sessions: p50 {statistics.median(every):.2f} s, p95 "
            f"{p95(every):.2f} s, max {max(every):.2f} s (target p95 <= 10 s); errors: "
            f"{len(errors)} (target 0)"
        )
        for r in errors:
            print(f"     session {r['index']}: {r['error'].splitlines()[0]}")
        if not n_sessions:
            await browser.close()
            return
        before = rss_mb(pid)
        t = time.perf_counter()
        await open_and_close(browser, url, n_sessions)
        await asyncio.sleep(5)  # let the server drop the closed sessions
        after = rss_mb(pid)
        print(
            f"3. server memory: {before:.0f} MB before, {after:.0f} MB after {n_sessions} "
            f"sessions opened and closed ({time.perf_counter() - t:.0f} s): growth "
            f"{after - before:+.1f} MB (target <= 50 MB)"
        )
        await browser.close()


def scheduler_part(n: int = 200) -> None:
    from bsdemo.config import RunConfig
    from bsdemo.limits import Limits
    from bsdemo.scheduler import Scheduler

    sched = Scheduler(workers=1, limits=Limits(submits_per_minute=10**6))
    try:
        while not sched.workers_ready():
            time.sleep(0.05)
        t = time.perf_counter()
        ids = [sched.submit(RunConfig(epochs=None, max_steps=5), owner=f"student-{i}") for i in range(n)]
        positions = [sched.snapshot(j).queue_position for j in ids]
        snaps = [sched.wait(j, timeout=300) for j in ids]
        bad = [s for s in snaps if s.status != "completed"]
        print(
            f"2. {n} simulated sessions submitting at once (scheduler, no browser): all done in "
            f"{time.perf_counter() - t:.1f} s; queue positions 1…{max(p or 0 for p in positions)};"
            f" errors {len(bad)} (target 0)"
        )
    finally:
        sched.close()


def store_part() -> None:
    from bsdemo.config import RunConfig
    from bsdemo.store import RunStore

    with tempfile.TemporaryDirectory() as folder:
        store = RunStore(Path(folder) / "runs.sqlite3")
        series = {"step": list(range(1000)), "loss": [1.0] * 1000}
        device = {"type": "cpu", "name": "bench"}
        for seed in range(1000):
            store.put(
                vars(RunConfig(seed=seed)), device, {}, series, series, {"status": "completed", "summary": {}}
            )
        times = []
        for seed in range(0, 1000, 20):
            t = time.perf_counter()
            assert store.find(vars(RunConfig(seed=seed)), device) is not None
            times.append(time.perf_counter() - t)
        print(
            f"4. stored-result lookup among 1,000 runs: median {statistics.median(times) * 1e3:.2f}"
            f" ms, max {max(times) * 1e3:.2f} ms (target <= 50 ms)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--browsers", type=int, default=10)
    ap.add_argument("--sessions", type=int, default=100, help="0 skips the memory part")
    ap.add_argument("--repeats", type=int, default=3, help="rounds of the browser part")
    ap.add_argument(
        "--varied", action="store_true", help="each student a run of its own (its own seed, new each round)"
    )
    ap.add_argument("--browsers-only", action="store_true", help="only the browser part")
    args = ap.parse_args()
    port = free_port()
    proc = start_server(port)
    try:
        asyncio.run(
            browsers_part(
                f"http://127.0.0.1:{port}", args.browsers, args.sessions, proc.pid, args.repeats, args.varied
            )
        )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    if args.browsers_only:
        return
    scheduler_part()
    store_part()


if __name__ == "__main__":
    main()
