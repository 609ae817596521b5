"""A course deployment in real Chromium: two Streamlit replicas behind a real nginx (cookie
affinity, as deploy/cluster/ puts Traefik in front of them), one scheduler for both on a real
two-node Ray cluster, one PostgreSQL run store.

Students are browser contexts: the affinity cookie picks their replica. Each sends the address
an outer proxy would have written for its machine (X-Forwarded-For); nginx appends the browser's
own, 127.0.0.1, which the replicas are told to trust (BSDEMO_TRUSTED_PROXIES) — so each
student counts by the address it names, as behind a real load balancer."""

from __future__ import annotations

import os
import re
import signal

import pytest

from tests.e2e.test_browser import LOSS_POINTS, ms, serving
from tests.e2e.test_classroom import ANSWERS, LESSON, join_and_vote, start_class
from tests.timeouts import scaled

pytestmark = pytest.mark.e2e

LONG_RUN = "/training_lab?batch_size=1&epochs=20"  # tens of seconds of training on one CPU


def server_load(page) -> str:
    return page.get_by_text(re.compile(r"^Server now: ")).inner_text()


def test_two_replicas_behind_nginx_share_one_queue_its_limits_and_the_store(browser, tmp_path, postgres_url):
    """Student A presses Run on replica A. On replica B, the server's load shows A's run, and
    a student B from A's address is refused a second run (the per-address limit counts across
    both). When A's run ends, student C on replica B asking for the same run is served it from
    the store. Replica A is then killed: nginx sends A's browser to B, which shows A's finished
    run. A class started on A gathers votes and sweep runs from members on both replicas, and
    after A dies its instructor, now on B, finds the class, every vote and every run. Finally
    the course's scheduler is shut down and nothing is left behind."""
    from tests.services import NginxProxy, RayCluster
    from tests.unit.test_cluster import replica

    cluster = RayCluster(nodes=2)
    env = {
        **cluster.env,
        "BSDEMO_DATABASE_URL": postgres_url,
        "BSDEMO_TRUSTED_PROXIES": "127.0.0.1",
        "BSDEMO_MAX_ACTIVE_PER_ADDRESS": "1",
    }
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    replicas: list = []
    try:
        with (
            serving(tmp_path / "a", env=env, started=replicas) as port_a,
            serving(tmp_path / "b", env=env, started=replicas) as port_b,
        ):
            proxy = NginxProxy([port_a, port_b])
            served_by = {f"127.0.0.1:{port_a}": "A", f"127.0.0.1:{port_b}": "B"}
            try:

                def student(replica_index: int, address: str):
                    context = browser.new_context(
                        viewport={"width": 1400, "height": 1000},
                        extra_http_headers={"X-Forwarded-For": address},
                    )
                    context.add_cookies(
                        [{"name": "bsdemo_replica", "value": str(replica_index), "url": proxy.url}]
                    )
                    return context.new_page()

                def open_lab(page, path: str) -> str:
                    response = page.goto(proxy.url + path)
                    page.get_by_text("No GPU: runs train on the CPU").wait_for(timeout=ms(180))
                    return served_by[response.headers["x-replica"]]  # the one it tried

                a = student(0, "203.0.113.7")
                assert open_lab(a, LONG_RUN) == "A"
                b = student(1, "203.0.113.7")  # another browser on A's machine
                assert open_lab(b, "/training_lab?batch_size=2&epochs=10") == "B"
                a.get_by_role("button", name="Run").click()
                a.wait_for_function(f"({LOSS_POINTS})() > 0", timeout=ms(120))
                b.get_by_role("button", name="Run").click()
                b.get_by_text("from your network address").wait_for(timeout=ms(60))
                # drawn by the same script run as the refusal: A's run, seen from replica B
                assert server_load(b).startswith("Server now: 1 running"), server_load(b)

                done = a.get_by_text(re.compile(r"^Completed \d+ steps"))
                done.wait_for(timeout=ms(180))
                message = done.inner_text()  # steps, time, speed, accuracy: this run's own
                c = student(1, "203.0.113.9")
                assert open_lab(c, LONG_RUN) == "B"
                c.get_by_role("button", name="Run").click()
                stored = c.get_by_text("Stored result, measured on")
                stored.wait_for(timeout=ms(60))
                assert stored.inner_text().endswith(message), (stored.inner_text(), message)
                c.wait_for_function(f"({LOSS_POINTS})() > 0", timeout=ms(30))

                # a class across both replicas: the instructor on A, members on A and B
                teacher = student(0, "198.51.100.1")
                code = start_class(teacher, proxy.url)
                members = [student(i, f"198.51.100.{10 + i}") for i in (0, 1, 1)]
                for page, answer in zip(members, (ANSWERS[0], ANSWERS[0], ANSWERS[1]), strict=True):
                    join_and_vote(page, proxy.url, code, answer)
                teacher.goto(f"{proxy.url}/{LESSON}")
                tally = re.compile(rf"class {code}.*vote 1: 3 of 3 answered")
                teacher.get_by_text(tally).wait_for(timeout=ms(30))
                # the class's sweep across both replicas: each member runs a cell on the
                # course's workers, the instructor on A sees the three runs
                teacher.get_by_role("button", name="Give each student a cell").click()
                teacher.get_by_text(re.compile(r"Sweep 1: 0 of 7 cells")).wait_for(timeout=ms(30))
                for page in members:
                    page.reload()
                    page.get_by_role("button", name=re.compile(r"^Run my cell")).click()
                for page in members:
                    page.get_by_text(re.compile(r"Sent to the room: ")).wait_for(timeout=ms(240))
                swept = re.compile(r"Sweep 1: 3 of 7 cells have a run \(3 runs\)")
                teacher.get_by_text(swept).wait_for(timeout=ms(30))
                # their tabs closed (reconnecting, they would show nginx that A is down before
                # A's student does); the instructor's browser keeps its cookies
                for page in (teacher, *members):
                    assert page.locator(".stException").count() == 0
                    page.close()

                os.killpg(replicas[0].pid, signal.SIGKILL)  # replica A dies
                replicas[0].wait(timeout=scaled(30))
                response = a.reload()  # its student's browser reconnects: to B
                tried = response.headers["x-replica"].split(", ")  # nginx tried A, then B
                assert [served_by[t] for t in tried] == ["A", "B"], tried
                a.get_by_text(message).wait_for(timeout=ms(60))  # its run, from the scheduler
                a.wait_for_function(f"({LOSS_POINTS})() > 0", timeout=ms(30))
                # the instructor's browser, now on B, still holds the class and its votes
                teacher = teacher.context.new_page()
                teacher.goto(f"{proxy.url}/{LESSON}")
                teacher.get_by_text(tally).wait_for(timeout=ms(60))
                teacher.get_by_text(swept).wait_for(timeout=ms(30))  # and its sweep's runs
                teacher.get_by_role("button", name="Show the room's answers").click()
                teacher.get_by_text(re.compile(r"2 · 67%")).first.wait_for(timeout=ms(30))
                for page in (a, b, c, teacher):
                    assert page.locator(".stException").count() == 0
            finally:
                proxy.close()
        end = replica(cluster, [{"op": "shutdown", "as": "x"}])
        assert end["left_behind"] == []
    finally:
        cluster.close()
