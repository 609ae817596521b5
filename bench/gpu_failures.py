"""bench/gpu_check.py's record of its checks: `check` prints a check's ok or FAIL and keeps what
failed in FAILURES."""

from __future__ import annotations

FAILURES: list[str] = []


def check(ok: bool, what: str) -> str:
    if not ok:
        FAILURES.append(what)
    return "ok" if ok else "FAIL"
