"""This browser's seat in a class (instructor or member), kept in two first-party cookies —
handed over by the server, HttpOnly, under the launcher (bsdemo.ui.cookies), else set by script,
as the browser's own id is (bsdemo.ui.state): `bsdemo_class` holds the code of the class it
joined, `bsdemo_teach` the code and key of the class it teaches. A join link (`?join=CODE`) and
an instructor link (`?teach=CODE.KEY`) are taken off the URL as soon as they are read, so
neither a reload nor a copied address repeats them. Also the process-wide parts: the classes'
store, the rate limits, the lab's public address and its QR code."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import streamlit as st

from bsdemo.classroom import rules
from bsdemo.classroom.rules import RateLimit
from bsdemo.classroom.store import ClassError, ClassStore
from bsdemo.errors import ConfigError
from bsdemo.store import StoreUnavailable
from bsdemo.ui import cookies as handed
from bsdemo.ui.state import client_address, owner

CLASS_COOKIE = "bsdemo_class"
TEACH_COOKIE = "bsdemo_teach"
PUBLIC_URL_ENV = "BSDEMO_PUBLIC_URL"  # the lab's address as students reach it (join links, QR)
SEAT_KEY = "class_seat"
MEMBER_POLL_S = 2.0  # a member's page looks for a reveal or a new round this often
ROOM_POLL_S = 1.0  # the projector's tally


@dataclass(frozen=True)
class Seat:
    """This browser in a class: its code, and either its member id or the instructor key."""

    code: str
    member: str | None = None
    key: str | None = None

    @property
    def teaching(self) -> bool:
        return self.key is not None


# ----- process-wide -----
@st.cache_resource(show_spinner=False)
def class_store() -> ClassStore | None:
    """The classes' store: the run store's database (PostgreSQL at BSDEMO_DATABASE_URL, else
    SQLite in BSDEMO_DATA_DIR, else in ~/.cache/bsdemo), opened by this process; classes past
    BSDEMO_CLASS_RETENTION_DAYS are deleted as it opens. None when no database can be used."""
    from bsdemo.classroom.store import open_classes

    try:
        classes = open_classes()
    except (ConfigError, OSError):
        return None  # the pages say classes need a database
    try:
        classes.purge(retention())
    except (StoreUnavailable, ClassError):
        pass  # tried again at the next class started
    return classes


def retention() -> float:
    try:
        return rules.retention_days(os.environ.get(rules.RETENTION_ENV))
    except ConfigError:
        return rules.RETENTION_DAYS


@st.cache_resource(show_spinner=False)
def limits() -> dict[str, RateLimit]:
    """This process's rate limits (each replica counts its own connections)."""
    return {
        "wrong": RateLimit(rules.WRONG_CODES_PER_MINUTE, 60.0),
        "joins": RateLimit(rules.JOINS_PER_ADDRESS_PER_10_MIN, 600.0),
        "member_votes": RateLimit(rules.VOTES_PER_MEMBER_PER_MINUTE, 60.0),
        "address_votes": RateLimit(rules.VOTES_PER_ADDRESS_PER_MINUTE, 60.0),
    }


def public_url() -> str:
    """The lab's root as students reach it: BSDEMO_PUBLIC_URL, else this page's own address."""
    given = (os.environ.get(PUBLIC_URL_ENV) or "").strip()
    if given:
        return given.rstrip("/") + "/"
    url = getattr(st.context, "url", None) or "http://localhost:8501/"
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/", "", ""))


def join_link(code: str) -> str:
    return f"{public_url()}?join={code}"


@st.cache_data(show_spinner=False, max_entries=64)
def qr_png(text: str) -> bytes:
    """A QR code of text as a PNG (segno; error correction M: a projector's glare and a phone
    at the back of the room)."""
    import segno

    buffer = io.BytesIO()
    segno.make(text, error="m").save(buffer, kind="png", scale=10, border=2)
    return buffer.getvalue()


def qr_alt(code: str) -> str:
    """What a screen reader says for the QR code: what it opens."""
    return f"QR code: the join link of class {code}, {join_link(code)}"


# ----- this browser's seat -----
def seat() -> Seat | None:
    """This browser's seat in a class (from its cookies on a tab's first run), or None."""
    state = st.session_state
    if SEAT_KEY not in state:
        state[SEAT_KEY] = _seat_from_cookies()
    return state[SEAT_KEY]


def _seat_from_cookies() -> Seat | None:
    cookies = st.context.cookies or {}
    if not (cookies.get(TEACH_COOKIE) or cookies.get(CLASS_COOKIE)):
        return None  # a browser in no class: no store opened on its page's path
    classes = class_store()
    if classes is None:
        return None
    try:
        teach = cookies.get(TEACH_COOKIE)
        if isinstance(teach, str) and "." in teach:
            code, key = teach.split(".", 1)
            if classes.is_instructor(code, key):
                return Seat(code, key=key)
        code = cookies.get(CLASS_COOKIE)
        if isinstance(code, str) and code:
            code = rules.parse_code(code)
            member = rules.member_id(code, owner())
            if classes.is_member(code, member):
                return Seat(code, member=member)
    except (ConfigError, ClassError, StoreUnavailable):
        pass
    return None


def _sit(new: Seat | None) -> None:
    """Take a seat (None: leave) and tell the browser's cookies at the end of this run."""
    st.session_state[SEAT_KEY] = new
    if new is None:
        st.session_state["class_cookies"] = {CLASS_COOKIE: None, TEACH_COOKIE: None}
    elif new.teaching:
        st.session_state["class_cookies"] = {TEACH_COOKIE: f"{new.code}.{new.key}", CLASS_COOKIE: None}
    else:
        st.session_state["class_cookies"] = {CLASS_COOKIE: new.code, TEACH_COOKIE: None}


def write_cookies() -> None:
    """Give the browser the seat's cookies: handed over by the server, HttpOnly, where the lab
    runs behind bsdemo.ui.cookies (the launcher: the page fetches them with a one-time token);
    else written by script (a plain `streamlit run`)."""
    wanted = st.session_state.pop("class_cookies", None)
    if not wanted:
        return
    days = max(1, int(retention()) + 1)
    if handed.server_cookies():
        token = handed.hand_over(wanted, days * 86400)
        with st.sidebar:
            st.html(
                f'<script>fetch("{handed.HANDOVER_PATH.lstrip("/")}?t={token}", '
                '{credentials: "same-origin", cache: "no-store"});</script>',
                unsafe_allow_javascript=True,
            )
        return
    lines = []
    for name, value in wanted.items():
        age = days * 86400 if value else 0
        lines.append(
            f'document.cookie = "{name}={value or ""}; path=/; max-age={age}; '
            f'samesite=lax" + (location.protocol === "https:" ? "; secure" : "");'
        )
    with st.sidebar:
        st.html("<script>" + "\n".join(lines) + "</script>", unsafe_allow_javascript=True)


def take_link() -> None:
    """A join link's or an instructor link's parameter, read once and taken off the URL (app.py
    calls this before the page reads its own link)."""
    params = st.query_params
    if "teach" in params:
        raw = str(params["teach"])
        del params["teach"]
        code, _, key = raw.partition(".")
        classes = class_store()
        try:
            code = rules.parse_code(code)
            if classes is None or not classes.is_instructor(code, key):
                raise ClassError(
                    "This instructor link does not open a class here: it may have "
                    "been mistyped, or the class deleted."
                )
            _sit(Seat(code, key=key))
        except (ConfigError, ClassError, StoreUnavailable) as exc:
            st.session_state["class_message"] = str(exc)
    if "join" in params:
        raw = str(params["join"])
        del params["join"]
        st.session_state["join_code"] = raw[: rules.MAX_TYPED]
        join(raw, None, from_link=True)


def join(raw: str, password: str | None, from_link: bool = False) -> bool:
    """Join the class with the typed or linked code; the outcome goes to the page's message.
    A class with a password asked for by link opens the form on Home instead."""
    classes = class_store()
    address = client_address()
    if classes is None:
        st.session_state["class_message"] = (
            "Classes need a database this server can write (BSDEMO_DATA_DIR or BSDEMO_DATABASE_URL)."
        )
        return False
    try:
        if limits()["wrong"].blocked(address):
            raise ClassError(
                f"Too many wrong codes from this network "
                f"({rules.WRONG_CODES_PER_MINUTE} a minute): wait a minute and type "
                "the code again."
            )
        try:
            code = rules.parse_code(raw)
        except ConfigError:
            limits()["wrong"].record(address)
            raise
        if from_link and password is None:
            info = classes.info(code)
            if info is not None and info.open and info.has_password:
                st.session_state["class_message"] = None
                st.session_state["join_needs_password"] = True
                return False
        if not limits()["joins"].allow(address):
            raise ClassError(
                "This network has added as many members as a class server allows "
                f"in ten minutes ({rules.JOINS_PER_ADDRESS_PER_10_MIN}); wait a "
                "little and join again."
            )
        try:
            member = classes.join(code, owner(), password)
        except ClassError:
            limits()["wrong"].record(address)
            raise
    except (ConfigError, ClassError, StoreUnavailable) as exc:
        st.session_state["class_message"] = str(exc)
        return False
    _sit(Seat(code, member=member))
    info = classes.info(code)
    st.session_state["class_message"] = None
    st.session_state["class_joined"] = (
        f"You joined the class {code}"
        + (f" — {info.title}" if info and info.title else "")
        + ". Your predictions now go to the room, anonymously."
    )
    return True


def start(title: str, password: str | None) -> None:
    classes = class_store()
    if classes is None:
        st.session_state["class_message"] = (
            "Classes need a database this server can write (BSDEMO_DATA_DIR or BSDEMO_DATABASE_URL)."
        )
        return
    try:
        password = password or os.environ.get(rules.PASSWORD_ENV) or None
        code, key = classes.start(title, password)
        classes.purge(retention())
    except (ConfigError, ClassError, StoreUnavailable) as exc:
        st.session_state["class_message"] = str(exc)
        return
    _sit(Seat(code, key=key))
    st.session_state["class_message"] = None
    st.session_state["teach_link_once"] = f"{public_url()}?teach={code}.{key}"


def leave() -> None:
    _sit(None)
    st.session_state.pop("teach_link_once", None)


def end() -> None:
    current = seat()
    try:
        class_store().end(current.code, current.key)
    except (ClassError, StoreUnavailable) as exc:
        st.session_state["class_message"] = str(exc)
