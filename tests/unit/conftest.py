"""Fixtures the unit tests of one subject share."""

from __future__ import annotations

import pytest

from bsdemo.classroom.store import ClassStore
from bsdemo.store import open_store


@pytest.fixture(params=["sqlite", "postgres"])
def classes(request, tmp_path):
    """A ClassStore over each run store: the embedded SQLite file, and a real PostgreSQL
    (tests/services.py)."""
    if request.param == "sqlite":
        store = open_store(tmp_path / "data")
    else:
        store = open_store(None, request.getfixturevalue("postgres_url"))
    assert store.available, store.notice
    yield ClassStore(store)
    store.close()
