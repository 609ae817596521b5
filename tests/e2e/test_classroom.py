"""A class in real Chromium: the instructor starts one, three students join (by link on a phone,
by typing the code, by link), vote on a lesson's question, and the projector shows the room's
counts only after "Show"; a restart of the server keeps the class and its votes."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from scripts.screenshots import full_page
from tests.e2e.test_browser import ms, serving

pytestmark = pytest.mark.e2e
LESSON = "noise"
ANSWERS = ("about 4× smaller", "about 2× smaller", "about the same")


def shots(tmp_path: Path) -> Path:
    """Where the pictures go: $BSDEMO_SHOTS to look at them, else the test's own folder."""
    folder = Path(os.environ.get("BSDEMO_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def start_class(page, url: str) -> str:
    page.goto(url)
    page.get_by_text("Class", exact=True).first.click()  # the sidebar's folded section
    page.get_by_label("Title (optional)").fill("Week 3")
    page.get_by_role("button", name="Start a class").click()
    found = page.get_by_text(re.compile(r"^Class [A-Z2-9]{6} · ")).first
    found.wait_for(timeout=ms(30))
    return re.search(r"Class ([A-Z2-9]{6})", found.inner_text()).group(1)


def vote(page, answer: str) -> None:
    page.get_by_text(answer, exact=True).first.click()
    page.get_by_text(re.compile(r"Sent to the room")).wait_for(timeout=ms(30))


def joined(page, code: str) -> None:
    """Wait for the join's confirmation, and for the browser's id and class to reach its
    cookies (by the page's script) before it moves on, as a student does not leave in the
    same instant."""
    page.get_by_text(re.compile(rf"You joined the class {code}")).wait_for(timeout=ms(30))
    assert "join=" not in page.url  # taken off the address once read
    page.wait_for_function(
        "() => document.cookie.includes('bsdemo_class=') && document.cookie.includes('bsdemo_browser=')",
        timeout=ms(30),
    )


def open_lesson(page, url: str) -> None:
    """A member opens the lesson and waits for their line under the question (the page has
    run: a click before that can be lost to the page's first drawing)."""
    page.goto(f"{url}/{LESSON}")
    page.get_by_text(re.compile(r"Vote 1: the room's answers stay hidden")).wait_for(timeout=ms(30))


def join_and_vote(page, url: str, code: str, answer: str) -> None:
    page.goto(f"{url}/?join={code}")
    joined(page, code)
    open_lesson(page, url)
    vote(page, answer)


def after_restart(browser, tmp_path: Path, data: Path, cookies: dict, page_name: str, said: str) -> None:
    """A fresh server on the same data folder: the instructor's browser (its cookies) opens
    the page and finds it saying `said` — nothing of the class was lost."""
    with serving(tmp_path, env={"BSDEMO_DATA_DIR": str(data)}) as port:
        url = f"http://127.0.0.1:{port}"
        again = browser.new_context(viewport={"width": 1280, "height": 720})
        again.add_cookies([{"name": k, "value": v, "url": url} for k, v in cookies.items()])
        page = again.new_page()
        page.goto(f"{url}/{page_name}")
        page.get_by_text(re.compile(said)).wait_for(timeout=ms(30))


def test_a_room_joins_votes_and_sees_its_answers_after_show(browser, tmp_path):
    data = tmp_path / "data"
    folder = shots(tmp_path)
    with serving(tmp_path, env={"BSDEMO_DATA_DIR": str(data)}) as port:
        url = f"http://127.0.0.1:{port}"
        teacher = browser.new_context(viewport={"width": 1280, "height": 720})
        projector = teacher.new_page()
        code = start_class(projector, url)
        projector.wait_for_function("() => document.cookie.includes('bsdemo_teach=')", timeout=ms(30))
        projector.get_by_text("or type the code on the lab's Home page:").wait_for(timeout=ms(30))
        projector.screenshot(path=str(folder / "class-home-join-screen-1280.png"))
        assert re.fullmatch(r"[A-HJ-KMNP-Z2-9]{6}", code)
        assert projector.locator("img[alt='Scan to join'], [data-testid=stImage] img").count() >= 1
        # the key is in the projector's cookie, never in the page's address
        assert "teach" not in projector.url
        students = []
        phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
        for how, context in (
            ("link", phone),
            ("typed", browser.new_context(viewport={"width": 1280, "height": 720})),
            ("link", browser.new_context(viewport={"width": 1280, "height": 720})),
        ):
            page = context.new_page()
            if how == "link":
                page.goto(f"{url}/?join={code.lower()}")
            else:
                page.goto(url)
                page.get_by_label("Class code").last.fill(code)
                page.get_by_role("button", name="Join the class").last.click()
            joined(page, code)
            open_lesson(page, url)
            students.append(page)
        for page, answer in zip(students, (ANSWERS[1], ANSWERS[1], ANSWERS[0]), strict=True):
            vote(page, answer)
        students[0].screenshot(path=str(folder / "class-phone-voted.png"), full_page=True)
        projector.goto(f"{url}/{LESSON}?present=1")
        projector.get_by_text(re.compile(r"vote 1: 3 of 3 answered")).wait_for(timeout=ms(30))
        room = projector.locator(f".st-key-room_{LESSON}")
        assert room.locator(".js-plotly-plot").count() == 0  # hidden until shown
        projector.screenshot(path=str(folder / "class-projector-1280-before.png"), full_page=True)
        projector.get_by_role("button", name="Show the room's answers").click()
        room.locator(".js-plotly-plot").first.wait_for(timeout=ms(30))
        projector.get_by_text(re.compile(r"2 · 67%")).first.wait_for(timeout=ms(30))
        projector.screenshot(path=str(folder / "class-projector-1280-shown.png"), full_page=True)
        # the instructor's run answers the question: its answer is marked on the room's chart
        projector.get_by_role("button", name="Measure the noise").click()
        room.get_by_text(re.compile("^✓ ")).first.wait_for(timeout=ms(120))
        projector.set_viewport_size({"width": 1920, "height": 1080})
        projector.wait_for_timeout(ms(1.0))
        projector.screenshot(path=str(folder / "class-projector-1920-shown.png"), full_page=True)
        # the students' pages lock the vote and show the room's answers (polled)
        students[0].get_by_text("this vote is locked").wait_for(timeout=ms(30))
        assert students[0].get_by_role("radio").first.is_disabled()
        students[0].screenshot(path=str(folder / "class-phone-shown.png"), full_page=True)
        # a second vote: the projector asks again, a student changes their mind
        projector.get_by_role("button", name=re.compile("Ask again")).click()
        students[2].get_by_text(re.compile(r"Vote 2: the room's answers stay hidden")).wait_for(
            timeout=ms(30)
        )
        vote(students[2], ANSWERS[1])
        projector.get_by_text(re.compile(r"vote 2: 1 of 3 answered")).wait_for(timeout=ms(30))
        for page in [projector, *students]:
            assert page.locator(".stException").count() == 0
        cookies = {c["name"]: c["value"] for c in teacher.cookies()}
    # a restart of the server keeps the class, its votes and its instructor
    after_restart(
        browser, tmp_path, data, cookies, LESSON, rf"The room.*class {code}.*vote 2: 1 of 3 answered"
    )


def test_wrong_codes_get_one_message_and_the_server_keeps_serving(browser, tmp_path):
    with serving(tmp_path, env={"BSDEMO_DATA_DIR": str(tmp_path / "data")}) as port:
        url = f"http://127.0.0.1:{port}"
        page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
        page.goto(f"{url}/?join=" + "Ж" * 3000)
        page.get_by_text(re.compile(r"join code: got")).wait_for(timeout=ms(30))
        for typed, said in (
            ("ABC234", "No open class has this code"),
            ("<b>x</b>", "join code: got '<b>x</b>'"),
        ):  # plain text, not HTML
            page.get_by_label("Class code").last.fill(typed)
            page.get_by_role("button", name="Join the class").last.click()
            page.get_by_text(said).first.wait_for(timeout=ms(30))
        for _ in range(10):
            page.get_by_role("button", name="Join the class").last.click()
            page.wait_for_timeout(ms(0.3))
        page.get_by_text(re.compile("Too many wrong codes")).first.wait_for(timeout=ms(30))
        page.goto(f"{url}/training_lab")
        page.get_by_role("button", name="Run").wait_for(timeout=ms(30))
        assert page.locator(".stException").count() == 0


def test_a_class_fills_the_learning_rate_map_together(browser, tmp_path):
    """The projector (presentation mode, 1280×720) hands out the lr lesson's 24 cells; three
    students (one on a phone) each run their cell; the room's map gains their points, each cell
    with its result, the others visibly empty; a restart keeps the runs."""
    data = tmp_path / "data"
    folder = shots(tmp_path)
    page_name = "lr_scaling"
    with serving(tmp_path, env={"BSDEMO_DATA_DIR": str(data)}) as port:
        url = f"http://127.0.0.1:{port}"
        teacher = browser.new_context(viewport={"width": 1280, "height": 720})
        projector = teacher.new_page()
        code = start_class(projector, url)
        projector.wait_for_function("() => document.cookie.includes('bsdemo_teach=')", timeout=ms(30))
        students = []
        for size in ((390, 844), (1280, 720), (1280, 720)):
            context = browser.new_context(
                viewport={"width": size[0], "height": size[1]},
                is_mobile=size[0] < 500,
                has_touch=size[0] < 500,
            )
            page = context.new_page()
            page.goto(f"{url}/?join={code}")
            joined(page, code)
            students.append(page)
        projector.goto(f"{url}/{page_name}?present=1")
        projector.get_by_role("button", name="Give each student a cell").click()
        projector.get_by_text(re.compile(r"Sweep 1: 0 of 24 cells")).wait_for(timeout=ms(30))
        labels = []
        for page in students:
            page.goto(f"{url}/{page_name}")
            mine = page.get_by_text(re.compile(r"Your cell in the class's sweep: batch \d+ · lr "))
            mine.wait_for(timeout=ms(30))
            labels.append(mine.inner_text())
            page.get_by_role("button", name=re.compile(r"^Run my cell")).click()
        assert len(set(labels)) == 3  # three members, three cells
        for page in students:
            page.get_by_text(re.compile(r"Sent to the room: ")).wait_for(timeout=ms(180))
        full_page(students[0], folder / "class-sweep-phone-sent.png", 390)
        projector.get_by_text(re.compile(r"Sweep 1: 3 of 24 cells have a run \(3 runs\)")).wait_for(
            timeout=ms(30)
        )
        box = projector.locator(f".st-key-class_sweep_{page_name}")
        box.locator(".js-plotly-plot").first.wait_for(timeout=ms(30))
        # the map says "not run" in the 21 cells nobody ran (plotly's cell texts, in the SVG)
        projector.wait_for_function(
            "() => [...document.querySelectorAll('.st-key-class_sweep_lr_scaling text')]"
            ".filter(t => t.textContent === 'not run').length === 21",
            timeout=ms(30),
        )
        projector.mouse.move(0, 0)  # no button's tooltip in the picture
        projector.screenshot(path=str(folder / "class-sweep-projector-1280-first-screen.png"))
        full_page(projector, folder / "class-sweep-projector-1280.png", 1280)
        projector.set_viewport_size({"width": 1920, "height": 1080})
        full_page(projector, folder / "class-sweep-projector-1920.png", 1920)
        for page in [projector, *students]:
            assert page.locator(".stException").count() == 0
        cookies = {c["name"]: c["value"] for c in teacher.cookies()}
    after_restart(browser, tmp_path, data, cookies, page_name, r"Sweep 1: 3 of 24 cells have a run")


def test_through_the_launcher_a_key_and_a_seat_are_cookies_no_script_can_read(browser, tmp_path):
    """`python -m bsdemo.ui.launch` (the image's command): the instructor's key and a student's
    seat reach the browser as cookies the server hands over, HttpOnly — no script in the page
    can read the key — and each still works on the next page load."""
    from tests.timeouts import wait_for

    def httponly(context, name):
        return next((c for c in context.cookies() if c["name"] == name and c["httpOnly"]), None)

    with serving(tmp_path, launcher=True, env={"BSDEMO_DATA_DIR": str(tmp_path / "data")}) as port:
        url = f"http://127.0.0.1:{port}"
        teacher = browser.new_context(viewport={"width": 1280, "height": 720})
        desk = teacher.new_page()
        code = start_class(desk, url)
        key = wait_for(lambda: httponly(teacher, "bsdemo_teach"), timeout=30)
        assert key["value"].startswith(code + ".") and key["sameSite"] == "Lax"
        assert "bsdemo_teach" not in desk.evaluate("document.cookie")
        desk.goto(f"{url}/{LESSON}")  # a new page load: still the class's instructor
        desk.get_by_text(re.compile(rf"^Class {code} · ")).first.wait_for(timeout=ms(30))
        student = browser.new_context(viewport={"width": 390, "height": 844})
        phone = student.new_page()
        phone.goto(f"{url}/?join={code}")
        phone.get_by_text(re.compile(rf"You joined the class {code}")).wait_for(timeout=ms(30))
        seat = wait_for(lambda: httponly(student, "bsdemo_class"), timeout=30)
        assert seat["value"] == code and "bsdemo_class" not in phone.evaluate("document.cookie")
        open_lesson(phone, url)  # the seat, read from the cookie on the next load
        teacher.close()
        student.close()
