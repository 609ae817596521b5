"""Room benchmark: a room of students pressing Run at once, against a real Streamlit server.

Each simulated student is a light WebSocket client that speaks Streamlit's own protocol (the
BackMsg/ForwardMsg protobufs on ws://127.0.0.1:PORT/_stcore/stream) the way the browser's
frontend does, without a browser:

1. It connects with its own `bsdemo_browser` cookie (32 hex characters: its own owner, see
   bsdemo/ui/state.py) and its own client address (`X-Forwarded-For: 10.x.y.z`, with the server
   trusting the loopback proxy, BSDEMO_TRUSTED_PROXIES=127.0.0.1: a room behind the course's
   reverse proxy, each laptop its own address, so the per-address limit applies per student),
   and asks for the Training Lab page as a browser opening /training_lab does (page_name
   "training_lab", no page hash yet; later reruns send the page hash the server named in
   new_session, and the query string of the server's latest page_info_changed).
2. Once the page's first script run has finished, it presses Run: a rerun whose widget states
   carry the Run button's trigger (the button found in the deltas: label "Run", key "run").
   --mix defaults: every student presses Run with the page's defaults (one configuration: the
   first run trains, the ones queued behind it are served from the run store once it is
   stored, as the lab serves a class). --mix varied: a third of the students (seeded) keep the
   defaults; the others first switch the Lab's Live mode off (on, the slider's release would
   start the run before the timed press), move the batch-size slider to a value drawn (seeded)
   from the slider's own options (a rerun carrying the slider's new value, as releasing it
   does), wait for that run, then press Run; they keep sending those values in every later
   rerun.
   Widgets a student never touched are left out of its reruns (the browser would send their
   unchanged values; the server keeps them either way).
3. It follows the page's polling like the frontend (App.handleAutoRerun in the bundled JS):
   every `auto_rerun` ForwardMsg (interval, fragment id) starts a timer that sends a rerun of
   that fragment (is_auto_rerun) every interval, whether or not a run is in flight (the server
   coalesces); a second auto_rerun with the same interval keeps the timer; a full script run
   (new_session without fragment ids) clears every timer, as does stop_auto_rerun for its
   fragments. The page's st.rerun() needs nothing from the client: it arrives as a new full
   script run. It also keeps the frontend's message cache (cacheable deltas by hash, aged per
   script run by max_cached_message_age) and reports its hashes in each rerun, so the server
   sends references for unchanged large deltas as it would to a browser.
4. First loss point: the first time, after the press, that the loss chart (the Plotly element
   keyed "loss_chart") has a trace with at least one x value (plain lists or Plotly's base64
   typed arrays). Completion: the run's end status as the student reads it, the success
   alert "Completed …" (trained) or "Stored result …" (served from the run store), the first
   time either appears in any script run (full or fragment) after the press. A full run after
   the press that leaves nothing polling and shows neither (within 2 s: a fragment rerun
   queued behind it can still draw it) is an error: a refused submit, a failed or cancelled
   run. (Not "nothing polls any more" alone: the sidebar's heartbeat
   fragment can be left polling every 20 s after the run ended, until the next full run.)

Per session: time from the press to the first loss point and to completion, and errors
(exceptions on the page, the connection closed, a refused or failed run, no first point within
--timeout). Meanwhile a prober thread gets /_stcore/health every 0.5 s and records its latency,
and a sampler reads /proc/PID/stat of the server (utime+stime: the web process) and of its
descendants (the training workers), reported as web CPU seconds per session and worker CPU
seconds; both over the room (from the first connection to the last completion). The server is warmed
first by one visit (the scheduler and its worker started, the device known), so the window
measures the room and not the server's start.

Every session count runs against a fresh server (`streamlit run app.py` in the repository, so
.streamlit/config.toml applies, plus any --config-flag) with a fresh temporary BSDEMO_DATA_DIR,
one server at a time. A "bare" row per count runs the same configurations back to back (submit,
wait, next) in this process through bsdemo.scheduler.Scheduler only (default limits, a fresh
run store like the server's): the training the room asked for, without the web.

    .venv/bin/python bench/room_bench.py [--sessions 10,20,30] [--within 5] [--hogs 0|2]
        [--mix defaults|varied] [--timeout 240] [--seed 0] [--config-flag KEY=VALUE ...]

--within: the window (s) the presses are spread over (uniformly random, seeded), counted from
the moment every session's page has loaded. --timeout: the bound (s, from a session's press) on
its first point and on its completion. --hogs N: N busy-loop processes for the whole benchmark.
--config-flag runner.postScriptGC=true passes `--runner.postScriptGC true` to streamlit run.
A benchmark, not a test: it prints numbers and judges nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import random
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bsdemo.lessons import BY_SLUG  # noqa: E402 - the repository's package, found from ROOT

PAGE = "training_lab"  # the Training Lab's url path (app.py's navigation: the lesson's slug)
LOSS_CHART = "-loss_chart"  # how the loss chart's element id ends (its key)
RUN_KEY = "-run"  # how the Run button's widget id ends (its key)
BATCH_KEY = "-w_batch_pow"  # the batch-size slider's widget id
LIVE_KEY = "-live"  # the Lab's Live switch: a tab turns it off, to press Run as a room does
QUIET_S = 2.0  # how long a press with nothing polling and no end status waits for one
LOAD_TIMEOUT_S = 120.0  # a page that has not loaded by then is an error
HEALTH_EVERY_S = 0.5
CLK_TCK = os.sysconf("SC_CLK_TCK")
FINISHED = ForwardMsg.ScriptFinishedStatus
ALERT_FORMATS = {1: "error", 2: "warning", 3: "info", 4: "success"}


# ----- the server -----
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, data_dir: str, flags: list[tuple[str, str]],
                 log: Path) -> subprocess.Popen:
    """`streamlit run app.py` in its own process group; returns once /_stcore/health answers."""
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
           "--server.port", str(port), "--server.address", "127.0.0.1"]
    for key, value in flags:
        cmd += [f"--{key}", value]
    env = dict(os.environ, BSDEMO_DATA_DIR=data_dir, BSDEMO_TRUSTED_PROXIES="127.0.0.1")
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1):
                return proc
        except OSError:
            time.sleep(0.1)
    stop_group(proc)
    raise RuntimeError(f"the server did not start; its log:\n{log.read_text()[-2000:]}")


def stop_group(proc: subprocess.Popen) -> None:
    """End a process we started, and its process group (the server's workers with it)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


# ----- what the server costs: CPU and health, sampled in threads -----
def _stat(pid: int) -> tuple[int, float, float] | None:
    """(ppid, own CPU s, reaped children's CPU s) of a process, from /proc/PID/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text.rpartition(")")[2].split()
    return (int(rest[1]), (int(rest[11]) + int(rest[12])) / CLK_TCK,
            (int(rest[13]) + int(rest[14])) / CLK_TCK)


class CpuSampler(threading.Thread):
    """The server process's CPU time, and its descendants' (the workers'), every 0.5 s: the
    last value seen for each descendant is kept, so one that ends (a replaced worker) still
    counts, as does what the server reaped (its children's cutime)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.stop, self.lock = pid, threading.Event(), threading.Lock()
        self.web = self.reaped = 0.0
        self.kids: dict[int, float] = {}
        self.sample()

    def sample(self) -> None:
        with self.lock:
            self._sample()

    def _sample(self) -> None:
        own = _stat(self.pid)
        if own is None:
            return
        self.web, self.reaped = own[1], own[2]
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (st := _stat(int(entry))) is not None:
                parents[int(entry)] = st[0]
        tree, grew = {self.pid}, True
        while grew:
            grew = False
            for pid, ppid in parents.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree - {self.pid}:
            if (st := _stat(pid)) is not None:
                self.kids[pid] = st[1] + st[2]

    def totals(self) -> tuple[float, float]:
        """(web process CPU s, workers' CPU s) so far."""
        with self.lock:
            return self.web, self.reaped + sum(self.kids.values())

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.sample()


class HealthProber(threading.Thread):
    """GET /_stcore/health every 0.5 s; latencies in ms (a failure counts as its timeout)."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.url, self.stop = f"http://127.0.0.1:{port}/_stcore/health", threading.Event()
        self.since = float("inf")  # time.monotonic() from which latencies count (the room's)
        self.latencies_ms: list[float] = []
        self.failures = 0

    def run(self) -> None:
        while not self.stop.is_set():
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    response.read()
            except OSError:
                self.failures += 1 if time.monotonic() >= self.since else 0
            if time.monotonic() >= self.since:
                self.latencies_ms.append((time.perf_counter() - t) * 1e3)
            self.stop.wait(max(0.0, HEALTH_EVERY_S - (time.perf_counter() - t)))


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
    async def rerun(self, fragment: str = "", auto: bool = False,
                    trigger: str | None = None) -> None:
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
        info.url = f"http://127.0.0.1:{self.port}/{self.page}" + (f"?{self.query}" if self.query
                                                                   else "")
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
            if (self.press_seen and not self.done.is_set() and fmt == "success"
                    and (body.startswith("Stored result") or body.startswith("Completed"))):
                self.complete("stored" if body.startswith("Stored result") else "trained")
        elif kind == "exception":
            self.result.errors.append(f"exception on the page: {element.exception.type}: "
                                      f"{element.exception.message[:120]}")
        elif (kind == "plotly_chart" and self.press_seen and self.result.first_point_s is None
              and element.plotly_chart.id.endswith(LOSS_CHART)
              and loss_points(element.plotly_chart.spec) > 0):
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
                QUIET_S, lambda: self.done.is_set() or self.complete(None, quiet_at))

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
            said = [f"{fmt}: {body[:100]}" for fmt, body in self.alerts
                    if fmt in ("error", "warning")]
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
    async def visit(self, room: Room | None, offset: float, pick: random.Random | None,
                    timeout: float) -> None:
        """Open the page, maybe pick a batch size, wait for the room, press Run, watch the run
        to its end (bounded by timeout from the press); room None: open the page and wait
        until nothing polls any more (the server's warm-up)."""
        headers = {"Cookie": f"bsdemo_browser={self.secret}", "X-Forwarded-For": self.address}
        arrived = False
        try:
            async with connect(f"ws://127.0.0.1:{self.port}/_stcore/stream",
                               subprotocols=["streamlit"], origin=f"http://127.0.0.1:{self.port}",
                               additional_headers=headers, max_size=None,
                               open_timeout=LOAD_TIMEOUT_S) as ws:
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


# ----- one room on one fresh server -----
@dataclass
class RoomRun:
    n: int
    results: list[Result]
    health_ms: list[float]
    health_failures: int
    web_cpu_s: float
    worker_cpu_s: float
    client_cpu_s: float
    span_s: float | None  # the first press to the last completion
    server_errors: int  # tracebacks in the server's log
    load_web_cpu_s: float  # of web_cpu_s: until every page had loaded (before the presses)


def batch_choices(n: int, mix: str, seed: int) -> list[random.Random | None]:
    """Per session: None (the defaults) or the seeded generator its slider pick is drawn from."""
    rng = random.Random(seed)
    keep = set(range(n)) if mix == "defaults" else set(rng.sample(range(n), n // 3))
    return [None if i in keep else random.Random(seed * 1000 + i) for i in range(n)]


async def room_async(port: int, n: int, mix: str, within: float, timeout: float, seed: int,
                     sampler: CpuSampler, prober: HealthProber
                     ) -> tuple[list[Result], float, float, float, float]:
    warm = Tab(port, Result(-1, None), "10.255.255.254")
    await warm.visit(None, 0.0, None, timeout)
    if warm.result.errors:
        raise RuntimeError(f"warm-up visit failed: {warm.result.errors}")
    prober.since = time.monotonic()
    sampler.sample()
    web0, workers0 = sampler.totals()
    client0 = time.process_time()
    rng = random.Random(seed)
    offsets = [rng.uniform(0, within) for _ in range(n)]
    picks = batch_choices(n, mix, seed)
    room = Room(n)
    loaded: list[float] = []

    async def mark() -> None:  # the web CPU the page loads (and slider picks) took
        await room.loaded.wait()
        sampler.sample()
        loaded.append(sampler.totals()[0] - web0)

    marker = asyncio.create_task(mark())
    tabs = [Tab(port, Result(i, None), f"10.0.{i // 250}.{i % 250 + 1}") for i in range(n)]
    await asyncio.gather(*(tab.visit(room, offsets[i], picks[i], timeout)
                           for i, tab in enumerate(tabs)))
    marker.cancel()
    sampler.sample()
    web1, workers1 = sampler.totals()
    return ([tab.result for tab in tabs], web1 - web0, workers1 - workers0,
            time.process_time() - client0, loaded[0] if loaded else float("nan"))


def one_room(n: int, mix: str, within: float, timeout: float, seed: int,
             flags: list[tuple[str, str]]) -> RoomRun:
    with tempfile.TemporaryDirectory(prefix="room-bench-") as data_dir:
        port, log = free_port(), Path(data_dir) / "server.log"
        proc = start_server(port, data_dir, flags, log)
        sampler, prober = CpuSampler(proc.pid), HealthProber(port)
        try:
            sampler.start()
            prober.start()
            results, web, workers, client, load_web = asyncio.run(
                room_async(port, n, mix, within, timeout, seed, sampler, prober))
        finally:
            prober.stop.set()
            sampler.stop.set()
            prober.join(timeout=10)
            stop_group(proc)
        server_errors = log.read_text(errors="replace").count("Traceback")
    pressed = [r.pressed_at for r in results if r.pressed_at is not None]
    ends = [r.done_at for r in results if r.done_at is not None]
    span = max(ends) - min(pressed) if ends and pressed else None
    return RoomRun(n, results, prober.latencies_ms, prober.failures, web, workers, client, span,
                   server_errors, load_web)


# ----- the same runs without the web -----
def bare(configs: list[int | None], timeout: float) -> tuple[float, int, int, int]:
    """The configurations back to back through the Scheduler (default limits, a fresh run
    store): (total s, trained, stored, errors)."""
    from bsdemo.config import config_from_query
    from bsdemo.limits import Limits
    from bsdemo.scheduler import Scheduler
    from bsdemo.store import open_store

    with tempfile.TemporaryDirectory(prefix="room-bench-bare-") as data_dir:
        sched = Scheduler(limits=Limits(), store=open_store(data_dir))
        try:
            deadline = time.monotonic() + 120
            while not sched.workers_ready() and time.monotonic() < deadline:
                time.sleep(0.05)
            trained = stored = errors = 0
            t = time.perf_counter()
            for i, batch in enumerate(configs):
                cfg, _ = config_from_query({} if batch is None else {"batch_size": str(batch)})
                snap = sched.wait(sched.submit(cfg, owner=f"bare-{i}"), timeout=timeout)
                if snap is None or snap.status != "completed":
                    errors += 1
                elif snap.stored_at is not None:
                    stored += 1
                else:
                    trained += 1
            return time.perf_counter() - t, trained, stored, errors
        finally:
            sched.close()


# ----- the report -----
def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def trio(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    if not values:
        return "–"
    values = [v * scale for v in values]
    return (f"{statistics.median(values):.{digits}f}/{pct(values, 0.95):.{digits}f}/"
            f"{max(values):.{digits}f}")


HEADER = (f"{'sessions':>9} {'seen':>6} {'first pt p50/p95/max s':>23} "
          f"{'done p50/p95/max s':>20} {'errors':>6} {'health p50/p95/max ms':>22} "
          f"{'runs/min':>8} {'web CPU s/sess':>14} {'worker CPU s':>12} {'trained/stored':>14} "
          f"{'span s':>7}")


def row(run: RoomRun) -> str:
    rs = run.results
    firsts = [r.first_point_s for r in rs if r.first_point_s is not None]
    dones = [r.done_s for r in rs if r.done_s is not None]
    completed = [r for r in rs if r.outcome]
    rate = len(completed) / run.span_s * 60 if run.span_s else float("nan")
    errors = sum(1 for r in rs if r.errors)
    outcome = f"{sum(r.outcome == 'trained' for r in rs)}/{sum(r.outcome == 'stored' for r in rs)}"
    return (f"{run.n:>9} {f'{len(firsts)}/{run.n}':>6} {trio(firsts, digits=2):>23} "
            f"{trio(dones, digits=2):>20} "
            f"{errors:>6} {trio(run.health_ms, digits=0):>22} {rate:>8.1f} "
            f"{run.web_cpu_s / run.n:>14.2f} {run.worker_cpu_s:>12.1f} {outcome:>14} "
            f"{run.span_s if run.span_s is not None else float('nan'):>7.1f}")


def bare_row(n: int, total: float, trained: int, stored: int, errors: int) -> str:
    rate = (trained + stored) / total * 60 if total else float("nan")
    return (f"{f'bare {n}':>9} {'–':>6} {'–':>23} {'–':>20} {errors:>6} {'–':>22} {rate:>8.1f} "
            f"{'–':>14} {'–':>12} {f'{trained}/{stored}':>14} {total:>7.1f}")


def details(run: RoomRun) -> list[str]:
    lines = [f"  {run.n} sessions: web CPU {run.web_cpu_s:.1f} s, of it {run.load_web_cpu_s:.1f} s "
             f"while the pages loaded; bench client CPU {run.client_cpu_s:.1f} s; health probe "
             f"failures {run.health_failures}; tracebacks in the server log {run.server_errors}; "
             f"fragment reruns sent {sum(r.fragment_reruns for r in run.results)}"]
    if any(r.batch is not None for r in run.results):
        lines.append("    batch sizes picked: " + ", ".join(str(r.batch or "default")
                                                        for r in run.results))
    late = sorted((r for r in run.results if (r.first_point_s or 0) > TARGET_S),
                  key=lambda r: -r.first_point_s)
    if late:  # who waited past the target, and for what
        lines.append(f"    first point after {TARGET_S:g} s: " + ", ".join(
            f"session {r.index} (batch {r.batch or 'default'}, {r.outcome or 'not done'}) "
            f"{r.first_point_s:.1f} s" for r in late))
    for r in run.results:
        for error in r.errors:
            lines.append(f"    session {r.index} (batch {r.batch or 'default'}): {error}")
    return lines


TARGET_S = 5.0  # the bound on a room's first points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", default="10,20,30", help="comma-separated session counts")
    ap.add_argument("--within", type=float, default=5.0, help="the presses' window (s)")
    ap.add_argument("--hogs", type=int, default=0, help="busy-loop CPU hog processes")
    ap.add_argument("--mix", choices=("defaults", "varied"), default="defaults")
    ap.add_argument("--timeout", type=float, default=240.0,
                    help="bound (s from a press) on its first point and on its completion")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config-flag", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to streamlit run as --KEY VALUE (repeatable)")
    ap.add_argument("--no-bare", action="store_true", help="skip the scheduler-only rows")
    args = ap.parse_args()
    counts = [int(c) for c in args.sessions.split(",") if c.strip()]
    flags = [tuple(f.split("=", 1)) for f in args.config_flag]
    if any(len(f) != 2 for f in flags):
        ap.error("--config-flag takes KEY=VALUE")
    assert PAGE in BY_SLUG, f"no lesson page {PAGE!r} in bsdemo.lessons"
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(args.hogs)]
    label = (f"mix={args.mix}, within={args.within:g} s, hogs={args.hogs}, timeout="
             f"{args.timeout:g} s, config flags: "
             f"{' '.join(f'--{k} {v}' for k, v in flags) or 'none (.streamlit/config.toml)'}")
    rows, notes = [], []
    try:
        for n in counts:
            run = one_room(n, args.mix, args.within, args.timeout, args.seed, flags)
            rows.append(row(run))
            notes += details(run)
            print(f"[{n} sessions done]", flush=True)
            if not args.no_bare:
                configs = [r.batch for r in run.results]
                rows.append(bare_row(n, *bare(configs, args.timeout)))
    finally:
        for hog in hogs:
            stop_group(hog)
    print(f"\nRoom benchmark: {label}")
    print(HEADER)
    for line in rows:
        print(line)
    for line in notes:
        print(line)


if __name__ == "__main__":
    main()
