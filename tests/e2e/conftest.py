"""The browser every end-to-end test drives: real headless Chromium (Debian's package)."""

from __future__ import annotations

import pytest

from tests.e2e.test_browser import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
