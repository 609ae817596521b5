"""`bsdemo class start|end|export` in a real subprocess: the links it prints open the class, the
key is printed once and kept hashed, bad flags are one line and exit 2, and torch never loads."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from bsdemo.classroom.store import ClassStore
from bsdemo.store import open_store

NO_TORCH = (
    "import sys, runpy; sys.argv = ['bsdemo', *sys.argv[1:]]\n"
    "from bsdemo.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)\n"
    "sys.exit(rc)"
)


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BSDEMO_")}
    return subprocess.run(
        [sys.executable, "-c", NO_TORCH, "class", *args],
        capture_output=True,
        text=True,
        env={**environment, **(env or {})},
        timeout=120,
    )


def test_start_end_and_export(tmp_path):
    data = str(tmp_path / "data")
    out = cli("start", "--title", "Week 3", "--url", "https://lab.example.org/", "--data-dir", data)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == "NO-TORCH"
    code = re.search(r"Class ([A-Z2-9]{6}) started \(Week 3\)", out.stdout).group(1)
    assert f"https://lab.example.org/?join={code}" in out.stdout
    key = re.search(rf"\?teach={code}\.(\S+)", out.stdout).group(1)
    store = open_store(data)
    try:
        classes = ClassStore(store)
        assert classes.is_instructor(code, key)
        raw = store.transact(lambda db: db.execute("SELECT key_hash FROM classes").fetchall())
        assert key not in str(raw)  # only its hash is kept
        member = classes.join(code, "a")
        classes.vote(code, member, "noise", 1, ("x", "y", "z"))
        classes.open_sweep(code, key, "throughput", {"epochs": 2})
        cell = classes.my_cell(code, member, "throughput")[1]
        classes.report(
            code,
            "throughput",
            1,
            cell,
            {
                "batch": 8 * 2**cell,
                "lr": 0.05,
                "seed": 9,
                "status": "completed",
                "accuracy": 0.93,
                "samples_per_sec": 4321.0,
                "curve": [[0.5, 1.5], [1.0, 0.7]],
                "device": "CPU",
                "shared": False,
                "stored": False,
                "turns": 0,
                "run": 1,
                "time_capped": False,
            },
            member=member,
        )
    finally:
        store.close()
    exported = cli("export", code, "--data-dir", data, env={"BSDEMO_CLASS_KEY": key})
    assert exported.returncode == 0, exported.stderr
    results = json.loads(exported.stdout)
    assert results["class"]["members"] == 1 and results["rounds"][0]["counts"] == {"1": 1}
    csv_file = tmp_path / "class.csv"
    assert (
        cli(
            "export", code, "--key", key, "--format", "csv", "--out", str(csv_file), "--data-dir", data
        ).returncode
        == 0
    )
    lines = csv_file.read_text().splitlines()
    assert lines[0] == "question,vote,answer,members,share,the runs' answer"
    assert "noise,1,about 2× smaller,1,1.0,False" in lines
    runs = cli("export", code, "--key", key, "--format", "runs-csv", "--data-dir", data)
    assert runs.returncode == 0 and runs.stderr.strip() == "NO-TORCH"
    header, row = runs.stdout.splitlines()
    assert header.startswith("page,sweep,cell,batch,lr,seed,status,test accuracy,samples/s")
    assert row.startswith(f"throughput,1,{cell},{8 * 2**cell},0.05,9,completed,0.93,4321.0")
    figures = cli("export", code, "--key", key, "--format", "html", "--data-dir", data)
    assert figures.returncode == 0 and figures.stderr.strip() == "NO-TORCH"
    page = figures.stdout
    assert f"<h1>Class {code} — Week 3</h1>" in page and page.count("plotly.js v") == 1
    assert "<h2>Gradient noise: the room" in page and "<h2>Throughput and utilisation: sweep 1" in page
    assert "Samples per second against batch size" in page and member not in page
    ended = cli("end", code, "--key", key, "--data-dir", data)
    assert ended.returncode == 0 and "ended" in ended.stdout


@pytest.mark.parametrize(
    "args,says",
    [
        (("start", "--title", "x" * 200), "--title: got 'xxx"),
        (("start", "--url", "javascript:alert(1)"), "--url: got 'javascript:alert(1)'"),
        (("end", "0OIL11", "--key", "k"), "CODE: got '0OIL11'"),
        (("end", "ABC234", "--key", "wrong"), "Only the class's instructor can do that"),
        (("export", "ABC234"), "Only the class's instructor can do that"),
        ((), "ACTION: got None"),
    ],
)
def test_bad_flags_are_one_line_exit_2_and_no_torch(tmp_path, args, says):
    out = cli(*args, "--data-dir", str(tmp_path / "data")) if args else cli()
    assert out.returncode == 2, out.stdout
    message, torch = out.stderr.strip().splitlines()
    assert says in message and message.startswith("bsdemo class") and "Traceback" not in message
    assert torch == "NO-TORCH" and out.stdout == ""
