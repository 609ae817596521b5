"""A class in the browser: starting one, joining one, this browser's seat in it (instructor or
member), the members' votes, the projector's view of the room's answers, and a class-sourced
sweep. The rules and the store are bsdemo.classroom's; this package only draws them: `seat.py`
(the seat and its cookies), `sidebar.py`, `votes.py`, `sweep.py`.
"""

from __future__ import annotations

from bsdemo.ui.classroom.seat import (
    CLASS_COOKIE,
    MEMBER_POLL_S,
    PUBLIC_URL_ENV,
    ROOM_POLL_S,
    SEAT_KEY,
    TEACH_COOKIE,
    Seat,
    class_store,
    end,
    join,
    join_link,
    leave,
    limits,
    public_url,
    qr_alt,
    qr_png,
    retention,
    seat,
    start,
    take_link,
    write_cookies,
)
from bsdemo.ui.classroom.sidebar import (
    CORNER_STYLE,
    corner,
    join_form,
    join_screen,
    sidebar,
    start_corner,
)
from bsdemo.ui.classroom.sweep import (
    JOBS_KEY,
    SWEEP_POLL_S,
    draw_sweep,
    polled_fragment,
    report_finished,
    sweep_panel,
)
from bsdemo.ui.classroom.votes import (
    member_round,
    member_status,
    room_panel,
    settle,
    show_room,
    vote,
)

__all__ = [
    "CLASS_COOKIE",
    "CORNER_STYLE",
    "JOBS_KEY",
    "MEMBER_POLL_S",
    "PUBLIC_URL_ENV",
    "ROOM_POLL_S",
    "SEAT_KEY",
    "SWEEP_POLL_S",
    "Seat",
    "TEACH_COOKIE",
    "class_store",
    "corner",
    "draw_sweep",
    "end",
    "join",
    "join_form",
    "join_link",
    "join_screen",
    "leave",
    "limits",
    "member_round",
    "member_status",
    "polled_fragment",
    "public_url",
    "qr_alt",
    "qr_png",
    "report_finished",
    "retention",
    "room_panel",
    "seat",
    "settle",
    "show_room",
    "sidebar",
    "start",
    "start_corner",
    "sweep_panel",
    "take_link",
    "vote",
    "write_cookies",
]
