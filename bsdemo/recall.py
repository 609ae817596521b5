"""What each browser did in the lab — its runs, its predictions, its quiz answers — kept in the
server process, so a reload of the same browser (the same cookie, so the same owner) brings it
back instead of an empty page (pure Python).

A value is the very object the browser's sessions work on: two tabs of one browser share it,
and a reload picks it up as the last tab left it. Bounded: the `browsers` most recently seen
are kept; a server restart forgets them all (the runs themselves live in the scheduler and the
run store, which say when one is gone).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

KEPT_BROWSERS = 2000


class BrowserMemory:
    def __init__(self, browsers: int = KEPT_BROWSERS):
        self.browsers = browsers
        self._kept: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()  # sessions run on threads of their own

    def get(self, owner: str, name: str, factory: Callable[[], Any]) -> Any:
        """The browser's `name` (made by `factory` the first time); it becomes the most recently
        seen, and the least recently seen past `browsers` is forgotten."""
        with self._lock:
            entry = self._kept.pop(owner, None) or {}
            self._kept[owner] = entry
            while len(self._kept) > self.browsers:
                self._kept.popitem(last=False)
            if name not in entry:
                entry[name] = factory()
            return entry[name]

    def __len__(self) -> int:
        return len(self._kept)
