"""Shared AppTest helpers: open a page through app.py, and rerun until a condition holds."""

from __future__ import annotations

import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.timeouts import scaled

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def open_page(page: str, query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def run_until(at: AppTest, predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        at.run()
        assert not at.exception, at.exception
        if predicate(at):
            return
        time.sleep(0.2)
    raise AssertionError("the page did not reach the expected state in time")


def closing(at) -> str:
    """What the page says in words after a result: its takeaways (boxes) and the explanations
    folded under them (Markdown), as one text to search."""
    return "\n\n".join(
        e.value for kind in (at.info, at.success, at.warning, at.error, at.markdown) for e in kind
    )
