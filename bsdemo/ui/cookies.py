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
from http.cookies import SimpleCookie
from typing import Any

COOKIE = "bsdemo_browser"
COOKIE_DAYS = 30
SECRET = re.compile(r"[0-9a-f]{32}")


def new_secret() -> str:
    return secrets.token_hex(16)


def header(secret: str, secure: bool) -> bytes:
    """The Set-Cookie value that gives a browser its id."""
    return (f"{COOKIE}={secret}; Path=/; Max-Age={COOKIE_DAYS * 86400}; HttpOnly; SameSite=Lax"
            + ("; Secure" if secure else "")).encode("ascii")


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
        if has_id(headers.get(b"cookie")):
            await self.app(scope, receive, send)
            return
        # a proxy's X-Forwarded-Proto can only add Secure: a forged one restricts, never opens
        secure = scope.get("scheme") == "https" or headers.get(b"x-forwarded-proto") == b"https"
        value = header(new_secret(), secure)

        async def with_cookie(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"set-cookie", value)]}
            await send(message)

        await self.app(scope, receive, with_cookie)
