"""`python -m bsdemo train` in a real subprocess: JSON events, summaries, bad flags."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.timeouts import scaled


def bsdemo(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "bsdemo", *args], capture_output=True, text=True, timeout=scaled(timeout)
    )


def test_json_lines_follow_the_documented_schema():
    out = bsdemo(
        "train", "--steps", "12", "--batch-size", "16", "--accum", "2", "--json", "--eval-interval", "5"
    )
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert all("kind" in e for e in events)
    assert events[0]["kind"] == "start" and events[0]["effective_batch_size"] == 32
    steps = [e for e in events if e["kind"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, 13))
    for key in (
        "step",
        "epoch",
        "samples_seen",
        "wall_time_s",
        "loss",
        "lr",
        "step_time_s",
        "samples_per_sec",
        "memory_allocated_bytes",
        "peak_memory_bytes",
    ):
        assert key in steps[0]
    assert steps[-1]["samples_seen"] == 12 * 32
    end = events[-1]
    assert end["kind"] == "end" and end["status"] == "completed" and end["message"]
    assert set(end["summary"]) >= {
        "steps",
        "samples_per_sec",
        "peak_memory_bytes",
        "memory_source",
        "final_train_loss",
        "test_accuracy",
        "device",
    }
    assert end["summary"]["steps"] == 12 and end["summary"]["memory_source"] == "accounted"


def test_on_a_terminal_train_draws_a_tqdm_progress_bar_and_in_a_pipe_none():
    """stderr on a pseudo-terminal (30 rows, 100 columns) gets the bar; a pipe gets none."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "bsdemo", "train", "--steps", "60"],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=scaled(120))
    os.close(master)
    bar = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, bar
    assert "100%|" in bar and "60/60" in bar and "samples/s" in bar and "loss " in bar, bar
    piped = bsdemo("train", "--steps", "60")
    assert piped.returncode == 0 and "60/60" not in piped.stderr and "%|" not in piped.stderr


def test_default_output_is_a_summary():
    out = bsdemo("train", "--epochs", "1", "--dataset", "moons", "--width", "32")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Completed")
    assert "samples/s (median)" in out.stdout and "test accuracy" in out.stdout


def test_diverged_run_exits_nonzero_with_a_message():
    out = bsdemo("train", "--lr", "80", "--steps", "200")
    assert out.returncode == 1
    assert "Diverged at step" in out.stdout


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--batch-size", "0"], "--batch-size"),
        (["--batch-size", "-3"], "--batch-size"),
        (["--batch-size", "many"], "--batch-size"),
        (["--lr", "nan"], "--lr"),
        (["--lr", "-1"], "--lr"),
        (["--accum", "0"], "--accum"),
        (["--optimizer", "lion"], "--optimizer"),
        (["--dataset", "mnist"], "--dataset"),
        (["--model", "cnn", "--dataset", "spirals"], "--dataset"),
        (["--steps", "0"], "--steps"),
        (["--device", "cuda"], "--device"),
        (["--epochs", "1", "--steps", "3"], "--steps"),
        (["--bogus", "1"], "--bogus"),
    ],
)
def test_bad_flags_exit_2_with_one_line_and_no_traceback(args, flag):
    out = bsdemo("train", *args)
    if flag == "--device" and out.returncode == 0:
        pytest.skip("this machine has CUDA")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert flag in lines[0] and "Traceback" not in out.stderr
    assert out.stdout == ""


def test_no_command_prints_usage_and_exits_2():
    out = bsdemo()
    assert out.returncode == 2 and "usage" in out.stderr


def test_cli_uses_the_workers_thread_rule_and_rejects_a_bad_setting():
    """The CLI trains with the lab workers' thread count (so their numbers compare alike)."""
    import os

    from bsdemo.limits import default_threads

    code = (
        "import torch, bsdemo.cli as c; c.main(['train', '--steps', '1']); "
        "print('threads', torch.get_num_threads())"
    )
    env = {**os.environ, "BSDEMO_TORCH_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=scaled(120)
    )
    assert done.stdout.strip().splitlines()[-1] == "threads 1"
    assert default_threads(1) == max(1, (os.cpu_count() or 1) - 1)  # no variable: cores less one
    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "train", "--steps", "1"],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        env={**os.environ, "BSDEMO_TORCH_THREADS": "many"},
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "BSDEMO_TORCH_THREADS" in out.stderr and "'many'" in out.stderr


HOSTILE = [
    "",
    "-inf",
    "nan",
    "1e306",
    "1e306GiB",
    "x" * 5000,
    "²",
    "-1",
    "9" * 5000,
    "[x](https://example.com)",
    " ",
    "0x10",
    "x" * 5000 + ".py:f",
    "1,,2",
    "1_000",
    "١٢",
]
PATHS = ["", "x" * 5000, "/dev/null/x"]  # a folder flag: these cannot be folders
WALK = r"""
import contextlib, io, json, sys
from bsdemo.cli import build_parser, main

HOSTILE, PATHS = json.loads(sys.argv[1])
parser = build_parser()
subparsers = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
results = []


def run(argv):
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    results.append({"argv": [a[:40] for a in argv], "code": code, "stderr": err.getvalue(),
                    "stdout": out.getvalue(), "torch": "torch" in sys.modules})


for name, sub in subparsers.choices.items():
    required = {"warm": ["--preset", "digits-mlp"], "datasets": ["list"]}.get(name, [])
    for action in sub._actions:
        if action.nargs == 0 or action.dest == "help":
            continue  # switches (--json) take no value
        values = PATHS if action.dest in ("data_dir", "cache", "trace_dir") else HOSTILE
        for value in values:
            if action.option_strings:
                flag = action.option_strings[0]
                others = [] if flag == "--preset" else required
                run([name, *others, flag, value])
                run([name, *others, f"{flag}={value}"])
            elif action.dest == "action":
                run([name, value])
            else:  # the dataset names
                run([name, "list", value])
print(json.dumps(results))
"""


def test_every_flag_of_every_command_rejects_hostile_values_before_importing_torch():
    """Each value-taking flag (and positional) of each subcommand, with each hostile value, in
    one fresh interpreter: exit code 2, one line of at most 200 characters naming the flag, no
    traceback, nothing on stdout, and torch never imported."""
    # a ceiling, not a speed: about 1,100 commands parsed and refused in one interpreter
    out = subprocess.run(
        [sys.executable, "-c", WALK, json.dumps([HOSTILE, PATHS])],
        capture_output=True,
        text=True,
        timeout=scaled(400),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout)
    assert len(results) > 400  # every command's every flag, each value twice (--f v, --f=v)
    bad = [
        r
        for r in results
        if not (
            r["code"] == 2
            and r["stdout"] == ""
            and not r["torch"]
            and "Traceback" not in r["stderr"]
            and r["stderr"].count("\n") == 1
            and len(r["stderr"]) <= 201
        )
    ]
    assert bad == [], bad[:5]
    for r in results:  # the line names the flag it is about
        flag = ([a.split("=")[0] for a in r["argv"] if a.startswith("--")] or [None])[-1]
        if flag:
            assert flag in r["stderr"], r


def test_datasets_without_an_action_lists_them(tmp_path):
    from bsdemo.datasets import SOURCES

    out = bsdemo("datasets", "--cache", str(tmp_path))  # an empty cache: nothing fetched
    assert out.returncode == 0, out.stderr
    rows = [line.split(None, 1) for line in out.stdout.splitlines()]
    assert [name for name, _ in rows] == list(SOURCES)
    assert all(rest.startswith("not fetched") for _, rest in rows)
