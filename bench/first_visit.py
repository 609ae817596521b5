"""First visit: the Training Lab against a one-chart Streamlit app, in real headless Chromium.

Both servers run at once on this machine; each visit is a new browser context (no cache, no
cookie) that opens the page and waits for its first Plotly chart to be drawn. Visits alternate
between the two apps (A B B A ...), so load that comes and goes falls on both alike; the ratio is
taken pair by pair. The first visit of each server (its code paths cold) is reported apart.
Targets (issue 40): the lab <= 1.2x the one-chart app, <= 2 s on a quiet machine.

    .venv/bin/python bench/first_visit.py [--visits 9] [--plain]

--plain starts the lab with `streamlit run` instead of the launcher (bsdemo.ui.launch), which
makes the scheduler and warms the pages' modules before serving.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.chromium import CHROMIUM, CHROMIUM_ARGS, free_port, healthy, stop_group  # noqa: E402

ONE_CHART = """import plotly.graph_objects as go
import streamlit as st

st.title("One chart")
st.plotly_chart(go.Figure(go.Scatter(x=list(range(100)), y=[i * i for i in range(100)])))
"""
DRAWN = "() => document.querySelectorAll('.js-plotly-plot').length >= 1"


def serve(argv: list[str], port: int, env: dict) -> subprocess.Popen:
    proc = subprocess.Popen(
        [*argv, "--server.port", str(port), "--server.address", "127.0.0.1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    if not healthy(proc, port, 120):
        stop_group(proc)
        raise RuntimeError(f"{argv} did not answer on port {port} in 120 s")
    return proc


def visit(browser, url: str) -> float:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_function(DRAWN, timeout=120_000, polling=20)
    seconds = time.perf_counter() - t0
    context.close()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--visits", type=int, default=9, help="counted visits of each app")
    ap.add_argument("--plain", action="store_true", help="the lab by `streamlit run`")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    folder = tempfile.mkdtemp(prefix="bsdemo-first-visit-")
    one_chart = Path(folder) / "one_chart.py"
    one_chart.write_text(ONE_CHART)
    env = {**os.environ, "BSDEMO_DATA_DIR": folder}
    lab_cmd = (
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py")]
        if args.plain
        else [sys.executable, "-m", "bsdemo.ui.launch", str(ROOT / "app.py")]
    )
    lab_port, base_port = free_port(), free_port()
    lab = serve(lab_cmd, lab_port, env)
    base = serve([sys.executable, "-m", "streamlit", "run", str(one_chart)], base_port, env)
    urls = {"lab": f"http://127.0.0.1:{lab_port}/training_lab", "one chart": f"http://127.0.0.1:{base_port}/"}
    times: dict[str, list[float]] = {name: [] for name in urls}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            cold = {name: visit(browser, url) for name, url in urls.items()}
            for i in range(args.visits):
                order = list(urls) if i % 2 == 0 else list(urls)[::-1]
                for name in order:
                    times[name].append(visit(browser, urls[name]))
            browser.close()
    finally:
        stop_group(lab)
        stop_group(base)
    ratios = sorted(a / b for a, b in zip(times["lab"], times["one chart"], strict=True))
    print(
        f"lab started by: {'streamlit run' if args.plain else 'python -m bsdemo.ui.launch'}; "
        f"{args.visits} visits each, alternating; load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'visit -> first chart drawn (s)':<34} {'first':>7} {'median':>7} {'min':>7} {'max':>7}")
    for name in urls:
        v = times[name]
        print(f"{name:<34} {cold[name]:>7.2f} {statistics.median(v):>7.2f} {min(v):>7.2f} {max(v):>7.2f}")
    print(
        f"{'lab / one chart, pair by pair':<34} {cold['lab'] / cold['one chart']:>7.2f} "
        f"{statistics.median(ratios):>7.2f} {ratios[0]:>7.2f} {ratios[-1]:>7.2f}"
        "   target <= 1.2, lab <= 2 s quiet"
    )


if __name__ == "__main__":
    main()
