"""The browser's id cookie, sent by the server: HttpOnly (no script in the page can read it),
SameSite=Lax, and Secure when the page came over HTTPS.

Streamlit gives a page no way to send Set-Cookie, so `python -m bsdemo.ui.launch` serves the lab
as an ASGI app (bsdemo.ui.serve) with `BrowserCookie` in front: the first request of a browser
without a well-formed id gets one. The WebSocket that follows carries it, and the page reads it
from the connection (bsdemo.ui.state.browser_secret). A lab started with a plain
`streamlit run app.py` has no such middleware: there the page writes the cookie by script, as
before (not HttpOnly). Pure Python: no Streamlit import.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

COOKIE = "bsdemo_browser"
COOKIE_DAYS = 30
SECRET = re.compile(r"[0-9a-f]{32}")


# ----- a page's cookies handed to the browser by the server (a class seat, an instructor's key) -
HANDOVER_PATH = "/_bsdemo/cookies"  # the page fetches it with a one-time token: Set-Cookie back
HANDOVER_S = 60.0  # a token not fetched within this long is dropped
HANDED = frozenset({"bsdemo_class", "bsdemo_teach"})  # the only cookies a hand-over may set
_VALUE = re.compile(r"[A-Za-z0-9._-]{1,200}")
_pending: dict[str, tuple[float, dict[str, str | None], int]] = {}
_lock = threading.Lock()


def hand_over(cookies: dict[str, str | None], max_age_s: int) -> str:
    """A one-time token under which the server holds `cookies` (name -> value, None: delete) for
    the page to fetch at HANDOVER_PATH: the browser then gets them HttpOnly."""
    for name, value in cookies.items():
        if name not in HANDED or (value is not None and not _VALUE.fullmatch(value)):
            raise ValueError(f"not a cookie a page hands over: {name}")
    token = secrets.token_urlsafe(24)
    now = time.monotonic()
    with _lock:
        for old in [t for t, (at, _, _) in _pending.items() if now - at > HANDOVER_S]:
            del _pending[old]
        _pending[token] = (now, dict(cookies), int(max_age_s))
    return token


def _take(token: str) -> tuple[dict[str, str | None], int] | None:
    with _lock:
        held = _pending.pop(token, None)
    if held is None or time.monotonic() - held[0] > HANDOVER_S:
        return None
    return held[1], held[2]


def server_cookies() -> bool:
    """Whether this process serves the lab through BrowserCookie (bsdemo.ui.serve said so): a
    page can then hand cookies over."""
    return _serving


def serving() -> None:
    """Mark this process as serving through BrowserCookie (bsdemo.ui.serve)."""
    global _serving
    _serving = True


_serving = False


def new_secret() -> str:
    return secrets.token_hex(16)


def header(secret: str, secure: bool) -> bytes:
    """The Set-Cookie value that gives a browser its id."""
    return (
        f"{COOKIE}={secret}; Path=/; Max-Age={COOKIE_DAYS * 86400}; HttpOnly; SameSite=Lax"
        + ("; Secure" if secure else "")
    ).encode("ascii")


def has_id(cookie_header: bytes | None) -> bool:
    """Whether a request's Cookie header holds a well-formed browser id."""
    if not cookie_header:
        return False
    jar = SimpleCookie()
    try:
        jar.load(cookie_header.decode("latin-1"))
    except Exception:  # noqa: BLE001 - a malformed header: as good as none
        return False
    morsel = jar.get(COOKIE)
    return morsel is not None and SECRET.fullmatch(morsel.value) is not None


class BrowserCookie:
    """ASGI middleware: an HTTP response to a request without a well-formed browser id sets one
    (HttpOnly; Secure when the request came over HTTPS, directly or as its proxy says)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if scope.get("path", "").endswith(HANDOVER_PATH):
            await self._hand_over(scope, headers, send)
            return
        if has_id(headers.get(b"cookie")):
            await self.app(scope, receive, send)
            return
        # a proxy's X-Forwarded-Proto can only add Secure: a forged one restricts, never opens
        secure = scope.get("scheme") == "https" or headers.get(b"x-forwarded-proto") == b"https"
        value = header(new_secret(), secure)

        async def with_cookie(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", value)]}
            await send(message)

        await self.app(scope, receive, with_cookie)

    @staticmethod
    async def _hand_over(scope: dict, headers: dict, send: Any) -> None:
        """GET HANDOVER_PATH?t=TOKEN: the cookies held under that token, once, HttpOnly; 404
        (and no cookie) for a token unknown, used or expired."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        held = _take((query.get("t") or [""])[0])
        secure = scope.get("scheme") == "https" or headers.get(b"x-forwarded-proto") == b"https"
        out = [(b"cache-control", b"no-store"), (b"content-length", b"0")]
        for name, value in held[0].items() if held else []:
            age = held[1] if value is not None else 0
            out.append(
                (
                    b"set-cookie",
                    (
                        f"{name}={value or ''}; Path=/; Max-Age={age}; HttpOnly; "
                        "SameSite=Lax" + ("; Secure" if secure else "")
                    ).encode(),
                )
            )
        await send({"type": "http.response.start", "status": 204 if held else 404, "headers": out})
        await send({"type": "http.response.body", "body": b""})
