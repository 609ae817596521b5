"""Any URL a user can type renders the page with, at worst, a plain-text message: never an
exception box, never Markdown made from what the user typed, never a 100 KB echo."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bsdemo.config import QUOTE_CHARS, RunConfig
from bsdemo.plaintext import unescape
from tests.app.helpers import open_page
from tests.plain_check import is_plain

LAB = "pages/training_lab.py"
PAGES = [
    "pages/home.py",
    LAB,
    "pages/throughput.py",
    "pages/memory.py",
    "pages/finder.py",
    "pages/regimes.py",
    "pages/lr_scaling.py",
    "pages/accumulation.py",
]
ATTACKS = [
    {"run": "²"},
    {"run": "١٢"},
    {"run": "99999999999999999999"},
    {"dataset": "[click me](https://example.com)"},
    {"dataset": "![p](https://example.com/p.png)"},
    {"[click me](https://example.com)": "1"},
    {"lr": "<img src=x onerror=alert(1)>"},
    {"optimizer": ":red[alarm] :material/warning: $x^2$ www.example.com a@example.com"},
    {"x" * 100_000: "1"},
    {"batch_size": "9" * 5000},
    {f"p{i}": "1" for i in range(40)},  # more than a lab link ever has
    # past 1,000 parameters Streamlit drops the whole query string before the page sees it (a
    # server log line): the page shows the defaults and no message (nothing reached it)
    {f"p{i}": "1" for i in range(3000)},
]


def check_messages(at) -> int:
    """Assert every error and warning on the page is short plain text; returns how many."""
    assert not at.exception, at.exception
    messages = [m.value for m in [*at.error, *at.warning]]
    for body in messages:
        assert is_plain(body), body[:300]
        assert len(unescape(body)) <= 2 * QUOTE_CHARS + 400, len(body)
    return len(messages)


@pytest.mark.parametrize("query", ATTACKS, ids=lambda q: next(iter(q))[:12])
def test_known_attacks_get_a_plain_message_or_none(query):
    at = open_page(LAB, query)
    shown = check_messages(at)
    if "run" not in query and len(query) <= 1000:
        assert shown == 1  # each of these names a bad setting: the page says so, once
    assert at.button(key="run").disabled is False  # the defaults are there to run


@pytest.mark.parametrize("page", PAGES)
def test_every_page_ignores_a_hostile_query(page):
    check_messages(open_page(page, {"run": "²", "[a](https://example.com)": "x" * 5000}))


names = st.one_of(st.sampled_from([*RunConfig.__dataclass_fields__, "run"]), st.text(min_size=1, max_size=80))
values = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["-inf", "nan", "1e306", "none", "", "²", "[x](https://example.com)", "9" * 300]),
)


@given(st.dictionaries(names, values, min_size=1, max_size=5))
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_fuzzed_links_never_show_an_exception_box(query):
    check_messages(open_page(LAB, query))


SERVER_WITH_BAD_SETTINGS = r"""
import json, sys
from streamlit.testing.v1 import AppTest
from tests.timeouts import scaled  # run from the checkout: the suite's one timeout scale
at = AppTest.from_file(sys.argv[1], default_timeout=scaled(120))
at.run()
at.switch_page("pages/training_lab.py").run()
notices = [w.value for w in at.sidebar.warning]
at.button(key="run").click().run()
import time
for _ in range(600):
    at.run()
    if at.success or at.error or at.exception:
        break
    time.sleep(0.2)
from bsdemo.ui.state import scheduler  # the page's own (cached) scheduler
sched = scheduler()
print(json.dumps({"exception": bool(at.exception), "notices": notices,
                  "done": [s.value for s in at.success], "kind": type(sched).__name__,
                  "where": sched.where() if hasattr(sched, "where") else None}))
"""


@pytest.mark.parametrize(
    "setting",
    [
        "folder is a file",
        "damaged store",
        "database down",
        "database URL malformed",
        "ray cluster down",
        "ray address malformed",
    ],
)
def test_bad_server_settings_are_a_sidebar_notice_and_the_lab_trains_on(tmp_path, setting):
    """A fresh server (its own process: the scheduler is made once per process) with an
    unusable data folder and a bad thread setting, or with a damaged store: every page says so
    in the sidebar, as plain text, and Run still trains."""
    import json
    import os
    import subprocess
    import sys

    from tests.app.helpers import APP
    from tests.timeouts import scaled

    data = tmp_path / "data"
    if setting == "folder is a file":
        data.write_text("not a folder")
        env = {"BSDEMO_TORCH_THREADS": "many"}
    elif setting == "damaged store":
        data.mkdir()
        (data / "runs.sqlite3").write_bytes(b"SQLite format 3\0" + b"\xa5" * 8000)
        env = {}
    elif setting.startswith("ray"):  # the course's cluster: nobody at its port, or not an address
        from tests.services import free_port

        data.mkdir()
        env = {"BSDEMO_RAY_ADDRESS": f"127.0.0.1:{free_port()}" if "down" in setting else "ray://head"}
    else:  # a course's shared store: nothing listens at its port, or the URL is not one
        from tests.services import free_port

        data.mkdir()
        scheme = "postgresql" if setting == "database down" else "mysql"
        env = {"BSDEMO_DATABASE_URL": f"{scheme}://lab:hunter2@127.0.0.1:{free_port()}/runs"}
    out = subprocess.run(
        [sys.executable, "-c", SERVER_WITH_BAD_SETTINGS, APP],
        capture_output=True,
        text=True,
        timeout=scaled(240),
        env={**os.environ, "BSDEMO_DATA_DIR": str(data), **env},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert not seen["exception"] and seen["done"], seen
    assert all(is_plain(n) for n in seen["notices"])
    text = " ".join(unescape(n) for n in seen["notices"])
    if setting == "folder is a file":
        assert "Stored results are off" in text and "BSDEMO_TORCH_THREADS" in text
    elif setting == "damaged store":
        assert "run store was damaged" in text and "moved aside" in text
    elif setting.startswith("ray"):  # this replica trains on with its own queue, and says so
        assert "runs its own queue" in text
        if "malformed" in setting:
            assert "BSDEMO_RAY_ADDRESS" in text and "ray://head" in text
        else:
            import importlib.util

            ray = importlib.util.find_spec("ray") is not None
            assert ("could not be reached" if ray else "Ray is not installed") in text
    else:
        assert "Stored results are off" in text and "hunter2" not in text
        assert "lab:***@127.0.0.1" in text  # where, with the password masked
        if setting == "database URL malformed":
            assert "BSDEMO_DATABASE_URL" in text
        else:  # without the cluster extra, the notice says the driver is missing instead
            import importlib.util

            driver = importlib.util.find_spec("psycopg") is not None
            assert ("could not be reached" if driver else "driver is not installed") in text
        assert not (data / "runs.sqlite3").exists()  # no silent fallback to a store of its own
