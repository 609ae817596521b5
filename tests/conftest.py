"""Shared fixtures: one warm scheduler for the scheduler tests (workers take seconds to start)."""

from __future__ import annotations

import os
import tempfile
import time

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from bsdemo.limits import Limits
from bsdemo.scheduler import Scheduler
from tests.timeouts import SCALE, scaled

# Hypothesis keeps its examples outside the checkout: a test run leaves the tree as it found it
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "bsdemo-hypothesis"))
settings.register_profile("bsdemo", database=None if os.environ.get("CI") else settings().database)
settings.load_profile("bsdemo")


def pytest_collection_modifyitems(items):
    """pytest-timeout's per-test limit (pyproject's timeout) scales with the test waits; a test
    marked gpu is skipped where torch sees no CUDA device."""
    cuda = None
    for item in items:
        marker = item.get_closest_marker("timeout")
        seconds = marker.args[0] if marker and marker.args else 300
        item.add_marker(pytest.mark.timeout(seconds * SCALE))
        if item.get_closest_marker("gpu"):  # the CUDA paths: run by bench/gpu_check.py on a GPU
            if cuda is None:
                import torch

                cuda = torch.cuda.is_available()
            if not cuda:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture(scope="module")
def scheduler():
    # one run at a time: the queue's rules are what these tests look at (turns: test_turns.py)
    sched = Scheduler(workers=1, limits=Limits(turns=1))
    deadline = time.monotonic() + scaled(60)
    while not sched.workers_ready() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sched.workers_ready(), "the worker did not start within 60 s"
    yield sched
    sched.close()


def _leads_checked(name, verdict):
    """verdict, wrapped: every closing text it returns must lead with one short sentence."""
    from bsdemo.recipes import closing

    def checked(*args, **kwargs):
        out = verdict(*args, **kwargs)
        text = out[1] if isinstance(out, tuple) else out
        if text is not None:
            problem = closing.lead_problem(text)
            assert problem is None, f"recipes.{name}: {problem}"
        return out

    return checked


@pytest.fixture(autouse=True)
def closing_texts_lead_with_one_short_sentence(monkeypatch):
    """Every closing text a test (or a page under AppTest) draws from bsdemo.recipes leads with
    its takeaway: one sentence of at most LEAD_WORDS words (the page folds the rest)."""
    from bsdemo import recipes

    for name in recipes.VERDICTS:
        monkeypatch.setattr(recipes, name, _leads_checked(name, getattr(recipes, name)))


@pytest.fixture(scope="session")
def postgres_server():
    """One real PostgreSQL server for the session (skipped where none can be started, failed
    instead when BSDEMO_REQUIRE_SERVICES names postgres)."""
    from tests.services import PostgresServer

    server = PostgresServer()
    yield server
    server.close()


@pytest.fixture
def postgres_url(postgres_server):
    """A fresh database on the session's server."""
    return postgres_server.new_database()
