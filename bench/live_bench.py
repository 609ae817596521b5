"""Live mode: from a slider's release to the run's first point on the loss chart, in real Chromium.

A real Streamlit server and one real browser tab on the Training Lab (Live mode on, its
default). Each trial releases the batch-size slider one step (the keyboard's Right or Left
arrow: a release, as a drag's end is), alternating up and down so each trial starts a new run
(batch 32 <-> 64 at the defaults; a run that is still going is superseded), then waits until
the loss chart holds a trace of that new run with at least one point. The time is the page's
own clock (performance.now) from just before the key press to the first frame in which that
point is drawn: what the student sees. Trials are spaced (--gap seconds after each first point)
so each measures one release, not a queue.

    .venv/bin/python bench/live_bench.py [--trials 20] [--hogs 2] [--gap 1.5]

--hogs N runs N CPU-bound processes beside the server for the whole measurement (the shared
class server). Prints one line per trial and a table of p50 / p95 / max. The server's limit of
runs a minute a browser is lifted for it (BSDEMO_SUBMITS_PER_MINUTE=1000): the trials come
faster than a student's 12 a minute.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.chromium import CHROMIUM, CHROMIUM_ARGS, free_port, settled, start_server  # noqa: E402

# the newest run on the loss chart (its legend entry "#N batch B, …") has a point drawn
RUN_POINTS = """(run) => {
  const plot = document.querySelector('.st-key-loss_chart .js-plotly-plot');
  if (!plot || !plot.data) return 0;
  const trace = plot.data.find(t => (t.name || '').startsWith(`#${run} `));
  return trace && trace.x ? trace.x.length : 0;
}"""
# resolves, in the page, when the URL names a run other than `before` and that run's first
# point is drawn: the page's clock then
FIRST_POINT = """([before, points]) => new Promise(resolve => {
  const look = () => {
    const found = /[?&]run=(\\d+)/.exec(location.search);
    if (found && found[1] !== before && eval(points)(found[1]) > 0)
      return resolve([found[1], performance.now()]);
    requestAnimationFrame(look);
  };
  look();
})"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--trials", type=int, default=20)
    args.add_argument("--hogs", type=int, default=0)
    args.add_argument("--gap", type=float, default=1.5, help="seconds between trials")
    opts = args.parse_args()
    from playwright.sync_api import sync_playwright

    # one browser releasing a slider every few seconds: above the default limit of 12 runs a
    # minute a browser (BSDEMO_SUBMITS_PER_MINUTE), which would answer "wait" to trial 13
    os.environ.setdefault("BSDEMO_SUBMITS_PER_MINUTE", "1000")
    port = free_port()
    server = start_server(port)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(opts.hogs)]
    times: list[float] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(f"http://127.0.0.1:{port}/training_lab")
            page.get_by_text(re.compile("No GPU: runs train on the CPU|GPU")).first.wait_for(timeout=60_000)
            settled(page)
            slider = page.get_by_role("slider", name=re.compile("^Batch size"))
            before = ""
            for trial in range(opts.trials):
                slider.focus()
                key = "ArrowRight" if trial % 2 == 0 else "ArrowLeft"
                start = page.evaluate("() => performance.now()")
                page.keyboard.press(key)
                run, seen = page.evaluate(FIRST_POINT, [before, RUN_POINTS])
                elapsed = (seen - start) / 1000
                times.append(elapsed)
                print(
                    f"trial {trial + 1:>2}: batch {slider.get_attribute('aria-valuetext'):>4}"
                    f"  run {run}  first point after {elapsed:.3f} s",
                    flush=True,
                )
                before = run
                time.sleep(opts.gap)
            browser.close()
    finally:
        for hog in hogs:
            hog.kill()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
    print(f"\n{os.cpu_count()} cores, {opts.hogs} hog(s), {len(times)} releases\n")
    print("| release → first point | p50 | p95 | max |")
    print("|---|---|---|---|")
    print(f"| seconds | {statistics.median(times):.2f} | {percentile(times, 0.95):.2f} | {max(times):.2f} |")


if __name__ == "__main__":
    main()
