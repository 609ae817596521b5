"""Full-page screenshots of every page after its default experiment, in real Chromium.

Starts the lab on a free port, opens each page at 1280x720 and at 1920x1080, presses the page's
default experiment button (where it has one), waits for it to finish, and saves the whole page
(Streamlit scrolls inside its own container, so the viewport is grown to the content's height).

    .venv/bin/python scripts/screenshots.py OUT_DIR [--pages training_lab,memory] [--readme] [--axe]

--readme also refreshes assets/screenshot.png (the Training Lab at 1400 px) for the README;
--axe checks each page with axe-core (AXE_JS) and prints what it found.
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

from scripts.chromium import CHROMIUM, CHROMIUM_ARGS, free_port, settled, start_server  # noqa: E402
from scripts.page_checks import (  # noqa: E402
    AXE_JS,
    PHONE,
    axe_problems,
    phone_problems,
    settled_first_screen,
    visual_problems,
)

__all__ = ["AXE_JS", "PAGES", "PHONE", "SECOND", "SIZES", "VARIANTS", "axe_problems", "full_page", "shoot"]

SIZES = [(1280, 720), (1920, 1080)]
# page -> (button that starts its default experiment, what says it finished: a text's pattern,
# or a JavaScript predicate for the comparison pages, done when their progress line is gone)
COMPARISON_DONE = (
    "() => !!document.querySelector('[data-testid=\"stDataFrame\"]')"
    " && !document.body.innerText.includes('runs done')"
)
PAGES = {
    "": (None, None),
    "training_lab": ("Run", r"^Completed \d+ steps"),
    "throughput": ("Run sweep", r"^Samples/s rose"),
    "memory": ("Measure memory", r"out of memory"),
    "finder": ("Find my batch size", r"^Use batch \d+"),
    "regimes": ("Train all three", r"made [\d,]+ weight updates"),
    "lr_scaling": ("Compare", COMPARISON_DONE),
    "accumulation": ("Compare", r"^(Equivalent|Not equivalent)"),
    "norms": ("Train the grid", r"^At batch \d+ BatchNorm reached"),
    "noise": ("Measure the noise", r"^The gradient's variance fell"),
    "sharpness": (
        "Train both to the target",
        r"found the sharper minimum|about as sharp|did not reach the training loss",
    ),
    "fit_batch": ("Fit the biggest batch", r"^Under .*, fp32 fits batch"),
    "quiz": (None, None),
}
# a page another way: name -> (page, a preset's button to press first, the link's query); then the
# page's own experiment
# pages with more experiments, run after the first: name -> [(its button, what says it finished)]
SECOND = {
    "noise": [
        (
            "Train to the target at each batch",
            r"^The critical batch is about|critical batch (can|could) be read",
        )
    ],
    "fit_batch": [
        ("Run the process group", r"^\d+ processes × batch \d+ = batch"),
        ("Run the pipeline", r"^Each stage held at most"),
    ],
    "finder": [("Measure each architecture", r"meets the rule of thumb's")],
    "throughput": [("Profile batch 8 and 512", r"^At batch 8 about")],
}
VARIANTS = {
    "lr_scaling-warmup": ("lr_scaling", "Warm-up (Adam, k = 32)", ""),
    "sharpness-remedies": ("sharpness", "Every remedy", ""),
    "lr_scaling-present": ("lr_scaling", None, "?present=1&hide=preset,size,grid_epochs"),
    "training_lab-present": ("training_lab", None, "?present=1&hide=seed,advanced"),
    "training_lab-gan": (
        "training_lab",
        None,
        "?dataset=digits&model=gan&width=128&depth=2&optimizer=adam&lr=0.001&epochs=30",
    ),
    "training_lab-lstm": ("training_lab", None, "?model=lstm&width=64&depth=1&optimizer=adam&lr=0.01"),
    "training_lab-spirals": ("training_lab", None, "?dataset=spirals&width=64&depth=3&lr=0.1&epochs=30"),
}


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


def shoot(
    browser, url: str, name: str, out: Path, size: tuple[int, int], axe: bool = False
) -> tuple[Path, list[str]]:
    """The page after its default experiment, saved whole at `size`; returns the picture and
    its problems at that size: its first screen's (first_screen_problems), its whole
    page's (visual_problems) and, with `axe`, its serious and critical accessibility
    violations (axe_problems); then the same results projected (?present=1), the first screen
    checked again and saved beside it."""
    route, preset, query = VARIANTS.get(name, (name, None, ""))
    experiments = [PAGES[route], *SECOND.get(route, [])]
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.goto(f"{url}/{route}{query}")
    page.get_by_text(re.compile("No GPU: runs train on the CPU|GPU")).first.wait_for(timeout=60_000)
    if preset:
        page.get_by_role("button", name=preset, exact=True).click()
        page.mouse.move(0, 0)  # off the button: its tooltip would cover the Run above it
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
    phone = size == PHONE
    problems = (
        phone_problems(page, route)
        if phone
        else settled_first_screen(page, route, expect=bool(experiments[0][0]))
    )
    if axe:  # at the viewport's own size, before the picture grows it
        problems += axe_problems(page, f"{name or 'home'} at {size[0]}x{size[1]}")
    full_page(page, path, size[0])
    # a phone's tables scroll sideways inside their own frames: only the rest counts there
    problems += [p for p in visual_problems(page) if not (phone and p.startswith("table "))]
    if experiments[0][0] and "present=1" not in query and not phone:  # the same, projected
        page.set_viewport_size({"width": size[0], "height": size[1]})
        page.goto(f"{url}/{route}{query}{'&' if query else '?'}present=1")
        page.get_by_role("button", name=experiments[0][0], exact=True).first.wait_for(timeout=60_000)
        settled(page)
        page.wait_for_timeout(1500)  # Plotly draws after the script run
        projected = out / f"{name or 'home'}-{size[0]}x{size[1]}-present-first.png"
        problems += [f"projected: {p}" for p in settled_first_screen(page, route)]
        page.screenshot(path=str(projected))
    context.close()
    for problem in problems:
        print(f"{path.name}: {problem}", file=sys.stderr)
    return path, problems


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("out", type=Path)
    args.add_argument("--pages", default=",".join([*PAGES, *VARIANTS]))
    args.add_argument("--readme", action="store_true")
    args.add_argument("--axe", action="store_true", help="check each page with axe-core too")
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
                    print(
                        shoot(browser, f"http://127.0.0.1:{port}", name, opts.out, size, axe=opts.axe)[0],
                        flush=True,
                    )
            if opts.readme:
                shot, _ = shoot(browser, f"http://127.0.0.1:{port}", "training_lab", opts.out, (1400, 1000))
                (ROOT / "assets" / "screenshot.png").write_bytes(shot.read_bytes())
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
