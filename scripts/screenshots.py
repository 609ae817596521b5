"""Full-page screenshots of every page after its default experiment, in real Chromium.

Starts the lab on a free port, opens each page at 1280x720 and at 1920x1080, presses the page's
default experiment button (where it has one), waits for it to finish, and saves the whole page
(Streamlit scrolls inside its own container, so the viewport is grown to the content's height).

    .venv/bin/python scripts/screenshots.py OUT_DIR [--pages training_lab,memory] [--readme]

--readme also refreshes assets/screenshot.png (the Training Lab at 1400 px) for the README.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load_test import free_port, start_server  # noqa: E402

CHROMIUM = os.environ.get("BSDEMO_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SIZES = [(1280, 720), (1920, 1080)]
# page -> (button that starts its default experiment, what says it finished: a text's pattern,
# or a JavaScript predicate for the comparison pages, done when their progress line is gone)
COMPARISON_DONE = ("() => !!document.querySelector('[data-testid=\"stDataFrame\"]')"
                   " && !document.body.innerText.includes('runs done')")
PAGES = {
    "": (None, None),
    "training_lab": ("Run", r"^Completed \d+ steps"),
    "throughput": ("Run sweep", r"^What your sweep shows"),
    "memory": ("Measure memory", r"out of memory"),
    "finder": ("Find my batch size", r"^Use batch \d+"),
    "regimes": ("Train all three", r"^What your runs show"),
    "lr_scaling": ("Compare", COMPARISON_DONE),
    "accumulation": ("Compare", r"equivalent"),
    "norms": ("Train the grid", r"^What your grid shows"),
    "noise": ("Measure the noise", r"^What your measurement shows"),
    "sharpness": ("Train both to the target", r"^What your runs show"),
    "fit_batch": ("Fit the biggest batch", r"^What your measurement shows"),
    "quiz": (None, None),
}
# a page another way: name -> (page, a preset's button to press first, the link's query); then the
# page's own experiment
# pages with more experiments, run after the first: name -> [(its button, what says it finished)]
SECOND = {"noise": [("Train to the target at each batch", r"^What your runs show")],
          "fit_batch": [("Run the process group", r"scaling efficiency of|too noisy to read"),
                        ("Run the pipeline", r"^Each stage held at most")],
          "finder": [("Measure each architecture", r"meets the rule of thumb's")]}
VARIANTS = {
    "lr_scaling-warmup": ("lr_scaling", "Warm-up (Adam, k = 32)", ""),
    "sharpness-remedies": ("sharpness", "Every remedy", ""),
    "lr_scaling-present": ("lr_scaling", None, "?present=1&hide=preset,size,grid_epochs"),
    "training_lab-present": ("training_lab", None, "?present=1&hide=seed,advanced"),
    "training_lab-gan": ("training_lab", None, "?dataset=digits&model=gan&width=128&depth=2"
                                                "&optimizer=adam&lr=0.001&epochs=30"),
    "training_lab-lstm": ("training_lab", None, "?model=lstm&width=64&depth=1&optimizer=adam"
                                                 "&lr=0.01"),
}


VISUAL_PROBLEMS = """() => {
  const problems = [];
  const visible = r => r.width > 0 && r.height > 0;
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 2
      && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 2;
  const PARTS = [['title', '.g-gtitle'], ['x title', '.g-xtitle'], ['y title', '.g-ytitle'],
                 ['legend', '.legend .bg'], ['annotation', '.annotation']];
  document.querySelectorAll('.js-plotly-plot').forEach((plot, i) => {
    const parts = [];
    for (const [name, selector] of PARTS) {
      plot.querySelectorAll(selector).forEach(e => {
        const r = e.getBoundingClientRect();
        if (visible(r)) parts.push([name, r, (e.textContent || '').trim().slice(0, 40)]);
      });
    }
    for (let a = 0; a < parts.length; a++)
      for (let b = a + 1; b < parts.length; b++)
        if (overlap(parts[a][1], parts[b][1]))
          problems.push(`chart ${i}: ${parts[a][0]} "${parts[a][2]}" overlaps ${parts[b][0]} `
                        + `"${parts[b][2]}"`);
  });
  document.querySelectorAll('[data-testid="stDataFrame"]').forEach((table, i) => {
    const scroller = table.querySelector('.dvn-scroller');
    if (scroller && scroller.scrollWidth > scroller.clientWidth + 2)
      problems.push(`table ${i}: ${scroller.scrollWidth - scroller.clientWidth}px of its `
                    + 'columns clipped');
  });
  if (document.querySelector('[data-testid="stException"], .stException'))
    problems.push('an exception box');
  return problems;
}"""


def visual_problems(page) -> list[str]:
    """What a reader would trip over: chart texts (titles, axis titles, legends, annotations)
    overlapping each other, tables whose columns do not fit, an exception box."""
    return page.evaluate(VISUAL_PROBLEMS)


def full_page(page, path: Path, width: int) -> None:
    height = page.evaluate("""() => {
        const main = document.querySelector('[data-testid="stMain"]')
            || document.querySelector('section.main') || document.body;
        return Math.max(main.scrollHeight, window.innerHeight);
    }""")
    page.set_viewport_size({"width": width, "height": int(height) + 40})
    page.wait_for_timeout(1200)  # let Plotly redraw at the new size
    settled(page)
    page.screenshot(path=str(path))


def settled(page) -> None:
    """Wait until no script run is in flight and no element is a loading skeleton (a rerun that
    ends a job redraws the page once)."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
                           " && !document.querySelector('[data-testid=\"stSkeleton\"]')",
                           timeout=60_000)
    page.wait_for_timeout(500)


def shoot(browser, url: str, name: str, out: Path, size: tuple[int, int]) -> tuple[Path, list[str]]:
    """The page after its default experiment, saved whole at `size`; returns the picture and
    its visual problems (visual_problems), checked at that size."""
    route, preset, query = VARIANTS.get(name, (name, None, ""))
    experiments = [PAGES[route], *SECOND.get(route, [])]
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.goto(f"{url}/{route}{query}")
    page.get_by_text(re.compile("No GPU: runs train on the CPU|GPU")).first.wait_for(timeout=60_000)
    if preset:
        page.get_by_role("button", name=preset, exact=True).click()
        settled(page)
    for button, done in experiments:
        if not button:
            continue
        page.get_by_role("button", name=button, exact=True).first.click()
        if done.startswith("() =>"):
            page.wait_for_function(done, timeout=240_000)
        else:
            page.get_by_text(re.compile(done)).first.wait_for(timeout=240_000)
        page.wait_for_timeout(2000)
        settled(page)
    path = out / f"{name or 'home'}-{size[0]}x{size[1]}.png"
    full_page(page, path, size[0])
    problems = visual_problems(page)
    context.close()
    for problem in problems:
        print(f"{path.name}: {problem}", file=sys.stderr)
    return path, problems


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("out", type=Path)
    args.add_argument("--pages", default=",".join([*PAGES, *VARIANTS]))
    args.add_argument("--readme", action="store_true")
    opts = args.parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    port = free_port()
    server = start_server(port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name in opts.pages.split(","):
                for size in SIZES:
                    print(shoot(browser, f"http://127.0.0.1:{port}", name, opts.out, size)[0],
                          flush=True)
            if opts.readme:
                shot, _ = shoot(browser, f"http://127.0.0.1:{port}", "training_lab", opts.out,
                                (1400, 1000))
                (ROOT / "assets" / "screenshot.png").write_bytes(shot.read_bytes())
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
