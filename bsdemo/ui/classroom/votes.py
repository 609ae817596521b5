"""A class's votes: a member's vote on a lesson's "Predict first" question, what the member
sees of the round, and the projector's view of the room's answers."""

from __future__ import annotations

import streamlit as st

from bsdemo.charts.room import room_votes_chart
from bsdemo.classroom import rules
from bsdemo.classroom.store import ClassError
from bsdemo.errors import clip
from bsdemo.lessons import BY_SLUG
from bsdemo.plaintext import plain
from bsdemo.store import StoreUnavailable
from bsdemo.ui.classroom.seat import MEMBER_POLL_S, ROOM_POLL_S, class_store, limits, seat
from bsdemo.ui.state import client_address


# ----- votes -----
def vote(slug: str, choice: int) -> None:
    """Send this member's answer to the lesson's question (the radio's on_change)."""
    current = seat()
    if current is None or current.teaching:
        return
    answers = BY_SLUG[slug].answers
    status = f"class_vote_{slug}"
    address = client_address()
    if not (limits()["member_votes"].allow(current.member) and limits()["address_votes"].allow(address)):
        st.session_state[status] = (
            "error",
            f"Too many votes: at most "
            f"{rules.VOTES_PER_MEMBER_PER_MINUTE} a minute from one "
            "browser. Your last vote stands.",
        )
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
            st.caption(
                plain(
                    (said[1] + " " if said else "")
                    + f"Vote {latest.number}: the room's answers stay hidden until "
                    "your instructor shows them."
                )
            )

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
        line.markdown(
            f"**The room** (class {current.code}) · vote {latest.number}: "
            f"**{counts.total}** of {members} answered",
            width="content",
        )
        if not latest.revealed:
            line.button(
                "Show the room's answers",
                key=f"room_show_{slug}",
                on_click=act,
                args=("reveal",),
                icon=":material/visibility:",
                help="Shows the counts here and on the members' pages, and locks this vote.",
            )
            if len(rounds) > 1:
                with box:
                    show_room(rounds[:-1], f"room_{slug}_earlier")
            return
        line.button(
            "Ask again (vote 2)" if latest.number == 1 else f"Ask again (vote {latest.number + 1})",
            key=f"room_again_{slug}",
            on_click=act,
            args=("again",),
            icon=":material/replay:",
            help="Peer instruction: let the room discuss, then vote again; both votes stay side by side.",
        )
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
