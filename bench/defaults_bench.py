"""Every lesson's default experiment, timed as a student sees it: in real Chromium, on a fresh
server with an empty run store, press the page's button and time (a) its first visible result (a
chart, table or figure that was not there before the press) and (b) its end (the text that says it
finished) — quiet, and with CPU-bound processes running beside it. Prints a table for
bench/RESULTS.md; the target is every default done in 30 s with two hogs, its first result in 5 s.

    .venv/bin/python bench/defaults_bench.py [--hogs 0,2] [--only regimes,norms] [--limit 240]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.chromium import CHROMIUM, CHROMIUM_ARGS, free_port, start_server  # noqa: E402
from scripts.screenshots import PAGES, SECOND, VARIANTS  # noqa: E402

SHOWN = (
    '() => document.querySelectorAll(\'.js-plotly-plot, [data-testid="stDataFrame"], '
    '[data-testid="stMetric"]\').length'
)


def experiments() -> list[tuple[str, str, str | None, str, str]]:
    """(name, page, a preset to press first, button, what says it finished) of every default."""
    found = []
    for page, (button, done) in PAGES.items():
        for i, (b, d) in enumerate([(button, done), *SECOND.get(page, [])]):
            if b:
                found.append((page if not i else f"{page}: {b}", page, None, b, d))
    for page, preset, query in VARIANTS.values():
        if preset and not query:
            button, done = PAGES[page]
            found.append((f"{page}: {preset}", page, preset, button, done))
    return found


def finished(page, done: str) -> bool:
    if done.startswith("() =>"):
        return bool(page.evaluate(done))
    return page.get_by_text(re.compile(done)).count() > 0


def time_one(
    browser, url: str, route: str, preset: str | None, button: str, done: str, limit_s: float
) -> tuple[float | None, float | None]:
    """(seconds to the first new chart or table, seconds to the end; None when not seen)."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{url}/{route}")
    page.get_by_text(re.compile("No GPU: runs train on the CPU|GPU")).first.wait_for(timeout=90_000)
    if preset:
        page.get_by_role("button", name=preset, exact=True).click()
        page.wait_for_timeout(3000)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=90_000
    )
    before = page.evaluate(SHOWN)
    start = time.monotonic()
    page.get_by_role("button", name=button, exact=True).first.click()
    first = end = None
    while time.monotonic() - start < limit_s:
        now = time.monotonic() - start
        if first is None and page.evaluate(SHOWN) > before:
            first = now
        if finished(page, done):
            end = now
            first = first if first is not None else now
            break
        page.wait_for_timeout(200)
    context.close()
    return first, end


def _hog() -> None:
    while True:
        pass


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--hogs", default="0,2", help="hog counts to run the whole set under")
    args.add_argument("--only", default="", help="names (or pages) to time, comma-separated")
    args.add_argument("--limit", type=float, default=240.0, help="give up on one after this")
    opts = args.parse_args()
    only = {o.strip() for o in opts.only.split(",") if o.strip()}
    chosen = [e for e in experiments() if not only or e[0] in only or e[1] in only]
    from playwright.sync_api import sync_playwright

    rows: dict[str, dict[int, tuple]] = {}
    for hogs in [int(h) for h in opts.hogs.split(",")]:
        with tempfile.TemporaryDirectory() as data:
            os.environ["BSDEMO_DATA_DIR"] = data  # an empty run store: nothing served stored
            port = free_port()
            server = start_server(port)
            procs = [mp.Process(target=_hog, daemon=True) for _ in range(hogs)]
            for p in procs:
                p.start()
            try:
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                    for name, route, preset, button, done in chosen:
                        first, end = time_one(
                            browser, f"http://127.0.0.1:{port}", route, preset, button, done, opts.limit
                        )
                        rows.setdefault(name, {})[hogs] = (first, end)
                        print(
                            f"{hogs} hogs  {name:<48} first {_s(first):>7}  end {_s(end):>7}",
                            file=sys.stderr,
                            flush=True,
                        )
                    browser.close()
            finally:
                for proc in procs:
                    proc.terminate()
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(timeout=20)
    counts = sorted({h for r in rows.values() for h in r})
    head = "".join(f" | {h} hogs: first, end" for h in counts)
    print(f"{'default experiment':<48}{head}")
    for name, by in rows.items():
        cells = "".join(
            f" | {_s(by.get(h, (None,))[0]):>8}, {_s(by.get(h, (None, None))[1]):>7}" for h in counts
        )
        print(f"{name:<48}{cells}")
    print(
        f"\n{os.cpu_count()} CPUs; times in seconds from the press; '-' = not seen within {opts.limit:.0f} s"
    )


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    main()
