"""One student's tab, as the room benchmarks drive it: Streamlit's own websocket protocol, the
widget states a browser sends and the messages it reads (bench/room_bench.py's docstring tells
how), timing its first loss point and its end."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import re
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


PAGE = "training_lab"  # the Training Lab's url path (app.py's navigation: the lesson's slug)
LOSS_CHART = "-loss_chart"  # how the loss chart's element id ends (its key)
RUN_KEY = "-run"  # how the Run button's widget id ends (its key)
BATCH_KEY = "-w_batch_pow"  # the batch-size slider's widget id
LIVE_KEY = "-live"  # the Lab's Live switch: a tab turns it off, to press Run as a room does
QUIET_S = 2.0  # how long a press with nothing polling and no end status waits for one
LOAD_TIMEOUT_S = 120.0  # a page that has not loaded by then is an error
FINISHED = ForwardMsg.ScriptFinishedStatus
ALERT_FORMATS = {1: "error", 2: "warning", 3: "info", 4: "success"}


# ----- one student's tab -----
def loss_points(spec: str) -> int:
    """The most x values in any trace of a Plotly figure's JSON (lists or base64 typed arrays)."""
    if '"x"' not in spec:
        return 0
    most = 0
    for trace in json.loads(spec).get("data", []):
        x = trace.get("x")
        if isinstance(x, list):
            most = max(most, len(x))
        elif isinstance(x, dict) and isinstance(x.get("bdata"), str):
            size = int(re.sub(r"\D", "", str(x.get("dtype", "f8"))) or 8)
            most = max(most, len(base64.b64decode(x["bdata"])) // size)
    return most


@dataclass
class Cached:
    raw: bytes
    run: int  # the script-run count it was last used in
    fragment: str


@dataclass
class Result:
    index: int
    batch: int | None  # the batch size it picked; None: the defaults
    first_point_s: float | None = None
    done_s: float | None = None
    pressed_at: float | None = None  # time.monotonic()
    done_at: float | None = None
    outcome: str = ""  # "trained" or "stored" once completed
    errors: list[str] = field(default_factory=list)
    fragment_reruns: int = 0


class Room:
    """What the tabs share: the moment every page has loaded, and the press schedule."""

    def __init__(self, n: int):
        self.waiting = n
        self.loaded = asyncio.Event()
        self.t0 = 0.0

    def arrived(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.t0 = time.monotonic()
            self.loaded.set()


class Tab:
    """One browser tab on the Training Lab, as the frontend drives it (see the module's doc)."""

    def __init__(self, port: int, result: Result, address: str):
        self.port, self.result, self.address = port, result, address
        self.page = PAGE  # the page's url path (bench/class_bench.py opens others)
        self.secret = secrets.token_hex(16)
        self.ws = None
        self.page_hash = ""  # the page's script hash, once the navigation message named it
        self.query = ""  # the URL's query string, as the server last set it
        self.values: dict[str, WidgetState] = {}  # widgets this tab changed: sent every rerun
        self.live_switch: str | None = None  # the Lab's Live switch's widget id
        self.timers: dict[str, tuple[float, asyncio.Task]] = {}
        self.cache: dict[str, Cached] = {}
        self.runs = 0  # script runs finished (the cache's clock)
        self.max_age = 2
        self.got_new_session = False
        self.run_fragments: list[str] = []  # the current script run's fragments ([]: full)
        self.full_runs = 0
        self.full_run_done = asyncio.Event()
        self.alerts: list[tuple[str, str]] = []  # (format, body) of the current full run
        self.run_button: tuple[str, bool] | None = None  # (widget id, disabled)
        self.batch_slider: tuple[str, list[str]] | None = None  # (widget id, options)
        self.pressed = False
        self.press_seen = False  # a full run started after the press
        self.done = asyncio.Event()
        # script runs ended to their end (fragment or full; not those cut short for a rerun)
        self.script_ends, self.script_end = 0, asyncio.Event()
        self.ends_at_done = 0

    # --- sending ---
    async def rerun(self, fragment: str = "", auto: bool = False, trigger: str | None = None) -> None:
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        if self.page_hash:
            state.page_script_hash = self.page_hash
        else:
            state.page_name = self.page  # the first request: the page from the URL's path
        state.fragment_id = fragment
        state.is_auto_rerun = auto
        for value in self.values.values():
            state.widget_states.widgets.add().CopyFrom(value)
        if trigger:
            state.widget_states.widgets.add(id=trigger, trigger_value=True)
        state.cached_message_hashes.extend(self.cache)
        info = state.context_info
        info.timezone, info.timezone_offset, info.locale = "UTC", 0, "en-US"
        info.url = f"http://127.0.0.1:{self.port}/{self.page}" + (f"?{self.query}" if self.query else "")
        info.is_embedded, info.color_scheme = False, "light"
        self.got_new_session = False
        await self.ws.send(msg.SerializeToString())

    async def poll(self, fragment: str, interval: float) -> None:
        """setInterval: a rerun of the fragment every interval, in flight or not."""
        due = time.monotonic()
        while True:
            due += interval
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            self.result.fragment_reruns += 1
            try:
                await self.rerun(fragment, auto=True)
            except ConnectionClosed:
                return  # the reader reports it

    def stop_timer(self, fragment: str) -> None:
        timer = self.timers.pop(fragment, None)
        if timer is not None:
            timer[1].cancel()

    # --- receiving ---
    async def read(self) -> None:
        """Handle the server's messages in order; a connection that ends first is an error."""
        try:
            async for raw in self.ws:
                msg = ForwardMsg()
                msg.ParseFromString(raw)
                self.handle(msg, raw)
            reason = "connection closed by the server"
        except ConnectionClosed as exc:
            reason = f"connection closed ({exc})"
        except Exception as exc:  # noqa: BLE001 - a message this client could not handle
            reason = f"client error: {type(exc).__name__}: {str(exc)[:120]}"
        finally:
            for fragment in list(self.timers):
                self.stop_timer(fragment)
        if not self.done.is_set():
            self.result.errors.append(reason)
            self.full_run_done.set()  # wake a waiter: it sees the error
            self.done.set()

    def handle(self, msg: ForwardMsg, raw: bytes) -> None:
        kind = msg.WhichOneof("type")
        if kind == "ref_hash":  # an unchanged large delta: the cached one stands for it
            hit = self.cache.get(msg.ref_hash)
            if hit is None:
                self.result.errors.append(f"cache miss for {msg.ref_hash}")
                return
            hit.run = self.runs
            kind, msg = "delta", ForwardMsg.FromString(hit.raw)
        elif msg.metadata.cacheable and msg.hash and msg.hash not in self.cache:
            self.cache[msg.hash] = Cached(raw, self.runs, msg.delta.fragment_id)
        if kind == "new_session":
            self.got_new_session = True
            self.run_fragments = list(msg.metadata.run.fragment_ids)
            if not self.run_fragments:  # a full run: the frontend drops every timer
                self.max_age = msg.new_session.config.max_cached_message_age or 2
                for fragment in list(self.timers):
                    self.stop_timer(fragment)
                self.alerts = []
                self.press_seen = self.pressed
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            self.element(msg.delta.new_element)
        elif kind == "auto_rerun":
            fragment, interval = msg.auto_rerun.fragment_id, msg.auto_rerun.interval
            if fragment and self.timers.get(fragment, (None,))[0] != interval:
                self.stop_timer(fragment)
                self.timers[fragment] = (interval, asyncio.create_task(self.poll(fragment, interval)))
        elif kind == "stop_auto_rerun":
            for fragment in msg.stop_auto_rerun.fragment_ids:
                self.stop_timer(fragment)
        elif kind == "navigation":  # st.navigation names the page that ran (App.handleNavigation)
            self.page_hash = msg.navigation.page_script_hash
        elif kind == "page_info_changed":
            self.query = msg.page_info_changed.query_string
        elif kind == "script_finished":
            self.finished(msg.script_finished)

    def element(self, element) -> None:
        kind = element.WhichOneof("type")
        if kind == "button" and (element.button.label == "Run" or element.button.id.endswith(RUN_KEY)):
            self.run_button = (element.button.id, element.button.disabled)
        elif kind == "slider" and element.slider.id.endswith(BATCH_KEY):
            self.batch_slider = (element.slider.id, list(element.slider.options))
        elif kind == "checkbox" and element.checkbox.id.endswith(LIVE_KEY):
            self.live_switch = element.checkbox.id
        elif kind == "alert":
            fmt, body = ALERT_FORMATS.get(element.alert.format, "?"), element.alert.body
            if not self.run_fragments:
                self.alerts.append((fmt, body))
            if (
                self.press_seen
                and not self.done.is_set()
                and fmt == "success"
                and (body.startswith("Stored result") or body.startswith("Completed"))
            ):
                self.complete("stored" if body.startswith("Stored result") else "trained")
        elif kind == "exception":
            self.result.errors.append(
                f"exception on the page: {element.exception.type}: {element.exception.message[:120]}"
            )
        elif (
            kind == "plotly_chart"
            and self.press_seen
            and self.result.first_point_s is None
            and element.plotly_chart.id.endswith(LOSS_CHART)
            and loss_points(element.plotly_chart.spec) > 0
        ):
            self.result.first_point_s = time.monotonic() - self.result.pressed_at

    def finished(self, status: int) -> None:
        if status != FINISHED.FINISHED_EARLY_FOR_RERUN:
            self.script_ends += 1
            self.script_end.set()
        if status != FINISHED.FINISHED_EARLY_FOR_RERUN and self.got_new_session:
            self.runs += 1  # the frontend's cache ages its messages per finished run
            for digest, hit in list(self.cache.items()):
                if self.run_fragments and hit.fragment not in self.run_fragments:
                    continue
                if self.runs - hit.run > self.max_age:
                    del self.cache[digest]
        if status != FINISHED.FINISHED_SUCCESSFULLY or self.run_fragments:
            return
        self.full_runs += 1
        self.full_run_done.set()
        if self.press_seen and not self.timers and not self.done.is_set():
            # nothing polls and no run ended: a refusal or a failed run, unless the end status
            # is still coming (a queued fragment rerun can draw it just after this full run)
            quiet_at = time.monotonic()
            asyncio.get_running_loop().call_later(
                QUIET_S, lambda: self.done.is_set() or self.complete(None, quiet_at)
            )

    def complete(self, outcome: str | None, at: float | None = None) -> None:
        """The run's end as the student sees it: its success status ("trained" or "stored"), or
        (None) a full run after the press that left nothing polling and showed no such status:
        an error, quoting the run's warnings and errors."""
        result = self.result
        result.done_at = at or time.monotonic()
        result.done_s = result.done_at - result.pressed_at
        self.ends_at_done = self.script_ends
        if outcome is not None:
            result.outcome = outcome
        else:
            said = [f"{fmt}: {body[:100]}" for fmt, body in self.alerts if fmt in ("error", "warning")]
            result.errors.append("run did not complete: " + ("; ".join(said) or "no status"))
        self.done.set()

    async def full_run(self, timeout: float) -> None:
        """Wait for the next full script run to finish."""
        count = self.full_runs
        deadline = time.monotonic() + timeout
        while self.full_runs == count and not self.done.is_set():
            self.full_run_done.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no full script run finished")
            await asyncio.wait_for(self.full_run_done.wait(), left)

    # --- the student ---
    async def visit(
        self, room: Room | None, offset: float, pick: random.Random | None, timeout: float
    ) -> None:
        """Open the page, maybe pick a batch size, wait for the room, press Run, watch the run
        to its end (bounded by timeout from the press); room None: open the page and wait
        until nothing polls any more (the server's warm-up)."""
        headers = {"Cookie": f"bsdemo_browser={self.secret}", "X-Forwarded-For": self.address}
        arrived = False
        try:
            async with connect(
                f"ws://127.0.0.1:{self.port}/_stcore/stream",
                subprotocols=["streamlit"],
                origin=f"http://127.0.0.1:{self.port}",
                additional_headers=headers,
                max_size=None,
                open_timeout=LOAD_TIMEOUT_S,
            ) as ws:
                self.ws = ws
                reader = asyncio.create_task(self.read())
                try:
                    await self.rerun()
                    await self.full_run(LOAD_TIMEOUT_S)
                    if room is None:  # warm-up: rerun until the device badge stops polling
                        deadline = time.monotonic() + LOAD_TIMEOUT_S
                        while self.timers and time.monotonic() < deadline:
                            await asyncio.sleep(1.0)
                            await self.rerun()
                            await self.full_run(LOAD_TIMEOUT_S)
                        return
                    await self.choose(pick)
                    room.arrived()
                    arrived = True
                    await room.loaded.wait()
                    await asyncio.sleep(max(0.0, room.t0 + offset - time.monotonic()))
                    await self.press(timeout)
                finally:
                    reader.cancel()
        except Exception as exc:  # noqa: BLE001 - any failure is this session's counted error
            self.result.errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")
        finally:
            if room is not None and not arrived:
                room.arrived()  # the room does not wait for a tab that failed to load

    async def choose(self, pick: random.Random | None) -> None:
        """--mix varied: move the batch slider to a value from its options (a rerun)."""
        if pick is None:
            return
        if self.batch_slider is None:
            raise RuntimeError("no batch-size slider on the page")
        if self.live_switch is not None:  # Live mode would run the slider's value at once:
            state = WidgetState(id=self.live_switch)  # off, the room's Run presses are timed
            state.bool_value = False
            self.values[self.live_switch] = state
            await self.rerun()
            await self.full_run(LOAD_TIMEOUT_S)
        widget, options = self.batch_slider
        choice = pick.choice(options)
        self.result.batch = int(choice)
        state = WidgetState(id=widget)
        state.string_array_value.data.append(choice)
        self.values[widget] = state
        await self.rerun()
        await self.full_run(LOAD_TIMEOUT_S)

    async def press(self, timeout: float) -> None:
        if self.run_button is None:
            raise RuntimeError("no Run button on the page")
        widget, disabled = self.run_button
        if disabled:
            raise RuntimeError("the Run button is disabled")
        self.result.pressed_at = time.monotonic()
        self.pressed = True
        await self.rerun(trigger=widget)
        try:
            await asyncio.wait_for(self.done.wait(), timeout)
        except TimeoutError:
            self.result.errors.append(f"not done within {timeout:g} s")
            return
        # the script run that showed the end status draws the charts after it: read it to its
        # end — or, when a rerun cut it short after the status (a poll arriving meanwhile: the
        # browser then keeps the previous frame's charts a moment), the next run to its end
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while self.script_ends == self.ends_at_done and time.monotonic() < deadline:
            self.script_end.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.script_end.wait(), deadline - time.monotonic())
        if self.result.first_point_s is None:
            self.result.errors.append("ended without a loss point on the chart")
