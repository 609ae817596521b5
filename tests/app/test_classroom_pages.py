"""A class through the pages (AppTest): start, join by link, vote, Show, Ask again, End; and the
hostile inputs — a forged instructor link, a code of 10 KB, a vote flood, a vote after the end —
each a plain message, nothing lost, the page still serving."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from bsdemo.classroom import rules
from tests.app.helpers import APP
from tests.timeouts import scaled

LESSON = "noise"


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    """Each test a store of its own (the classes' store is made once per process: cleared).
    The process's scheduler is made first, from the suite's own settings: made under this
    folder, it would keep a run store the other pages' tests do not expect (their identical
    runs served from it)."""
    from bsdemo.server import process_scheduler
    from bsdemo.ui import classroom

    process_scheduler()
    monkeypatch.setenv("BSDEMO_DATA_DIR", str(tmp_path / "data"))

    classroom.class_store.clear()
    classroom.limits.clear()
    yield
    store = classroom.class_store()
    if store is not None:
        store.store.close()
    classroom.class_store.clear()
    classroom.limits.clear()


def browser(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def start(title: str = "Week 3") -> tuple[AppTest, str]:
    teacher = browser()
    teacher.sidebar.toggle(key="class_open").set_value(True).run()
    teacher.sidebar.text_input(key="class_title").input(title)
    teacher.sidebar.button(key="class_start").click().run()
    assert not teacher.exception, teacher.exception
    seat = teacher.session_state["class_seat"]
    assert seat is not None and seat.teaching
    return teacher, seat.code


def texts(at: AppTest) -> str:
    """Everything the page says, with plain()'s Markdown escapes taken out."""
    return "\n".join(
        e.value for kind in (at.error, at.success, at.caption, at.markdown, at.warning) for e in kind
    ).replace("\\", "")


def test_a_class_votes_shows_and_asks_again():
    teacher, code = start()
    assert any(code in c.value for c in teacher.sidebar.code)  # the join link
    students = [browser({"join": code.lower()}) for _ in range(3)]
    for at in students:
        assert f"You joined the class {code}" in texts(at)
        assert "join" not in at.query_params  # taken off the address
        at.switch_page(f"pages/{LESSON}.py").run()
    for at, answer in zip(students, (1, 1, 0), strict=True):
        radio = at.radio(key=f"predict_{LESSON}")
        radio.set_value(radio.options[answer]).run()
        assert "Sent to the room" in texts(at)
    teacher.switch_page(f"pages/{LESSON}.py").run()
    assert "vote 1: **3** of 3 answered" in texts(teacher)
    assert not teacher.get("plotly_chart") or all(
        "room" not in (c.proto.id or "") for c in teacher.get("plotly_chart")
    )
    teacher.button(key=f"room_show_{LESSON}").click().run()
    students[0].run()
    assert students[0].radio(key=f"predict_{LESSON}").disabled
    assert "this vote is locked" in texts(students[0])
    radio = students[1].radio(key=f"predict_{LESSON}")
    students[1].run()
    teacher.button(key=f"room_again_{LESSON}").click().run()
    assert "vote 2: **0** of 3 answered" in texts(teacher)
    students[1].run()
    radio = students[1].radio(key=f"predict_{LESSON}")
    assert not radio.disabled and radio.value is None  # a new vote starts empty
    radio.set_value(radio.options[0]).run()
    teacher.run()
    assert "vote 2: **1** of 3 answered" in texts(teacher)
    # End: no more votes, a plain message
    teacher.sidebar.button(key="class_end").click().run()
    radio = students[2].radio(key=f"predict_{LESSON}")
    students[2].run()
    radio = students[2].radio(key=f"predict_{LESSON}")
    radio.set_value(radio.options[2]).run()
    assert "The class has ended: votes are closed." in texts(students[2])
    assert not students[2].exception


def test_a_forged_instructor_link_opens_nothing():
    _, code = start()
    at = browser({"teach": f"{code}.not-the-key"})
    assert "This instructor link does not open a class here" in texts(at)
    assert at.session_state["class_seat"] is None and "teach" not in at.query_params
    at = browser({"teach": "x" * 10_000})
    assert "join code: got" in texts(at) and len(at.error[0].value) < 400
    at.switch_page("pages/training_lab.py").run()
    assert not at.exception


@pytest.mark.parametrize("raw", ["Ж" * 10_000, "<img src=x onerror=alert(1)>", "**BOLD**"])
def test_a_hostile_join_link_is_said_in_plain_text(raw):
    at = browser({"join": raw})
    [message] = [e.value for e in at.error]
    assert len(message) < 400
    shown = message.replace("\\", "")
    assert shown.startswith("join code: got")
    if raw.startswith("<"):  # escaped: shown as typed, never rendered
        assert "\\<img" in message
    if raw.startswith("**"):
        assert "\\*\\*BOLD" in message
    assert at.session_state["class_seat"] is None


def test_a_vote_flood_from_one_browser_is_cut_and_counts_once():
    teacher, code = start()
    at = browser({"join": code})
    at.switch_page(f"pages/{LESSON}.py").run()
    for i in range(rules.VOTES_PER_MEMBER_PER_MINUTE + 3):
        radio = at.radio(key=f"predict_{LESSON}")
        radio.set_value(radio.options[i % 2]).run()
    assert "Too many votes" in texts(at)
    teacher.switch_page(f"pages/{LESSON}.py").run()
    assert "vote 1: **1** of 1 answered" in texts(teacher)


def test_wrong_codes_from_one_address_are_rate_limited():
    at = browser()
    for _ in range(rules.WRONG_CODES_PER_MINUTE):
        at.text_input(key="join_code_home").input("ZZZZZZ")
        at.button(key="join_home").click().run()
        assert "No open class has this code" in texts(at)
    _, code = start()
    at.text_input(key="join_code_home").input(code)  # even the right code waits now
    at.button(key="join_home").click().run()
    assert "Too many wrong codes" in texts(at) and at.session_state["class_seat"] is None


def wait_until(at: AppTest, said: str, timeout: float = 120.0) -> None:
    """Rerun the page (as its poll would) until it says `said`."""
    import time

    deadline = time.monotonic() + scaled(timeout)
    while said not in texts(at):
        assert time.monotonic() < deadline, f"never said {said!r}: {texts(at)[-600:]}"
        time.sleep(0.5)
        at.run()
        assert not at.exception, at.exception


def test_a_class_sweep_hands_out_cells_and_the_room_fills_the_chart():
    page = "throughput"
    teacher, code = start()
    students = [browser({"join": code}) for _ in range(2)]
    teacher.switch_page(f"pages/{page}.py").run()
    assert "The class's sweep" in texts(teacher)
    teacher.button(key=f"class_sweep_open_{page}").click().run()
    assert "0 of 7 cells" in texts(teacher)
    cells = []
    for at in students:
        at.switch_page(f"pages/{page}.py").run()
        assert "Your cell in the class's sweep: batch" in texts(at)
        at.button(key=f"class_cell_run_{page}").click().run()
        assert not at.exception, at.exception
        cells.append(at.session_state["class_jobs"][0]["cell"])
    assert cells[0] != cells[1]  # balanced: two members, two cells
    for at in students:
        wait_until(at, "Sent to the room: completed")
    teacher.run()
    assert "2 of 7 cells" in texts(teacher) and "(2 runs)" in texts(teacher)
    charts = [c.proto.id for c in teacher.get("plotly_chart")]
    assert any("class_first" in c for c in charts) and any("class_second" in c for c in charts)
    # the instructor fills the five cells nobody ran
    teacher.button(key=f"class_sweep_fill_{page}").click().run()
    wait_until(teacher, "7 of 7 cells", timeout=240)
    assert "(7 runs)" in texts(teacher)
    # a member's second run of their cell replaces their first: still one run of theirs
    students[0].button(key=f"class_cell_run_{page}").click().run()
    wait_until(students[0], "Sent to the room: completed")
    teacher.run()
    assert "(7 runs)" in texts(teacher)


def test_presentation_mode_starts_a_class_in_one_press():
    at = browser({"present": "1"})
    at.button(key="class_start_here").click().run()
    assert not at.exception, at.exception
    seat = at.session_state["class_seat"]
    assert seat is not None and seat.teaching
    assert all(b.key != "class_start_here" for b in at.button)  # gone: the class's corner now
    assert f"**{seat.code}**" in texts(at)  # the join code, in the corner
