"""A class in the sidebar: start one, join one, the instructor's controls and the room's
corner on a projected page, and Home's join screen."""

from __future__ import annotations

import html
import json

import streamlit as st

from bsdemo.classroom import rules
from bsdemo.classroom.store import ClassError
from bsdemo.lessons import BY_SLUG
from bsdemo.plaintext import plain
from bsdemo.store import StoreUnavailable
from bsdemo.ui.classroom.seat import (
    Seat,
    class_store,
    end,
    join,
    join_link,
    leave,
    qr_alt,
    qr_png,
    retention,
    seat,
    start,
    write_cookies,
)
from bsdemo.ui.classroom.sweep import report_finished
from bsdemo.ui.links import presenting
from bsdemo.units import setting


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
                st.text_input(
                    "Class password (optional)",
                    type="password",
                    max_chars=rules.MAX_PASSWORD,
                    key="class_password",
                    help="Students then type it when they join. Leave it empty "
                    "for a class on a private network.",
                )
                st.button(
                    "Start a class",
                    key="class_start",
                    icon=":material/co_present:",
                    on_click=lambda: start(
                        st.session_state.get("class_title", ""), st.session_state.get("class_password")
                    ),
                )
            write_cookies()
            return
        report_finished()  # a cell run that ended while this tab was on another page
        info = _info(current.code)
        if current.teaching:
            _instructor_sidebar(current, info)
        else:
            title = f" — {info.title}" if info and info.title else ""
            st.caption(
                plain(
                    f"In class {current.code}{title}. Your “Predict first” answers go "
                    "to the room, with no name."
                )
            )
            if info is not None and not info.open:
                st.caption("This class has ended.")
            st.button("Leave the class", on_click=leave, key="class_leave", icon=":material/logout:")
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
    st.image(
        qr_png(join_link(current.code)),
        width=140,
        alt=qr_alt(current.code),
        caption="Scan to join",
        output_format="PNG",
    )
    st.code(join_link(current.code), language=None, wrap_lines=True)
    once = st.session_state.get("teach_link_once")
    if once:
        with st.expander("Instructor link (private: opens the class as its instructor)"):
            st.caption(
                "This browser keeps the class's key. To teach from another browser, open "
                "this link there; never show it to the class."
            )
            st.code(once, language=None, wrap_lines=True)
    if info is not None and info.open:
        st.button(
            "End class",
            key="class_end",
            icon=":material/stop_circle:",
            on_click=end,
            help="No more joins or votes; the results stay downloadable for "
            f"{setting(retention())} days after it ends.",
        )
    from bsdemo.classroom.export import results_csv, runs_csv

    def results() -> dict:  # read when a download is pressed, not on every script run
        try:
            return class_store().export(current.code, current.key)
        except (ClassError, StoreUnavailable) as exc:
            return {"error": str(exc)}

    st.caption("The room's votes (counts only) and runs:")
    cols = st.columns(2)
    cols[0].download_button(
        "JSON",
        lambda: json.dumps(results(), indent=1),
        f"class-{current.code}.json",
        "application/json",
        key="class_json",
        icon=":material/download:",
        help="Every vote's counts and every sweep's runs.",
    )
    cols[1].download_button(
        "Votes CSV",
        lambda: results_csv(results(), _answers),
        f"class-{current.code}-votes.csv",
        "text/csv",
        key="class_csv",
        icon=":material/download:",
    )
    cols = st.columns(2)
    cols[0].download_button(
        "Runs CSV",
        lambda: runs_csv(results()),
        f"class-{current.code}-runs.csv",
        "text/csv",
        key="class_runs_csv",
        icon=":material/download:",
        help="A row a run of the sweeps.",
    )
    cols[1].download_button(
        "Figures",
        lambda: _figures(results()),
        f"class-{current.code}-figures.html",
        "text/html",
        key="class_html",
        icon=":material/download:",
        help="The room's charts in one HTML page (interactive, offline).",
    )
    st.button(
        "Leave the instructor's seat",
        on_click=leave,
        key="class_leave",
        help="This browser forgets the class's key: only the instructor link opens it again.",
    )


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
    box.markdown(
        f"<span style='font-size: 0.7rem'>Join</span><br>**{code}**", unsafe_allow_html=True, width="content"
    )
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
    box.button(
        "Start a class",
        key="class_start_here",
        icon=":material/co_present:",
        on_click=lambda: start("", None),
        help="A class for this lecture: a join code and QR code for the room; the "
        "sidebar's Class section sets a title or password.",
    )
    st.html(
        "<style>.st-key-class_start_corner { position: fixed; top: 0.6rem; right: 1rem; "
        "z-index: 999990; width: auto !important; }</style>"
    )


def join_form(where: str) -> None:
    """Type a class's code (and its password, if it has one) to join."""
    code_key = f"join_code_{where}"
    if code_key not in st.session_state:  # a join link's code, waiting for its password
        st.session_state[code_key] = st.session_state.get("join_code", "")

    def pressed() -> None:
        if join(st.session_state.get(code_key, ""), st.session_state.get(f"join_password_{where}") or None):
            st.session_state.pop("join_needs_password", None)

    st.text_input(
        "Class code", key=code_key, max_chars=rules.MAX_TYPED, placeholder="e.g. K7PM3X", help=rules.CODE_RULE
    )
    st.text_input(
        "Class password (if your instructor gave one)",
        type="password",
        key=f"join_password_{where}",
        max_chars=rules.MAX_PASSWORD,
    )
    st.button("Join the class", key=f"join_{where}", icon=":material/login:", on_click=pressed)


def join_screen() -> None:
    """Home's class box: for the instructor, the join screen to project (code, QR, link); for a
    browser in no class, the join form."""
    current = seat()
    if current is None:
        with st.container(border=True, key="home_join"):
            st.markdown(
                "**In a class?** Type the code your instructor shows, or scan their QR code with your phone."
            )
            if st.session_state.get("join_needs_password"):
                st.info("This class asks for a password: type it below.")
            join_form("home")
        return
    if not current.teaching:
        return
    with st.container(border=True, key="home_class"):
        left, right = st.columns([1, 1], vertical_alignment="center")
        right.image(qr_png(join_link(current.code)), width=320, output_format="PNG", alt=qr_alt(current.code))
        left.markdown("Join the class at")
        left.code(join_link(current.code), language=None, wrap_lines=True)
        left.markdown("or type the code on the lab's Home page:")
        left.markdown(
            f"<p style='font-size: 4rem; font-weight: 700; letter-spacing: 0.3rem; "
            f"margin: 0'>{current.code}</p>",
            unsafe_allow_html=True,
        )
