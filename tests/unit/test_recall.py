"""bsdemo.recall: a browser's runs, predictions and quiz answers, kept for its next reload."""

from __future__ import annotations

import threading

from bsdemo.recall import BrowserMemory


def test_a_browser_gets_back_the_very_object_it_worked_on():
    memory = BrowserMemory()
    runs = memory.get("a", "runs", list)
    runs.append(7)
    assert memory.get("a", "runs", list) == [7]  # a reload: the same browser
    assert memory.get("b", "runs", list) == []  # another browser starts empty
    assert memory.get("a", "predictions", dict) == {}  # names kept apart


def test_only_the_most_recently_seen_browsers_are_kept():
    memory = BrowserMemory(browsers=2)
    memory.get("a", "runs", list).append(1)
    memory.get("b", "runs", list).append(2)
    memory.get("a", "runs", list)  # a seen again: b is now the least recent
    memory.get("c", "runs", list)
    assert len(memory) == 2
    assert memory.get("a", "runs", list) == [1]
    assert memory.get("b", "runs", list) == []  # forgotten, then new


def test_many_sessions_at_once_share_one_entry_per_browser():
    memory = BrowserMemory()
    got = []
    threads = [threading.Thread(target=lambda: got.append(memory.get("a", "runs", list))) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(g) for g in got}) == 1
