"""The browser every end-to-end test drives: real headless Chromium (Debian's package); and
axe-core, the accessibility checker injected into its pages (npm's package, .ci/run installs it)."""

from __future__ import annotations

import warnings

import pytest

from scripts.screenshots import AXE_JS
from tests.e2e.test_browser import CHROMIUM, CHROMIUM_ARGS
from tests.services import REQUIRED


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def axe() -> bool:
    """Whether axe-core is here to check pages with: a test without it still checks the rest,
    with a warning; where BSDEMO_REQUIRE_SERVICES names axe (CI), its absence fails."""
    if AXE_JS.exists():
        return True
    why = f"axe-core is not installed ({AXE_JS}: npm install --prefix .ci/axe axe-core@4)"
    if "axe" in REQUIRED:
        pytest.fail(f"axe is required (BSDEMO_REQUIRE_SERVICES) but {why}")
    warnings.warn(why, stacklevel=1)
    return False
