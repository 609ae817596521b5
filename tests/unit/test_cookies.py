"""The browser's id cookie the launcher's server sends (bsdemo.ui.cookies): set once, HttpOnly,
SameSite=Lax, Secure over HTTPS, never over a well-formed one; WebSocket traffic untouched."""

from __future__ import annotations

import asyncio

from bsdemo.ui.cookies import COOKIE, BrowserCookie, has_id


def _response(scope_extra: dict, cookie: bytes | None = None) -> list[tuple[bytes, bytes]]:
    """The headers BrowserCookie lets through for one HTTP request to a tiny app."""
    sent = []

    async def app(scope, receive, send):
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]}
        )
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
    for bad in (
        f"{COOKIE}=xyz".encode(),
        f"{COOKIE}={'A' * 32}".encode(),
        b"\xff\x00;;=",
        f"{COOKIE}={'a' * 33}".encode(),
    ):
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


def _fetch(path: str, scheme: str = "http") -> dict:
    """One GET of `path` through BrowserCookie (to an app that must not be reached)."""
    sent = []

    async def app(scope, receive, send):
        raise AssertionError("the hand-over is answered by the middleware itself")

    async def send(message):
        sent.append(message)

    url, _, query = path.partition("?")
    asyncio.run(
        BrowserCookie(app)(
            {"type": "http", "scheme": scheme, "path": url, "query_string": query.encode(), "headers": []},
            None,
            send,
        )
    )
    return sent[0]


def test_a_class_seat_is_handed_over_once_httponly():
    """A page's class cookies go to the browser by a one-time token: the first fetch sets them
    HttpOnly (a None value deletes), a second or an unknown token gets 404 and nothing; names
    other than the class cookies, or odd values, are never handed over."""
    import pytest

    from bsdemo.ui.cookies import HANDOVER_PATH, hand_over

    token = hand_over({"bsdemo_class": "ABC123", "bsdemo_teach": None}, 3600)
    first = _fetch(f"{HANDOVER_PATH}?t={token}", scheme="https")
    cookies = _set_cookies(first["headers"])
    assert first["status"] == 204 and len(cookies) == 2
    assert cookies[0].startswith("bsdemo_class=ABC123; Path=/; Max-Age=3600; HttpOnly")
    assert "SameSite=Lax; Secure" in cookies[0] and "bsdemo_teach=; Path=/; Max-Age=0" in cookies[1]
    again = _fetch(f"{HANDOVER_PATH}?t={token}")
    assert again["status"] == 404 and _set_cookies(again["headers"]) == []
    assert _fetch(f"{HANDOVER_PATH}?t=made-up")["status"] == 404
    for bad in ({"bsdemo_browser": "a" * 32}, {"bsdemo_class": "x; Path=/evil"}):
        with pytest.raises(ValueError):
            hand_over(bad, 60)
