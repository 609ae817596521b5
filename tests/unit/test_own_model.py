"""The user's own model (bsdemo.api, `--model-file`): the same numbers as the lab's own path for
the lab's models, the user's model left as it was, and every broken piece named in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bsdemo import api
from bsdemo.config import RunConfig
from bsdemo.engine.finder import find_batch_size as engine_find
from bsdemo.engine.fitbatch import fit_batch as engine_fit
from bsdemo.engine.sweep import sweep as engine_sweep
from bsdemo.errors import ConfigError
from bsdemo.jobkinds import assess
from bsdemo.limits import Limits
from bsdemo.recipes import simulated_device
from bsdemo.recipes.measurements import FINDER_DEVICE_MARGIN
from tests.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "own_model.py"
LAB_MODELS = [
    RunConfig(),
    RunConfig(model="cnn", width=16, depth=2),
    RunConfig(dataset="arithmetic", model="transformer", width=32, depth=2),
]


def _linear():
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    )


def _batch(n):
    g = torch.Generator().manual_seed(n)
    return torch.randn(n, 4, 4, generator=g), torch.randint(0, 4, (n,), generator=g)


def _probes(records):
    return [
        (r["batch_size"], r["status"], r["peak_memory_bytes"]) for r in records if r["kind"] == "find_probe"
    ]


@pytest.mark.parametrize("cfg", LAB_MODELS, ids=lambda c: c.model)
def test_the_finder_on_the_labs_model_gives_the_pages_numbers_through_either_door(cfg):
    """The lab's MLP, CNN and Transformer as a Workload: the same probes, the same accounted
    peaks to the byte, the same largest batch and the same split of a target effective batch as
    the page's job (the engine from a config). Memory only: the knee a finder recommends without
    a target is timed, and timings are not compared across runs."""
    budget, _ = simulated_device(cfg, FINDER_DEVICE_MARGIN)
    page = list(engine_find(cfg, memory_budget_bytes=budget, max_batch=1024, target_effective_batch=1000))
    own = api.find_batch_size(
        api.lab_workload(cfg), memory_budget=budget, max_batch=1024, target_effective_batch=1000
    )
    assert _probes(page) == _probes(own.records) and len(own.probes) <= 5
    assert page[-1]["max_batch_size"] == own.result["max_batch_size"]
    assert (page[-1]["batch_size"], page[-1]["accumulation_steps"]) == (
        own.batch_size,
        own.accumulation_steps,
    )
    assert own.batch_size * own.accumulation_steps == 1000


def test_sweep_and_fit_batch_memory_match_the_labs_path():
    """The sweep's accounted peak per batch and its memory fit, and fit-batch's largest batch per
    technique, are the page's for the lab's own model."""
    cfg = LAB_MODELS[0]
    sizes = [8, 32, 128]
    page = [r for r in engine_sweep(cfg, sizes, rounds=1, timed_steps=2, min_timed_s=0.0)]
    own = api.sweep(api.lab_workload(cfg), sizes, rounds=1, timed_steps=2, min_timed_s=0.0)
    peaks = {r["batch_size"]: r["peak_memory_bytes"] for r in page if r["kind"] == "sweep_point"}
    assert peaks == {p["batch_size"]: p["peak_memory_bytes"] for p in own.points}
    assert page[-1]["fit"]["m_bytes_per_sample"] == pytest.approx(
        own.end["fit"]["m_bytes_per_sample"], rel=1e-9
    )
    assert list(own.to_frame()["batch_size"]) == sizes
    assert own.figure().data and own.step_time_figure().data and own.memory_figure().data
    budget = 4 * 2**20
    page_fit = [
        r
        for r in engine_fit(cfg, budget, techniques=["fp32", "bf16"], budget_steps=2)
        if r["kind"] == "fit_batch_result"
    ]
    own_fit = api.fit_batch(
        api.lab_workload(cfg), budget, techniques=["fp32", "bf16"], pool=cfg.train_samples
    )
    assert [r["max_batch_size"] for r in page_fit] == [r["max_batch_size"] for r in own_fit.techniques]


def test_the_users_model_and_random_state_are_left_as_they_were():
    model = _linear()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    work = api.Workload(model, batch=_batch, optimizer=lambda p: torch.optim.Adam(p, lr=1e-3), name="mine")
    found = api.find_batch_size(work, memory_budget="1MiB", max_batch=512, reference_batch=32)
    assert found.batch_size and found.batch_size <= found.result["max_batch_size"] <= 512
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())  # never trained, not even a probe
    assert torch.equal(torch.rand(3), expected)  # the caller's random stream goes on as before
    torch.manual_seed(99)
    expected = torch.rand(3)
    torch.manual_seed(99)  # a factory and a batch function that draw from the global stream
    api.sweep(
        api.Workload(_linear, batch=lambda n: (torch.randn(n, 4, 4), torch.randint(0, 4, (n,)))),
        [8],
        rounds=1,
        timed_steps=2,
        min_timed_s=0.0,
    )
    assert torch.equal(torch.rand(3), expected)
    assert found.records[0]["kind"] == "find_probe" and "Use batch" in found.summary
    # the optimizer's own learning rate, not the lab's default, is what the lr rules scale
    assert found.result["lr_linear"] == pytest.approx(1e-3 * found.batch_size / 32)


def test_noise_scale_on_an_own_model_is_finite_with_its_range():
    work = api.Workload(_linear, batch=_batch)
    r = api.noise_scale(work, [1, 4, 16, 64], draws=8, pool=256)
    low, high = r.b_simple_range
    assert 0 < low <= r.b_simple <= high
    assert -1.4 < r.result["variance_slope"] < -0.6  # the 1/B law on random data too
    assert len(r.to_frame()) == 4 and r.figure().data


def test_a_model_that_fails_at_one_batch_is_a_failed_point_naming_its_line():
    class Picky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(16, 4)

        def forward(self, x):
            if len(x) > 40:
                raise RuntimeError("picky: this reshape needs at most 40")
            return self.layer(x.flatten(1))

    r = api.sweep(api.Workload(Picky, batch=_batch), [8, 64], rounds=1, timed_steps=2, min_timed_s=0.0)
    ok, failed = r.points
    assert ok["status"] == "ok" and failed["status"] == "failed"
    assert "picky: this reshape needs at most 40" in failed["message"]
    assert "test_own_model.py" in failed["message"] and "forward" in failed["message"]


BROKEN = {  # what is wrong -> (the workload, the field the message names, words it says)
    "factory raises": (lambda: api.Workload(lambda: 1 / 0, batch=_batch), "model", "ZeroDivisionError"),
    "not a module": (lambda: api.Workload(lambda: "a model", batch=_batch), "model", "torch.nn.Module"),
    "ignores the size": (
        lambda: api.Workload(_linear, batch=lambda n: _batch(8)),
        "batch",
        "exactly the number of samples",
    ),
    "not a pair": (
        lambda: api.Workload(_linear, batch=lambda n: torch.zeros(n, 16)),
        "batch",
        "(inputs, targets)",
    ),
    "forward fails": (
        lambda: api.Workload(lambda: torch.nn.Linear(3, 2), batch=_batch),
        "model",
        "forward pass",
    ),
    "NaN loss": (
        lambda: api.Workload(_linear, batch=_batch, loss=lambda o, y: o.sum() * float("nan")),
        "loss",
        "finite",
    ),
    "loss not scalar": (lambda: api.Workload(_linear, batch=_batch, loss=lambda o, y: o), "loss", "scalar"),
    "optimizer wrong": (
        lambda: api.Workload(_linear, batch=_batch, optimizer=lambda p: 3),
        "optimizer",
        "torch.optim.Optimizer",
    ),
    "both batch and data": (
        lambda: api.Workload(_linear, batch=_batch, data=_batch(8)),
        "batch",
        "exactly one",
    ),
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_broken_piece_is_named_before_any_long_work_and_the_process_goes_on(name):
    make, field, words = BROKEN[name]
    with pytest.raises(ConfigError) as caught:
        api.sweep(make(), [8, 4096])
    assert caught.value.field == field and words in caught.value.allowed, str(caught.value)
    assert len(str(caught.value)) < 400 and "\n" not in str(caught.value)
    # the process is left usable: a good workload runs right after
    good = api.sweep(api.Workload(_linear, batch=_batch), [8], rounds=1, timed_steps=2, min_timed_s=0.0)
    assert good.points[0]["status"] == "ok"


def test_a_lab_server_never_takes_user_code():
    for key in ("model_file", "workload", "model_factory"):
        with pytest.raises(ConfigError, match="never loads user code") as caught:
            assess("sweep", RunConfig(), {key: "evil.py:f", "batch_sizes": [8]}, Limits(), 1.0)
        assert caught.value.field == key


def test_the_api_imports_neither_torch_nor_streamlit():
    code = "import sys, bsdemo.api; print(json.dumps(['torch' in sys.modules, 'streamlit' in sys.modules]))"
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        cwd=ROOT,
    )
    assert json.loads(out.stdout) == [False, False], out.stderr


def _cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "bsdemo", *args],
        capture_output=True,
        text=True,
        timeout=scaled(timeout),
        cwd=ROOT,
    )


def test_the_cli_finds_a_batch_for_the_example_resnet_as_the_api_does():
    out = _cli(
        "find", "--model-file", f"{EXAMPLE}:resnet", "--memory-budget", "48MiB", "--max-batch", "64", "--json"
    )
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        from own_model import resnet
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    same = api.find_batch_size(resnet(), memory_budget="48MiB", max_batch=64)
    assert _probes(records) == _probes(same.records)  # the same probes, the same bytes
    assert records[-1]["max_batch_size"] == same.result["max_batch_size"]


@pytest.mark.parametrize(
    "factory,words",
    [
        ("raises", "ValueError: no budget here"),
        ("ignores_size", "exactly the number of samples"),
        ("nan_loss", "finite"),
        ("wrong_type", "a bsdemo.api.Workload"),
        ("missing", "no function missing"),
    ],
)
def test_a_broken_model_file_exits_2_in_one_line(tmp_path, factory, words):
    (tmp_path / "mine.py").write_text(
        "from __future__ import annotations\nimport dataclasses\n"
        "import torch\nfrom bsdemo.api import Workload\n"
        "@dataclasses.dataclass\nclass Settings:\n    width: int = 4\n"  # needs sys.modules
        "def batch(n):\n    return torch.randn(n, 4), torch.randint(0, 2, (n,))\n"
        "def raises():\n    raise ValueError('no budget here')\n"
        "def wrong_type():\n    return 42\n"
        "def ignores_size():\n    return Workload(lambda: torch.nn.Linear(4, 2), "
        "batch=lambda n: batch(8))\n"
        "def nan_loss():\n    return Workload(lambda: torch.nn.Linear(4, 2), batch=batch, "
        "loss=lambda o, y: o.sum() * float('nan'))\n"
    )
    out = _cli("sweep", "--model-file", f"{tmp_path / 'mine.py'}:{factory}", timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "--model-file" in out.stderr and words in out.stderr, out.stderr


def test_lab_flags_beside_a_model_file_are_refused_before_torch():
    from bsdemo.cli.ownmodel import check_flag
    from bsdemo.cli.parser import build_parser

    args = build_parser().parse_args(["sweep", "--model-file", f"{EXAMPLE}:gpt", "--model", "cnn"])
    with pytest.raises(ConfigError) as caught:
        check_flag(args)
    assert caught.value.field == "model" and "--model-file" in caught.value.allowed
    out = _cli("find", "--model-file", f"{EXAMPLE}:gpt", "--device", "cpu")  # no budget on a CPU
    assert out.returncode == 2 and "--memory-budget" in out.stderr


NOTEBOOK = ROOT / "examples" / "own_model.ipynb"


def test_the_example_notebook_is_stored_without_outputs_and_runs_top_to_bottom():
    """examples/own_model.ipynb, executed in a real Jupyter kernel: the ResNet's and the GPT's
    finder and sweep run, and it says what it found; the stored copy carries no outputs."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    NotebookClient(
        nb, timeout=scaled(600), kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    # the closing texts, shown as Markdown under their cells
    shown = "".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    assert shown.count("Use batch") == 2 and "accumulation steps" in text
    assert shown.count("Samples/s") >= 2
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) == 3


def test_profile_on_an_own_model_splits_its_step_and_cuts_its_overhead(tmp_path):
    """The Throughput page's "Inside one step" on the user's model: both batches profiled, a
    larger fixed share at the small batch, the overhead cut run with the user's optimizer, the
    trace written where asked (and not carried in the result)."""
    r = api.profile(
        api.Workload(_linear, batch=_batch, optimizer=lambda p: torch.optim.AdamW(p, lr=1e-3)),
        # batches far apart: on so small a model the larger one's extra time must
        # stand clear of a loaded machine's noise (8 against 256 did not, once)
        [8, 8192],
        steps=4,
        trace_dir=str(tmp_path),
    )
    assert [p["status"] for p in r.points] == ["ok", "ok"]
    frame = r.to_frame()
    assert frame["fixed_share"][0] > frame["fixed_share"][1]
    assert all(c["status"] in ("ok", "unavailable") for c in r.cuts) and len(r.cuts) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace_batch8.json", "trace_batch8192.json"]
    assert not any("trace_gz_b64" in rec for rec in r.records)
    assert r.figure().data and r.split_figure().data and r.summary


def test_a_model_whose_loss_turns_nan_at_a_batch_is_said_to_diverge_not_to_not_fit():
    """A user's model whose loss is NaN from batch 64 up (finite on the small batches the check
    and the first probes use): the finder ends at the first probe that diverged and says so —
    no batch recommended, not "does not fit", nor 63 found by bisecting towards the NaN."""

    def loss(outputs, targets):
        bad = float("nan") if outputs.shape[0] >= 64 else 0.0
        return torch.nn.functional.cross_entropy(outputs, targets) + bad

    found = api.find_batch_size(
        api.Workload(_linear, batch=_batch, loss=loss, optimizer=lambda p: torch.optim.SGD(p, lr=0.1)),
        memory_budget="256MiB",
        max_batch=1024,
    )
    r = found.result
    assert r["outcome"] == "diverged" and r["batch_size"] is None and r["failed_at_batch"] >= 64
    assert [p["status"] for p in found.probes][-1] == "diverged"
    assert all(p["status"] == "ok" for p in found.probes if p["batch_size"] < 64)
    assert f"At batch {r['failed_at_batch']} the run diverged at step" in found.summary
    assert "does not fit" not in found.summary and "No batch size fits" not in found.summary


class _Allocator(torch.nn.Module):
    """A model whose forward fails as the CPU allocator does past `limit` samples."""

    def __init__(self, limit: int):
        super().__init__()
        self.net, self.limit = _linear(), limit

    def forward(self, x):
        if x.shape[0] > self.limit:
            raise RuntimeError(
                "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
                "can't allocate memory: you tried to allocate 68719476736 bytes"
            )
        return self.net(x)


def test_fit_batch_reports_the_devices_own_out_of_memory_as_sweep_and_find_do():
    """bsdemo.api.fit_batch raised the allocator's RuntimeError; now a step the device cannot
    hold is out of memory: the search goes on below it, the result names the batch, the text
    says the device ran out before the budget — and with nothing left, says only that."""
    workload = api.Workload(
        lambda: _Allocator(200), batch=_batch, optimizer=lambda p: torch.optim.SGD(p, lr=0.1)
    )
    found = api.fit_batch(workload, "1GiB", techniques=["fp32"], max_batch=4096)
    row = found.techniques[0]
    assert 1 <= row["max_batch_size"] <= 200 and row["device_oom_batch"] > 200
    assert "ran out of memory before the budget: fp32 at batch" in found.summary
    tiny = api.Workload(lambda: _Allocator(40), batch=_batch, optimizer=lambda p: torch.optim.SGD(p, lr=0.1))
    none = api.fit_batch(tiny, "1GiB", techniques=["fp32"], max_batch=4096)
    assert none.techniques[0]["max_batch_size"] == 0 and none.techniques[0]["device_oom_batch"] == 64
    assert none.summary.startswith("Out of memory: the device ran out at batch 64, an fp32 memory probe")


HANG = """
import os, torch
from bsdemo.api import Workload

def batch(n):
    return torch.randn(n, 4), torch.randint(0, 2, (n,))

def loss(outputs, targets):
    if outputs.shape[0] >= 64:  # the user's bug: an endless loop at the larger batch
        open(os.environ["BSDEMO_TEST_MARK"], "w").close()
        while True:
            pass
    return torch.nn.functional.cross_entropy(outputs, targets)

def hang():
    return Workload(lambda: torch.nn.Linear(4, 2), batch=batch, loss=loss)
"""


def test_a_hung_step_of_the_users_model_is_stopped_by_its_time_limit(tmp_path, monkeypatch):
    """The API: a step past probe_timeout_s is a TimeoutError naming the batch, the watchdog
    gone after (the caller's SIGALRM handler back, no alarm left). The CLI: --probe-timeout,
    its last line why, exit code 1, no traceback."""
    import signal

    (tmp_path / "mine.py").write_text(HANG)
    monkeypatch.setenv("BSDEMO_TEST_MARK", str(tmp_path / "mark"))
    import importlib.util

    spec = importlib.util.spec_from_file_location("bsdemo_test_hang", tmp_path / "mine.py")
    mine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mine)
    before = signal.getsignal(signal.SIGALRM)
    work = mine.hang()
    work.probe_timeout_s = 2.0
    with pytest.raises(TimeoutError, match="at batch 64 took longer than 2 s"):
        api.sweep(work, [8, 64], rounds=1, timed_steps=2)
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    out = _cli(
        "sweep",
        "--model-file",
        f"{tmp_path / 'mine.py'}:hang",
        "--batch-sizes",
        "8,64",
        "--probe-timeout",
        "2",
        timeout=180,
    )
    # the progress lines, then one line that says why it stopped
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == 1 and last.startswith("bsdemo sweep: a step of your model"), out.stderr
    assert "at batch 64 took longer than 2 s" in last and "Traceback" not in out.stderr


def test_ctrl_c_ends_a_command_with_one_line_and_code_130(tmp_path):
    """Ctrl-C while the user's own code loops (no time limit reached): exit code 130, its last
    line says so, no traceback."""
    import os
    import signal
    import time

    (tmp_path / "mine.py").write_text(HANG)
    mark = tmp_path / "mark"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bsdemo",
            "sweep",
            "--model-file",
            f"{tmp_path / 'mine.py'}:hang",
            "--batch-sizes",
            "8,64",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BSDEMO_TEST_MARK": str(mark)},
    )
    try:
        deadline = time.monotonic() + scaled(180)
        while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mark.exists(), proc.communicate(timeout=5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=scaled(60))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]  # after the progress lines
    assert last == "bsdemo sweep: stopped (Ctrl-C); nothing more was measured", err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
