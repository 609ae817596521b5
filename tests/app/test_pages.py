"""Each page through Streamlit's AppTest, from app.py, with short real runs via the scheduler."""

from __future__ import annotations

import collections
import json
import time

from streamlit.testing.v1 import AppTest

from bsdemo.plaintext import plain, unescape
from tests.app.helpers import APP, open_page, run_until
from tests.timeouts import scaled

LAB = "pages/training_lab.py"
HOME = "pages/home.py"


def open_lab(query: dict[str, str] | None = None) -> AppTest:
    return open_page(LAB, query)


def chart_points(at: AppTest, index: int = 0) -> int:
    charts = at.get("plotly_chart")
    if len(charts) <= index:
        return 0
    spec = json.loads(charts[index].proto.spec)
    return len(spec["data"][0]["x"]) if spec["data"] else 0


def test_home_lists_the_lessons_and_links_the_lab():
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    at.switch_page(HOME).run()
    assert not at.exception
    assert at.title[0].value == "Batch Size Lab"
    text = " ".join(m.value for m in [*at.markdown, *at.caption])
    assert "What is one training step" in text and "Memory and out-of-memory" in text
    # each card asks its lesson's question; none gives its answer (the goal comes after a run)
    assert "Gradient variance falls as 1/B" not in text
    assert sum(c.value == "Coming" for c in at.caption) == 0  # every lesson built
    from bsdemo.lessons import LESSONS

    assert all(f"**{lesson.number}. {lesson.title}**" in text for lesson in LESSONS)  # a card each
    pictures = at.get("image")  # each card's sketch of its main chart
    assert len(pictures) == len(LESSONS)


def test_home_cards_show_the_students_predictions():
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    at.session_state["predictions"] = {"throughput": "about the same"}
    at.switch_page(HOME).run()
    assert not at.exception
    mine = [c.value for c in at.caption if c.value.startswith("Your prediction")]
    assert mine == [plain("Your prediction: “about the same”")]  # shown as typed, never Markdown


def test_lab_run_draws_live_charts_and_tiles():
    at = open_lab()
    text = " ".join(m.value for m in at.markdown)
    # the updates an epoch are the lab's question: not counted before it is answered
    assert "**32**" in text and "updates per epoch: predict, or run, first" in text
    assert "updates per epoch (ceil(" not in text
    at.radio(key="predict_training_lab").set_value(at.radio(key="predict_training_lab").options[2]).run()
    assert "**45** updates per epoch" in " ".join(m.value for m in at.markdown)
    at.select_slider[0].set_value(64).run()  # batch size
    at.button(key="run").click().run()
    assert at.button(key="stop").disabled is False or at.success  # running (or already done)
    run_until(at, lambda a: chart_points(a) > 0 and a.success)
    assert chart_points(at, 0) > 0  # loss
    tiles = {m.label: m.value for m in at.metric}
    assert tiles["Test accuracy"].endswith("%")
    assert tiles["Optimizer steps"].startswith(tiles["Optimizer steps"].split(" / ")[-1])
    assert "samples/s" in at.success[0].value
    # once ended, the tile shows the run's own summary figure, as its end message does
    assert f"median {tiles['Samples/s']} samples/s" in at.success[0].value
    # an accounted peak says beside it that the resident data set is not in it, and its size
    memory = next(m for m in at.metric if m.label == "Memory, accounted")
    assert memory.value.endswith(" MiB") and "data set" in memory.delta
    assert memory.delta.endswith("MiB, not in it") and float(memory.delta.split()[3]) > 0
    assert at.query_params["batch_size"] == "64"  # the link reproduces the run
    assert at.button(key="run").disabled is False


def test_a_second_run_is_compared_with_the_first_by_default_and_can_be_dropped():
    at = open_lab()
    at.button(key="run").click().run()
    run_until(at, lambda a: bool(a.success))
    at.select_slider[0].set_value(256).run()
    at.button(key="run").click().run()
    run_until(
        at,
        lambda a: (
            len(a.success) == 1
            and "256" in " ".join(str(r) for r in a.dataframe[-1].value["effective batch"])
        ),
    )
    compared = at.multiselect(key="overlays")
    assert len(compared.options) == 1 and len(compared.value) == 1  # drawn without asking
    assert len(at.get("download_button")) == 2  # the session's runs as JSON and CSV
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    # two runs x (step loss, its smoothed line, train, test), one legend entry per run, each run
    # in its batch's colour (a mark for points above the chart belongs to no run)
    groups = collections.Counter(t["legendgroup"] for t in spec["data"] if t.get("legendgroup"))
    assert sorted(groups.values()) == [4, 4]
    legend = [t for t in spec["data"] if t.get("showlegend", True) and t.get("legendgroup")]
    assert len(legend) == 2 and legend[0]["legendgroup"] != legend[1]["legendgroup"]
    assert legend[0]["line"]["color"] != legend[1]["line"]["color"]
    # batches 32 and 256 drawn together: against samples seen, not batch 256's few steps
    assert x_axis_control(at).value == "samples"
    assert spec["layout"]["xaxis"]["title"]["text"] == "Samples seen"
    # dropped, it stays dropped over the reruns that follow
    compared.unselect(compared.value[0]).run()
    at.run()
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len({t["legendgroup"] for t in spec["data"] if t.get("legendgroup")}) == 1
    assert at.multiselect(key="overlays").value == []


def x_axis_control(at: AppTest):
    """The Lab's x-axis control: a widget per default until the student picks one."""
    (control,) = [c for c in at.segmented_control if c.key.startswith("x_axis")]
    return control


def test_the_chosen_x_axis_stays_for_the_browser_and_goes_into_the_link():
    at = open_lab()
    at.button(key="run").click().run()
    run_until(at, lambda a: bool(a.success))
    assert x_axis_control(at).value == "steps"  # one batch size: steps
    x_axis_control(at).set_value("epochs").run()
    assert at.session_state["lab_view"] == {"x_axis": "epochs"}  # kept for the browser
    at.select_slider[0].set_value(256).run()  # Live: the next run, and its link
    run_until(
        at,
        lambda a: (
            len(a.success) == 1
            and "256" in " ".join(str(r) for r in a.dataframe[-1].value["effective batch"])
        ),
    )
    link = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert link["x_axis"] == "epochs" and link["batch_size"] == "256"
    assert x_axis_control(at).value == "epochs"  # the choice, over samples' default
    reloaded = open_lab(link)  # another browser opening that link sees it the same way
    assert not reloaded.error and x_axis_control(reloaded).value == "epochs"


def test_live_mode_runs_a_changed_setting_at_once_and_supersedes_the_run_going():
    from bsdemo.ui.state import scheduler

    at = open_lab()
    assert at.toggle(key="live").value is True  # on by default in the Lab
    assert "run" not in at.query_params  # opening the page runs nothing
    at.select_slider[0].set_value(1).run()  # batch 1: minutes; its release runs it, no Run
    first = int(at.query_params["run"])
    run_until(at, lambda a: chart_points(a) > 0)
    at.select_slider[0].set_value(2).run()  # released again: the run going is replaced
    second = int(at.query_params["run"])
    assert second != first
    old = scheduler().wait(first, timeout=scaled(60))
    assert old.status == "cancelled" and old.superseded_by == second and old.steps["step"]

    def faint(a: AppTest) -> list[dict]:  # the superseded run's traces on the loss chart
        charts = a.get("plotly_chart")
        spec = json.loads(charts[0].proto.spec) if charts else {"data": []}
        return [t for t in spec["data"] if "superseded" in (t.get("name") or "")]

    run_until(at, lambda a: chart_points(a) > 0 and bool(faint(a)))
    assert all(t["opacity"] < 0.5 for t in faint(at))  # kept, faint, named superseded
    at.button(key="run").click().run()  # the Run pressed by habit starts nothing more
    assert int(at.query_params["run"]) == second
    assert scheduler().snapshot(second).status in ("queued", "running")
    at.toggle(key="live").set_value(False).run()  # Live off: a change waits for Run
    at.select_slider[0].set_value(4).run()
    assert int(at.query_params["run"]) == second
    at.button(key="stop").click().run()
    assert scheduler().wait(second, timeout=scaled(60)).superseded_by is None


def test_query_params_fill_the_widgets():
    at = open_lab({"batch_size": "256", "lr": "0.03", "optimizer": "adam"})
    assert at.select_slider[0].value == 256
    assert at.select_slider[1].value == 0.03
    assert at.selectbox(key="w_optimizer").value == "adam"


def test_bad_query_params_show_a_message_and_fall_back_to_defaults():
    at = open_lab({"batch_size": "-5"})
    message = unescape(at.error[0].value)  # shown as plain text: Markdown marks escaped
    assert "batch_size" in message and "-5" in message
    assert at.select_slider[0].value == 32
    at = open_lab({"warp_speed": "9"})
    assert "warp_speed" in unescape(at.error[0].value)


def test_oversize_exact_batch_is_clamped_with_a_notice():
    at = open_lab()
    at.checkbox(key="w_batch_exact").check().run()
    at.number_input(key="w_batch_value").set_value(5000).run()
    assert any("clamped" in i.value for i in at.info)
    assert "full-batch" in " ".join(i.value for i in at.info)


def long_run_going(query: dict[str, str] | None = None) -> AppTest:
    """A lab tab whose long run (batch 1, 50 epochs) has drawn its first point."""
    at = open_lab(query)
    at.select_slider[0].set_value(1).run()
    at.number_input(key="w_epochs").set_value(50).run()
    at.button(key="run").click().run()
    run_until(at, lambda a: chart_points(a) > 0)
    return at


def test_stop_cancels_a_long_run():
    at = long_run_going()
    at.button(key="stop").click().run()
    run_until(at, lambda a: bool(a.warning) and "Stopped after" in a.warning[0].value)


def test_a_reloaded_tab_reattaches_to_its_run_and_a_stranger_only_watches(monkeypatch):
    """Control comes from the browser's cookie, never from the link: the link names the run
    only by its id. AppTest sends no cookies, so the cookie is what browser_secret() returns."""
    from bsdemo.ui import state

    at = long_run_going()
    job = at.query_params["run"]
    assert job.isdigit()  # the link carries the run's id and settings, nothing that proves who
    secret = at.session_state["secret_to_store"]  # what the first tab wrote into its cookie
    monkeypatch.setattr(state, "browser_secret", lambda: secret)  # the same browser, reloaded
    reloaded = open_lab({"run": job, "batch_size": "1", "epochs": "50"})
    run_until(reloaded, lambda a: chart_points(a) > 0)
    assert reloaded.button(key="stop").disabled is False  # its own run: it may stop it
    monkeypatch.setattr(state, "browser_secret", lambda: None)  # another browser, same link
    stranger = open_lab({"run": job, "batch_size": "1", "epochs": "50"})
    run_until(stranger, lambda a: chart_points(a) > 0)  # sees the run …
    assert stranger.button(key="stop").disabled is True  # … but cannot stop it
    assert any("Read-only" in c.value for c in stranger.caption)
    for old_link in (f"{job}.0000000000000000", f"{job}.{'f' * 16}"):  # old-style tokens: ids
        forged = open_lab({"run": old_link})
        assert forged.button(key="stop").disabled is True
    reloaded.button(key="stop").click().run()
    run_until(reloaded, lambda a: bool(a.warning) and "Stopped after" in a.warning[0].value)


def test_a_waiting_run_shows_its_place_reason_and_predicted_start(monkeypatch):
    from bsdemo.ui.state import scheduler

    monkeypatch.setattr(scheduler()._pool, "turns", 1)  # a run at a time: the second waits
    first = long_run_going()
    second = open_lab()
    second.button(key="run").click().run()
    waiting = " ".join(i.value for i in second.info)
    assert "is waiting: position 1 in the queue (all 1 worker(s) are busy)" in waiting
    assert "it should start in about" in waiting and "(predicted" in waiting
    sidebar = " ".join(c.value for c in second.sidebar.caption)
    assert "Server now: 1 running, 1 waiting, 1 worker(s)" in sidebar
    # pressed again while it waits: the newer settings take the waiting run's place
    run = second.button(key="run")
    assert run.label == "Run instead" and "has not started yet" in run.help
    replaced = int(second.query_params["run"])
    second.button(key="run").click().run()
    assert int(second.query_params["run"]) != replaced
    assert scheduler().snapshot(replaced).status == "cancelled"
    assert "Superseded" in scheduler().snapshot(replaced).end["message"]
    assert "position 1 in the queue" in " ".join(i.value for i in second.info)
    first.button(key="stop").click().run()
    run_until(second, lambda a: bool(a.success))  # it started once the device was free


def test_runs_pressed_together_take_turns_and_each_tab_says_so():
    first = long_run_going()
    second = long_run_going({"seed": "7"})  # other settings: a run of its own, not a rider
    run_until(second, lambda a: any("takes turns with 1 other run" in i.value for i in a.info))
    status = next(i.value for i in second.info if "takes turns" in i.value)
    assert "every step is timed alone" in status and "shares the device" not in status
    for at in (first, second):
        at.button(key="stop").click().run()
        run_until(at, lambda a: bool(a.warning) and "Stopped after" in a.warning[0].value)


def test_a_lab_scenario_sets_every_control():
    at = open_lab()
    at.button(key="scenario_3").click().run()  # "Batch 256, lr × 8"
    assert not at.exception
    assert at.session_state["w_batch_pow"] == 256 and at.session_state["w_lr"] == 0.4
    assert at.session_state["w_epochs"] == 10 and at.session_state["w_accumulation_steps"] == 1
    text = " ".join(m.value for m in at.markdown)
    assert "**256**" in text and "**6** updates per epoch" in text


def test_the_lab_trains_a_gan_and_shows_its_images_and_frechet_distance():
    at = open_lab()
    at.selectbox(key="w_preset").set_value("digits-gan").run()
    assert at.number_input(key="w_epochs").value == 30  # the GAN's preset sets its own budget
    at.number_input(key="w_epochs").set_value(2).run()
    at.button(key="run").click().run()
    run_until(at, lambda a: bool(a.success), timeout=180)
    assert "Fréchet distance" in at.success[0].value
    tiles = {m.label: m.value for m in at.metric}
    assert float(tiles["Fréchet distance"]) > 0 and "Test accuracy" not in tiles
    specs = {
        json.loads(c.proto.spec)["layout"]["title"]["text"]: json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
    }
    grid = next(s for t, s in specs.items() if t.startswith("Generated images at step"))
    assert len(grid["data"][0]["z"]) == 4 * 9 + 1  # 4 images of 8 px, a line after each, a border
    assert "Fréchet distance to real test images" in specs
    loss = specs["Loss"]
    assert any((t.get("name") or "").endswith("· generator") for t in loss["data"])
    lead = next(i.value for i in at.info if "optimizer steps" in i.value)  # the takeaway
    assert "Fréchet distance of" in lead and "test accuracy" not in lead


def test_the_lab_trains_an_lstm():
    at = open_lab()
    at.selectbox(key="w_preset").set_value("digits-lstm").run()
    at.button(key="run").click().run()
    run_until(at, lambda a: bool(a.success), timeout=180)
    tiles = {m.label: m.value for m in at.metric}
    assert float(tiles["Test accuracy"].rstrip("%")) > 50  # 10 classes: chance is 10 %


def test_every_page_keeps_its_browsers_run_attended():
    """The heartbeat is in the sidebar: the owner moving to Home (or the quiz) in the same tab
    keeps the run; the unattended-run reaper cancels only a tab that is gone."""
    from bsdemo.ui.state import scheduler

    at = long_run_going()
    job = int(at.query_params["run"])
    sched = scheduler()  # the process's one scheduler, the one the pages use
    back = sched.limits.unattended_grace_s / 2  # as if no page had looked for half the grace
    for page in (HOME, "pages/quiz.py"):
        with sched._lock:
            sched._jobs[job].last_seen -= back
        at.switch_page(page).run()
        assert not at.exception
        with sched._lock:
            assert time.monotonic() - sched._jobs[job].last_seen < back / 2, page
            assert sched._jobs[job].status == "running"
    assert sched.cancel(job)
    assert sched.wait(job, timeout=scaled(60)).status == "cancelled"


def test_a_link_to_a_run_this_server_no_longer_has_says_so():
    at = open_lab({"run": "123456789", "batch_size": "64"})
    text = " ".join(e.value for e in [*at.error, *at.warning, *at.info])
    assert "Run 123456789 from this link is no longer on this server" in text
    assert at.session_state["w_batch_value" if at.session_state["w_batch_exact"] else "w_batch_pow"] == 64


def test_every_setting_of_a_run_has_one_place_in_the_labs_widgets():
    """The Lab reads and writes a RunConfig through one list of the settings its widgets hold as
    they are (bsdemo.ui.lab.AS_IS); the rest have widgets of their own shape. A new setting
    that is in neither fails here, not silently in a student's link."""
    import dataclasses

    from bsdemo.config import RunConfig
    from bsdemo.ui.lab import AS_IS

    shaped = {"dataset", "model", "batch_size", "epochs", "max_steps", "time_limit_s"}
    assert {f.name for f in dataclasses.fields(RunConfig)} == set(AS_IS) | shaped
    assert not set(AS_IS) & shaped
