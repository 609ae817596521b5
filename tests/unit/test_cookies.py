"""The browser's id cookie the launcher's server sends (bsdemo.ui.cookies): set once, HttpOnly,
SameSite=Lax, Secure over HTTPS, never over a well-formed one; WebSocket traffic untouched."""

from __future__ import annotations

import asyncio

from bsdemo.ui.cookies import COOKIE, BrowserCookie, has_id


def _response(scope_extra: dict, cookie: bytes | None = None) -> list[tuple[bytes, bytes]]:
    """The headers BrowserCookie lets through for one HTTP request to a tiny app."""
    sent = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": b"ok"})

    async def send(message):
        sent.append(message)

    headers = [(b"cookie", cookie)] if cookie else []
    scope = {"type": "http", "scheme": "http", "headers": headers} | scope_extra
    asyncio.run(BrowserCookie(app)(scope, None, send))
    return sent[0]["headers"]


def _set_cookies(headers) -> list[str]:
    return [v.decode() for k, v in headers if k == b"set-cookie"]


def test_a_browser_without_an_id_gets_one_no_script_can_read():
    (value,) = _set_cookies(_response({}))
    assert value.startswith(f"{COOKIE}=") and "; HttpOnly" in value and "; SameSite=Lax" in value
    assert "; Path=/" in value and "Max-Age=" in value and "Secure" not in value
    secret = value.split(";")[0].split("=", 1)[1]
    assert has_id(f"{COOKIE}={secret}".encode())
    (again,) = _set_cookies(_response({}))
    assert again.split(";")[0] != value.split(";")[0]  # a fresh random id each new browser


def test_over_https_the_id_is_secure_and_a_good_id_is_left_alone():
    assert "; Secure" in _set_cookies(_response({"scheme": "https"}))[0]
    proxied = _response({"headers": [(b"x-forwarded-proto", b"https")]})
    assert "; Secure" in _set_cookies(proxied)[0]
    good = f"other=1; {COOKIE}={'a' * 32}".encode()
    assert _set_cookies(_response({}, good)) == []
    for bad in (f"{COOKIE}=xyz".encode(), f"{COOKIE}={'A' * 32}".encode(), b"\xff\x00;;=",
                f"{COOKIE}={'a' * 33}".encode()):
        assert len(_set_cookies(_response({}, bad))) == 1, bad


def test_websocket_traffic_passes_untouched():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["type"])
        await send({"type": "websocket.accept"})

    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(BrowserCookie(app)({"type": "websocket", "headers": []}, None, send))
    assert seen == ["websocket"] and sent == [{"type": "websocket.accept"}]
