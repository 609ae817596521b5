"""Server and page latency, and page-vs-CLI throughput, measured in real headless Chromium.

1. server start -> /_stcore/health answers "ok" (target <= 3 s: the server never imports torch)
2. Run pressed -> first loss point drawn on the page, worker warm (target <= 1.5 s)
3. the same run watched in the page vs from the CLI: median samples/s (target within 5%)
4. a first visit (a new browser context) -> the Training Lab's charts drawn, and a reload after
   a run -> its tiles back (targets <= 2 s each on an idle machine)
5. `bsdemo train` started -> its first step (target <= 2.5 s on an idle machine)

    .venv/bin/python bench/latency.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
POINTS = (
    "() => { const p = document.querySelector('.js-plotly-plot');"
    " return p && p.data && p.data.length ? p.data[0].x.length : 0 }"
)
COMPARE = {"batch_size": "64", "epochs": "40"}  # ~900 steps: long enough for a stable median


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> tuple[subprocess.Popen, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                if r.read() == b"ok":
                    return proc, time.perf_counter() - t0
        except OSError:
            if time.perf_counter() - t0 > 60:
                raise RuntimeError("server did not start in 60 s") from None
            time.sleep(0.02)


def page_run(browser, url: str, query: str = "") -> tuple[float, str]:
    """(seconds from the Run click to the first loss point, the completion message)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    page.goto(f"{url}/training_lab{query}")
    page.get_by_text("No GPU: runs train on the CPU").or_(page.get_by_text("GPU ·")).first.wait_for(
        timeout=60_000
    )
    run = page.get_by_role("button", name="Run")
    run.wait_for()
    # "pressed on a loaded page": the (empty) charts are drawn, the page has settled
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 3")
    page.wait_for_timeout(1000)
    t0 = time.perf_counter()
    run.click()
    page.wait_for_function(f"({POINTS})() > 0", timeout=60_000, polling=10)
    first = time.perf_counter() - t0
    done = page.get_by_text(re.compile(r"^Completed \d+ steps"))
    done.wait_for(timeout=300_000)
    message = done.inner_text()
    page.close()
    return first, message


CHART = "() => document.querySelectorAll('.js-plotly-plot').length >= 1"


def visit_and_reload(browser, url: str) -> tuple[float, float]:
    """(seconds from opening the lab in a new browser context to its first chart, seconds from
    reloading it after a finished run to its tiles)."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    t0 = time.perf_counter()
    page.goto(f"{url}/training_lab?epochs=1")
    page.wait_for_function(CHART, timeout=60_000, polling=20)
    first = time.perf_counter() - t0
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text(re.compile(r"^Completed \d+ steps")).wait_for(timeout=120_000)
    page.wait_for_timeout(1000)
    t0 = time.perf_counter()
    page.reload()
    page.wait_for_selector("[data-testid=stMetric]", timeout=60_000)
    reload = time.perf_counter() - t0
    context.close()
    return first, reload


def cli_first_step() -> float:
    """Seconds from starting `bsdemo train --json` to its first step event."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bsdemo", "train", "--json", "--steps", "3"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    first = None
    for line in proc.stdout:
        if first is None and '"kind": "step"' in line:
            first = time.perf_counter() - t0
    proc.wait()
    return first


def cli_rate() -> float:
    args = [f"--{k.replace('_', '-')}={v}" for k, v in COMPARE.items()]
    # the default output (a summary), not --json: printing every step's JSON line would put
    # the reading process on the same 2 cores as the training threads
    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "train", *args], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return float(re.search(r"samples/s \(median\)\s+([\d,]+)", out.stdout).group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    starts = []
    for _ in range(3):
        proc, seconds = start_server(free_port())
        starts.append(seconds)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    port = free_port()
    proc, _ = start_server(port)
    url = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page_run(browser, url)  # warm the worker and the page code paths once
            firsts = [page_run(browser, url)[0] for _ in range(args.repeats)]
            query = "?" + "&".join(f"{k}={v}" for k, v in COMPARE.items())
            page_rates, cli_rates = [], []
            for _ in range(3):  # interleaved, so drift hits both alike
                message = page_run(browser, url, query)[1]
                page_rates.append(
                    float(re.search(r"median ([\d,]+) samples/s", message).group(1).replace(",", ""))
                )
                cli_rates.append(cli_rate())
            visits = [visit_and_reload(browser, url) for _ in range(args.repeats)]
            browser.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    print(f"{'measure':<44} {'median':>10} {'min':>10} {'max':>10}  target")
    print(
        f"{'server start -> health ok (s)':<44} {statistics.median(starts):>10.2f} "
        f"{min(starts):>10.2f} {max(starts):>10.2f}  <= 3 s"
    )
    print(
        f"{'Run pressed -> first loss point (s)':<44} {statistics.median(firsts):>10.2f} "
        f"{min(firsts):>10.2f} {max(firsts):>10.2f}  <= 1.5 s"
    )
    pm, cm = statistics.median(page_rates), statistics.median(cli_rates)
    print(
        f"{'page run, median samples/s':<44} {pm:>10,.0f} {min(page_rates):>10,.0f} {max(page_rates):>10,.0f}"
    )
    print(f"{'CLI run, median samples/s':<44} {cm:>10,.0f} {min(cli_rates):>10,.0f} {max(cli_rates):>10,.0f}")
    print(f"{'page / CLI':<44} {pm / cm:>10.3f} {'':>10} {'':>10}  within 5% (0.95-1.05)")
    firsts_cli = [cli_first_step() for _ in range(args.repeats)]
    for label, values, target in (
        ("first visit -> lab charts drawn (s)", [v for v, _ in visits], "<= 2 s idle"),
        ("reload after a run -> tiles back (s)", [r for _, r in visits], "<= 2 s idle"),
        ("bsdemo train -> first step (s)", firsts_cli, "<= 2.5 s idle"),
    ):
        print(
            f"{label:<44} {statistics.median(values):>10.2f} {min(values):>10.2f} "
            f"{max(values):>10.2f}  {target}"
        )
    print(f"(settings compared: {COMPARE}; repeats: {args.repeats} first-point, 3 throughput)")


if __name__ == "__main__":
    main()
