"""A class in the browser: starting one, joining one, this browser's seat in it (instructor or
member), the members' votes, and the projector's view of the room's answers.

Who this browser is in a class is kept in two first-party cookies — handed over by the server,
HttpOnly, under the launcher (bsdemo.ui.cookies), else set by script, as the browser's own id is
(bsdemo.ui.state): `bsdemo_class` holds the code of the class it joined,
`bsdemo_teach` the code and key of the class it teaches. A join link (`?join=CODE`) and an
instructor link (`?teach=CODE.KEY`) are taken off the URL as soon as they are read, so neither a
reload nor a copied address repeats them. The rules and the store are bsdemo.classroom's; this
module only draws them.
"""

from __future__ import annotations

import html
import io
import json
import os
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import streamlit as st

from bsdemo.charts.room import room_votes_chart
from bsdemo.classroom import rules
from bsdemo.classroom.rules import RateLimit
from bsdemo.classroom.store import ClassError, ClassStore
from bsdemo.errors import ConfigError, clip
from bsdemo.lessons import BY_SLUG
from bsdemo.plaintext import plain
from bsdemo.store import StoreUnavailable
from bsdemo.ui import cookies as handed
from bsdemo.ui.links import presenting
from bsdemo.ui.state import client_address, owner
from bsdemo.units import fixed, percent, setting

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
    return {"wrong": RateLimit(rules.WRONG_CODES_PER_MINUTE, 60.0),
            "joins": RateLimit(rules.JOINS_PER_ADDRESS_PER_10_MIN, 600.0),
            "member_votes": RateLimit(rules.VOTES_PER_MEMBER_PER_MINUTE, 60.0),
            "address_votes": RateLimit(rules.VOTES_PER_ADDRESS_PER_MINUTE, 60.0)}


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
        st.session_state["class_cookies"] = {TEACH_COOKIE: f"{new.code}.{new.key}",
                                             CLASS_COOKIE: None}
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
            st.html(f'<script>fetch("{handed.HANDOVER_PATH.lstrip("/")}?t={token}", '
                    '{credentials: "same-origin", cache: "no-store"});</script>',
                    unsafe_allow_javascript=True)
        return
    lines = []
    for name, value in wanted.items():
        age = days * 86400 if value else 0
        lines.append(f'document.cookie = "{name}={value or ""}; path=/; max-age={age}; '
                     f'samesite=lax" + (location.protocol === "https:" ? "; secure" : "");')
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
                raise ClassError("This instructor link does not open a class here: it may have "
                                 "been mistyped, or the class deleted.")
            _sit(Seat(code, key=key))
        except (ConfigError, ClassError, StoreUnavailable) as exc:
            st.session_state["class_message"] = str(exc)
    if "join" in params:
        raw = str(params["join"])
        del params["join"]
        st.session_state["join_code"] = raw[:rules.MAX_TYPED]
        join(raw, None, from_link=True)


def join(raw: str, password: str | None, from_link: bool = False) -> bool:
    """Join the class with the typed or linked code; the outcome goes to the page's message.
    A class with a password asked for by link opens the form on Home instead."""
    classes = class_store()
    address = client_address()
    if classes is None:
        st.session_state["class_message"] = ("Classes need a database this server can write "
                                             "(BSDEMO_DATA_DIR or BSDEMO_DATABASE_URL).")
        return False
    try:
        if limits()["wrong"].blocked(address):
            raise ClassError(f"Too many wrong codes from this network "
                             f"({rules.WRONG_CODES_PER_MINUTE} a minute): wait a minute and type "
                             "the code again.")
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
            raise ClassError("This network has added as many members as a class server allows "
                             f"in ten minutes ({rules.JOINS_PER_ADDRESS_PER_10_MIN}); wait a "
                             "little and join again.")
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
    st.session_state["class_joined"] = (f"You joined the class {code}"
                                        + (f" — {info.title}" if info and info.title else "")
                                        + ". Your predictions now go to the room, anonymously.")
    return True


def start(title: str, password: str | None) -> None:
    classes = class_store()
    if classes is None:
        st.session_state["class_message"] = ("Classes need a database this server can write "
                                             "(BSDEMO_DATA_DIR or BSDEMO_DATABASE_URL).")
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


# ----- the sidebar -----
def sidebar() -> None:
    """The class section of every page's sidebar: start or join; the instructor's code, QR code,
    results and End; a member's class and Leave."""
    current = seat()
    # what the last join, start or link said: at the top of the page (a phone folds the sidebar)
    message = st.session_state.pop("class_message", None)
    if message:
        st.error(plain(message), icon=":material/group_off:")
    joined = st.session_state.pop("class_joined", None)
    if joined:
        st.success(plain(joined), icon=":material/groups:")
    if current is None and presenting():  # the projected page: one press starts a class
        start_corner()
    with st.sidebar:
        if current is None:
            # one switch on every page; its forms only when opened (a room's every rerun
            # would otherwise carry five widgets more)
            if not st.toggle("Class", key="class_open", help="Join a class, or start one."):
                write_cookies()
                return
            with st.container(border=True):
                join_form("sidebar")
                st.divider()
                st.text_input("Title (optional)", max_chars=rules.MAX_TITLE, key="class_title")
                st.text_input("Class password (optional)", type="password",
                              max_chars=rules.MAX_PASSWORD, key="class_password",
                              help="Students then type it when they join. Leave it empty "
                                   "for a class on a private network.")
                st.button("Start a class", key="class_start", icon=":material/co_present:",
                          on_click=lambda: start(st.session_state.get("class_title", ""),
                                                 st.session_state.get("class_password")))
            write_cookies()
            return
        report_finished()  # a cell run that ended while this tab was on another page
        info = _info(current.code)
        if current.teaching:
            _instructor_sidebar(current, info)
        else:
            title = f" — {info.title}" if info and info.title else ""
            st.caption(plain(f"In class {current.code}{title}. Your “Predict first” answers go "
                             "to the room, with no name."))
            if info is not None and not info.open:
                st.caption("This class has ended.")
            st.button("Leave the class", on_click=leave, key="class_leave",
                      icon=":material/logout:")
        write_cookies()
    if current.teaching and presenting():
        corner(current.code)


def _info(code: str):
    try:
        return class_store().info(code)
    except StoreUnavailable:
        return None


def _instructor_sidebar(current: Seat, info) -> None:
    members = info.members if info else 0
    state = "open" if info is None or info.open else "ended"
    st.markdown(f"**Class {current.code}** · {members} member{'s' * (members != 1)} · {state}")
    if info and info.title:
        st.caption(plain(info.title))
    st.image(qr_png(join_link(current.code)), width=140, alt=qr_alt(current.code),
             caption="Scan to join", output_format="PNG")
    st.code(join_link(current.code), language=None, wrap_lines=True)
    once = st.session_state.get("teach_link_once")
    if once:
        with st.expander("Instructor link (private: opens the class as its instructor)"):
            st.caption("This browser keeps the class's key. To teach from another browser, open "
                       "this link there; never show it to the class.")
            st.code(once, language=None, wrap_lines=True)
    if info is not None and info.open:
        st.button("End class", key="class_end", icon=":material/stop_circle:", on_click=end,
                  help="No more joins or votes; the results stay downloadable for "
                       f"{setting(retention())} days after it ends.")
    from bsdemo.classroom.export import results_csv, runs_csv

    def results() -> dict:  # read when a download is pressed, not on every script run
        try:
            return class_store().export(current.code, current.key)
        except (ClassError, StoreUnavailable) as exc:
            return {"error": str(exc)}

    st.caption("The room's votes (counts only) and runs:")
    cols = st.columns(2)
    cols[0].download_button("JSON", lambda: json.dumps(results(), indent=1),
                            f"class-{current.code}.json", "application/json",
                            key="class_json", icon=":material/download:",
                            help="Every vote's counts and every sweep's runs.")
    cols[1].download_button("Votes CSV", lambda: results_csv(results(), _answers),
                            f"class-{current.code}-votes.csv", "text/csv", key="class_csv",
                            icon=":material/download:")
    cols = st.columns(2)
    cols[0].download_button("Runs CSV", lambda: runs_csv(results()),
                            f"class-{current.code}-runs.csv", "text/csv", key="class_runs_csv",
                            icon=":material/download:", help="A row a run of the sweeps.")
    cols[1].download_button("Figures", lambda: _figures(results()),
                            f"class-{current.code}-figures.html", "text/html",
                            key="class_html", icon=":material/download:",
                            help="The room's charts in one HTML page (interactive, offline).")
    st.button("Leave the instructor's seat", on_click=leave, key="class_leave",
              help="This browser forgets the class's key: only the instructor link opens it "
                   "again.")


def _figures(results: dict) -> str:
    from bsdemo.charts.room import class_report_html

    if "error" in results:
        return f"<p>{html.escape(results['error'])}</p>"
    return class_report_html(results, _answers, {s: BY_SLUG[s].title for s in BY_SLUG})


def _answers(question: str) -> tuple[str, ...]:
    lesson = BY_SLUG.get(question)
    return tuple(lesson.answers) if lesson else ()


def corner(code: str) -> None:
    """The join code and a QR code, small in the projected page's top right corner (beside the
    title, clear of the page's content)."""
    box = st.container(key="class_corner", horizontal=True, vertical_alignment="center", gap=None)
    box.image(qr_png(join_link(code)), width=64, output_format="PNG", alt=qr_alt(code))
    box.markdown(f"<span style='font-size: 0.7rem'>Join</span><br>**{code}**",
                 unsafe_allow_html=True, width="content")
    st.html(CORNER_STYLE)


CORNER_STYLE = """<style>
.st-key-class_corner { position: fixed; top: 0.4rem; right: 1rem; z-index: 999990;
  width: auto !important; height: auto !important; background: #ffffff;
  border: 1px solid #8a8a8a; border-radius: 6px; padding: 4px 10px 4px 4px; gap: 0.4rem; }
.st-key-class_corner p { font-size: 1.1rem; line-height: 1.2; margin: 0; }
</style>"""


def start_corner() -> None:
    """Presentation mode with no class: "Start a class" in the page's top right corner (where
    the join code then sits); drawn in the main area, out of the folded sidebar."""
    box = st.container(key="class_start_corner", width="content")
    box.button("Start a class", key="class_start_here", icon=":material/co_present:",
               on_click=lambda: start("", None),
               help="A class for this lecture: a join code and QR code for the room; the "
                    "sidebar's Class section sets a title or password.")
    st.html("<style>.st-key-class_start_corner { position: fixed; top: 0.6rem; right: 1rem; "
            "z-index: 999990; width: auto !important; }</style>")


def join_form(where: str) -> None:
    """Type a class's code (and its password, if it has one) to join."""
    code_key = f"join_code_{where}"
    if code_key not in st.session_state:  # a join link's code, waiting for its password
        st.session_state[code_key] = st.session_state.get("join_code", "")

    def pressed() -> None:
        if join(st.session_state.get(code_key, ""),
                st.session_state.get(f"join_password_{where}") or None):
            st.session_state.pop("join_needs_password", None)

    st.text_input("Class code", key=code_key, max_chars=rules.MAX_TYPED,
                  placeholder="e.g. K7PM3X", help=rules.CODE_RULE)
    st.text_input("Class password (if your instructor gave one)", type="password",
                  key=f"join_password_{where}", max_chars=rules.MAX_PASSWORD)
    st.button("Join the class", key=f"join_{where}", icon=":material/login:", on_click=pressed)


def join_screen() -> None:
    """Home's class box: for the instructor, the join screen to project (code, QR, link); for a
    browser in no class, the join form."""
    current = seat()
    if current is None:
        with st.container(border=True, key="home_join"):
            st.markdown("**In a class?** Type the code your instructor shows, or scan their QR "
                        "code with your phone.")
            if st.session_state.get("join_needs_password"):
                st.info("This class asks for a password: type it below.")
            join_form("home")
        return
    if not current.teaching:
        return
    with st.container(border=True, key="home_class"):
        left, right = st.columns([1, 1], vertical_alignment="center")
        right.image(qr_png(join_link(current.code)), width=320, output_format="PNG",
                    alt=qr_alt(current.code))
        left.markdown("Join the class at")
        left.code(join_link(current.code), language=None, wrap_lines=True)
        left.markdown("or type the code on the lab's Home page:")
        left.markdown(f"<p style='font-size: 4rem; font-weight: 700; letter-spacing: 0.3rem; "
                      f"margin: 0'>{current.code}</p>", unsafe_allow_html=True)


# ----- votes -----
def vote(slug: str, choice: int) -> None:
    """Send this member's answer to the lesson's question (the radio's on_change)."""
    current = seat()
    if current is None or current.teaching:
        return
    answers = BY_SLUG[slug].answers
    status = f"class_vote_{slug}"
    address = client_address()
    if not (limits()["member_votes"].allow(current.member)
            and limits()["address_votes"].allow(address)):
        st.session_state[status] = ("error", f"Too many votes: at most "
                                    f"{rules.VOTES_PER_MEMBER_PER_MINUTE} a minute from one "
                                    "browser. Your last vote stands.")
        return
    try:
        class_store().vote(current.code, current.member, slug, choice, answers)
    except (ClassError, StoreUnavailable) as exc:
        st.session_state[status] = ("error", str(exc))
        return
    st.session_state[status] = ("ok", "Sent to the room (no name).")


def member_round(slug: str) -> tuple[rules.Round | None, int | None]:
    """For a member: the question's current round and their vote in it (None, None otherwise)."""
    current = seat()
    if current is None or current.teaching:
        return None, None
    try:
        return class_store().my_vote(current.code, current.member, slug)
    except StoreUnavailable:
        return None, None


def member_status(slug: str, round_: rules.Round) -> None:
    """Under a member's answer: whether it reached the room, and — once the instructor shows
    them — the room's answers; polled, so a reveal or a second round reaches the page."""
    shown = (round_.number, round_.revealed, round_.supported)

    @st.fragment(run_every=MEMBER_POLL_S)
    def status() -> None:
        current = seat()
        if current is None:
            return
        try:
            rounds = class_store().tallies(current.code, slug, BY_SLUG[slug].answers)
        except StoreUnavailable as exc:
            st.caption(plain(f"The class cannot be reached just now ({clip(str(exc), 120)})."))
            return
        latest = rounds[-1][0]
        if (latest.number, latest.revealed, latest.supported) != shown:
            st.rerun()  # a reveal or a new round: the whole page, so the answer locks or opens
        said = st.session_state.get(f"class_vote_{slug}")
        if said and said[0] == "error":
            st.error(plain(said[1]))
        elif latest.revealed:
            st.caption("The room's answers are shown: this vote is locked.")
            show_room(rounds, f"room_{slug}_member")
        else:
            st.caption(plain((said[1] + " " if said else "")
                             + f"Vote {latest.number}: the room's answers stay hidden until "
                               "your instructor shows them."))

    status()


def show_room(rounds, key: str) -> None:
    from bsdemo.ui.widgets import show_chart

    show_chart(room_votes_chart(rounds), key=key)


def room_panel(slug: str) -> None:
    """The instructor's view of the room's answers to this lesson's question: how many have
    answered (the answers hidden), Show, the chart once shown, and Ask again."""
    current = seat()
    if current is None or not current.teaching:
        return
    answers = BY_SLUG[slug].answers
    classes = class_store()

    def act(what: str) -> None:
        try:
            if what == "reveal":
                classes.reveal(current.code, current.key, slug)
            else:
                classes.ask_again(current.code, current.key, slug)
        except (ClassError, StoreUnavailable) as exc:
            st.session_state["class_message"] = str(exc)

    @st.fragment(run_every=ROOM_POLL_S)
    def room() -> None:
        try:
            rounds = classes.tallies(current.code, slug, answers)
            info = classes.info(current.code)
        except StoreUnavailable as exc:
            st.caption(plain(f"The class cannot be reached just now ({clip(str(exc), 120)})."))
            return
        latest, counts = rounds[-1]
        members = info.members if info else 0
        box = st.container(border=True, key=f"room_{slug}")
        line = box.container(horizontal=True, vertical_alignment="center")
        line.markdown(f"**The room** (class {current.code}) · vote {latest.number}: "
                      f"**{counts.total}** of {members} answered", width="content")
        if not latest.revealed:
            line.button("Show the room's answers", key=f"room_show_{slug}", on_click=act,
                        args=("reveal",), icon=":material/visibility:",
                        help="Shows the counts here and on the members' pages, and locks "
                             "this vote.")
            if len(rounds) > 1:
                with box:
                    show_room(rounds[:-1], f"room_{slug}_earlier")
            return
        line.button("Ask again (vote 2)" if latest.number == 1 else
                    f"Ask again (vote {latest.number + 1})", key=f"room_again_{slug}",
                    on_click=act, args=("again",), icon=":material/replay:",
                    help="Peer instruction: let the room discuss, then vote again; both votes "
                         "stay side by side.")
        with box:
            show_room(rounds, f"room_{slug}_chart")

    room()


def settle(slug: str, supported: int) -> None:
    """The instructor's runs answered the question: mark that answer on the room's chart (once
    per answer and tab)."""
    current = seat()
    done = f"class_settled_{slug}"
    if current is None or not current.teaching or st.session_state.get(done) == supported:
        return
    try:
        class_store().settle(current.code, current.key, slug, supported)
        st.session_state[done] = supported
    except (ClassError, StoreUnavailable):
        pass  # the next run of the page tries again


# ----- a class-sourced sweep -----
JOBS_KEY = "class_jobs"  # this tab's runs of sweep cells, reported to the class when they end
SWEEP_POLL_S = 2.0  # the projector's combined chart, and a member's cell run


def _pending() -> list[dict]:
    return st.session_state.setdefault(JOBS_KEY, [])


def _run_cell(page: str, number: int, cells: list[tuple[int, dict]]) -> None:
    """on_click: queue the runs of (cell, config) — a member's one cell, or the instructor's
    fill of the empty cells — and remember them for reporting."""
    from bsdemo.cluster import SchedulerLost
    from bsdemo.config import RunConfig
    from bsdemo.scheduler import ActiveRunError
    from bsdemo.ui.state import scheduler

    try:
        configs = [RunConfig(**config) for _, config in cells]
        if len(configs) == 1:
            ids = [scheduler().submit(configs[0], owner(), fresh=True, address=client_address())]
        else:
            ids = scheduler().submit_group(configs, owner(), address=client_address(), fresh=True)
    except (ConfigError, ActiveRunError, SchedulerLost) as exc:
        st.session_state[f"class_sweep_message_{page}"] = str(exc)
        return
    _pending().extend({"page": page, "sweep": number, "cell": cell, "job": job}
                      for (cell, _), job in zip(cells, ids, strict=True))


def report_finished() -> None:
    """Send this tab's finished cell runs to the class (from the scheduler's record of the run,
    never from the browser); called on every page's run and by the sweep's polls."""
    jobs = st.session_state.get(JOBS_KEY)
    current = seat()
    if not jobs or current is None:
        return
    from bsdemo.classroom.sweep import cell_report
    from bsdemo.ui.state import scheduler

    left = []
    for job in jobs:
        snap = scheduler().snapshot(job["job"])
        if snap is None:
            continue  # the server forgot it (a restart): nothing to report
        if not snap.done:
            left.append(job)
            continue
        report = cell_report(status=snap.status, config=snap.config, summary=snap.summary,
                             steps=snap.steps, start=snap.start,
                             shared_device=snap.shared_device, turns_with=snap.turns_with,
                             stored_at=snap.stored_at, run=snap.run_number)
        try:
            class_store().report(current.code, job["page"], job["sweep"], job["cell"], report,
                                 member=current.member, key=current.key)
        except StoreUnavailable:
            left.append(job)  # tried again at the next poll
            continue
        except (ClassError, ConfigError) as exc:
            st.session_state[f"class_sweep_message_{job['page']}"] = str(exc)
            continue
        st.session_state[f"class_sweep_sent_{job['page']}"] = report
    st.session_state[JOBS_KEY] = left


def _workload(config: dict) -> str:
    from bsdemo.presets import PRESETS

    names = [p.label for p in PRESETS.values()
             if p.settings.get("dataset") == config.get("dataset")
             and p.settings.get("model") == config.get("model")]
    from bsdemo.ui.widgets import OPTIMIZER_LABELS

    what = names[0] if names else f"{config.get('dataset')} · {config.get('model')}"
    optimizer = config.get("optimizer", "sgd")
    return f"{what}, {OPTIMIZER_LABELS.get(optimizer, optimizer)}, {config.get('epochs')} epochs"


def sweep_panel(page: str, cfg) -> None:
    """A lesson's class-sourced sweep: for the instructor, "Give each student a cell" and the
    room's combined chart; for a member, their cell and its Run. Nothing outside a class."""
    current = seat()
    if current is None:
        return
    report_finished()
    if current.teaching:
        _instructor_sweep(page, current, cfg)
    else:
        _member_sweep(page, current)


def _message(page: str) -> None:
    said = st.session_state.pop(f"class_sweep_message_{page}", None)
    if said:
        st.error(plain(said))


def _member_sweep(page: str, current: Seat) -> None:
    from bsdemo.classroom import sweep

    try:
        mine = class_store().my_cell(current.code, current.member, page)
    except StoreUnavailable:
        return
    if mine is None:
        return
    held, index = mine
    cell = held.cells[index]
    config = sweep.cell_config(held.config, cell, sweep.member_seed(held.config.get("seed", 0),
                                                                    current.member))
    box = st.container(border=True, key=f"class_cell_{page}")
    box.markdown(f"**Your cell in the class's sweep: {cell.label()}**")
    box.caption(plain(f"On your instructor's workload ({_workload(held.config)}), with a seed "
                      f"of your own ({config['seed']}), at most {setting(sweep.TIME_LIMIT_S)} s of "
                      "training. Your result goes to the room's chart, with no name."))
    from bsdemo.ui.state import scheduler

    waiting = [j for j in _pending() if j["page"] == page and j["sweep"] == held.number]
    box.button(f"Run my cell ({cell.label()})", type="primary", key=f"class_cell_run_{page}",
               icon=":material/play_arrow:", on_click=_run_cell,
               args=(page, held.number, [(index, config)]),
               disabled=bool(waiting) or not scheduler().can_submit(owner()))
    with box:
        _message(page)
        _cell_progress(page, held.number)


def _cell_progress(page: str, number: int) -> None:
    """This tab's cell runs on the page: how far they are, what reached the room."""
    from bsdemo.ui.state import scheduler

    def line() -> None:
        report_finished()
        mine = [j for j in _pending() if j["page"] == page and j["sweep"] == number]
        for job in mine:
            snap = scheduler().snapshot(job["job"])
            if snap is None:
                continue
            if snap.status == "queued":
                st.caption(f"Your cell's run is queued (place {snap.queue_position or '–'}).")
            else:
                epoch = (snap.latest or {}).get("epoch")
                st.caption("Your cell is training" + (f": epoch {fixed(epoch, 1)}" if epoch else "…")
                           + " — its result goes to the room when it ends.")
        sent = st.session_state.get(f"class_sweep_sent_{page}")
        if sent and not mine:
            acc = sent.get("accuracy")
            speed = sent.get("speed") or sent.get("samples_per_sec")
            st.success(plain(f"Sent to the room: {sent['status']}"
                             + (f", {percent(acc)} test accuracy" if acc is not None else "")
                             + (f", {fixed(speed, 0)} samples/s ({sent.get('clock', 'wall clock')})"
                                if speed else "")
                             + f" (batch {sent['batch']}, seed {sent['seed']})."),
                       icon=":material/groups:")
        return not mine

    polled_fragment(line, SWEEP_POLL_S if _pending() else None)


def polled_fragment(view, every: float | None) -> None:
    from bsdemo.ui.widgets import polled

    polled(view, every)


def _instructor_sweep(page: str, current: Seat, cfg) -> None:
    import dataclasses

    from bsdemo.classroom import sweep

    classes = class_store()
    config = dataclasses.asdict(cfg)

    def hand_out() -> None:
        try:
            classes.open_sweep(current.code, current.key, page, config, seed=int(config["seed"]))
        except (ClassError, StoreUnavailable) as exc:
            st.session_state[f"class_sweep_message_{page}"] = str(exc)

    cells = sweep.grid(page)
    box = st.container(border=True, key=f"class_sweep_{page}")
    try:
        held = classes.current_sweep(current.code, page)
    except StoreUnavailable as exc:
        box.caption(plain(f"The class cannot be reached just now ({clip(str(exc), 120)})."))
        return
    with box:
        _message(page)
    if held is None:
        what = (f"{len(sweep.LR_BATCHES)} batch sizes × {len(sweep.LR_VALUES)} learning rates"
                if page == "lr_scaling" else f"batch sizes {', '.join(map(str, sweep.BATCHES))}")
        head = box.container(horizontal=True, vertical_alignment="center")
        head.markdown(f"**The class's sweep** · {len(cells)} cells: {what}", width="content")
        head.button("Give each student a cell", key=f"class_sweep_open_{page}", on_click=hand_out,
                    icon=":material/grid_view:",
                    help="Each member's page gets one cell of the grid on the workload set on "
                         "this page; members who join later get one too.")
        box.caption("Every member runs one cell on their own page, with a seed of their own: "
                    "the room fills the grid together, and several runs of a cell show their "
                    "spread.")
        return

    def room() -> bool:
        report_finished()
        got = classes.sweep_results(current.code, page)
        if got is None:
            return True
        held_now, results, holders = got
        combined = sweep.combine(held_now.cells, results)
        draw_sweep(page, held_now, combined, holders, hand_out)
        return False

    with box:
        polled_fragment(room, SWEEP_POLL_S)
    if held.config != config:
        box.caption(plain(f"The sweep runs the workload it was handed out with "
                          f"({_workload(held.config)}); press Hand out again for this page's "
                          "settings."))


def _fill(page: str, number: int) -> None:
    from bsdemo.classroom import sweep

    current = seat()
    got = class_store().sweep_results(current.code, page)
    if got is None:
        return
    held, results, _ = got
    if held.number != number:
        return
    combined = sweep.combine(held.cells, results)
    runs = [(i, sweep.cell_config(held.config, held.cells[i], int(held.config.get("seed", 0))))
            for i in combined.empty]
    if runs:
        _run_cell(page, number, runs)


def draw_sweep(page: str, held, combined, holders: int, hand_out) -> None:
    """The room's combined chart of a sweep (the instructor's projector), under one line: how
    far the room is, Fill the empty cells, Hand out again."""
    from bsdemo.charts.room import class_curves_chart, class_grid_chart, class_speed_chart
    from bsdemo.ui.widgets import show_chart

    mine = [j for j in _pending() if j["page"] == page and j["sweep"] == held.number]
    line = st.container(horizontal=True, vertical_alignment="center")
    line.markdown(f"**The class's sweep** · Sweep {held.number}: **{combined.filled} of "
                  f"{len(combined.cells)} cells** have a run ({combined.runs} "
                  f"run{'s' * (combined.runs != 1)}); {holders} member{'s' * (holders != 1)} "
                  "hold a cell.", width="content")
    if combined.empty:
        line.button(f"Fill the {len(combined.empty)} empty cells" if not mine else
                    f"Filling… {len(mine)} left", key=f"class_sweep_fill_{page}",
                    on_click=_fill, args=(page, held.number), disabled=bool(mine),
                    icon=":material/format_color_fill:",
                    help="Runs the cells nobody has run from this browser, one after another.")
    line.button("Hand out again", key=f"class_sweep_open_{page}", on_click=hand_out,
                icon=":material/grid_view:",
                help="A new sweep on the workload set on this page: every member a cell again, "
                     "the room's chart empty.")
    if page == "lr_scaling":
        show_chart(class_grid_chart(combined), f"class_grid_{page}")
    else:
        speed, curves = class_speed_chart(combined), class_curves_chart(combined)
        left, right = st.columns(2)
        first, second = (speed, curves) if page == "throughput" else (curves, speed)
        with left:
            show_chart(first, f"class_first_{page}")
        with right:
            show_chart(second, f"class_second_{page}")
        finals = [f"{c.cell.batch}: {percent(c.median('accuracy'), 0)}" + (
            f" ({c.runs} runs)" if c.runs > 1 else "")
                  for c in combined.cells if c.median("accuracy") is not None]
        if finals:
            st.caption("Final test accuracy, median by batch — " + "; ".join(finals) + ".")
    if combined.mixed:
        st.caption(plain("Measured under different conditions: " + "; ".join(combined.conditions)
                         + ". Speeds from different conditions are drawn as separate lines."))
