"""Lesson 7's sharpness study: power iteration and Hessian-vector products on problems with known
answers, the study's runs and records, the job kind's checks, and `bsdemo sharpness --json`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bsdemo.config import ConfigError, RunConfig
from bsdemo.jobkinds import assess, remedy_lr
from bsdemo.limits import Limits
from tests.timeouts import scaled, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_power_iteration_finds_the_top_eigenvalue_of_a_known_quadratic():
    """L(w) = ½ wᵀAw with A = Q diag(λ) Qᵀ: its Hessian is A, whose top eigenvalue is known."""
    from bsdemo.engine.sharpness import top_eigenvalue

    g = torch.Generator().manual_seed(0)
    q, _ = torch.linalg.qr(torch.randn(12, 12, generator=g, dtype=torch.float64))
    spectrum = torch.tensor([9.0, 4.0, 3.5, 2.0] + [0.5] * 8, dtype=torch.float64)
    a = q @ torch.diag(spectrum) @ q.T
    w = torch.zeros(12, dtype=torch.float64, requires_grad=True)

    def hvp(v):  # through autograd, as the engine takes them: grad of (∇L · v)
        grad = torch.autograd.grad(0.5 * w @ a @ w, w, create_graph=True)[0]
        return list(torch.autograd.grad(grad @ v[0], w))

    value, vector = top_eigenvalue(hvp, [w], iters=60, generator=g)
    assert value == pytest.approx(9.0, rel=1e-6)
    assert abs(float(vector[0] @ q[:, 0])) == pytest.approx(1.0, abs=1e-4)


def test_hessian_product_of_a_small_network_matches_the_full_hessian():
    """H v from the engine (double backward through one gradient graph, reused) against
    torch.autograd.functional.hessian of the same loss, and the power iteration against the
    exact top eigenvalue."""
    from bsdemo.engine import sharpness

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    model = model.double()
    x, y = torch.randn(50, 3, dtype=torch.float64), torch.randint(0, 3, (50,))
    params = list(model.parameters())
    shapes = [p.shape for p in params]
    sizes = [p.numel() for p in params]

    def loss_of(flat):
        chunks = flat.split(sizes)
        w1, b1, w2, b2 = (c.view(s) for c, s in zip(chunks, shapes, strict=True))
        logits = torch.tanh(x @ w1.T + b1) @ w2.T + b2
        return torch.nn.functional.cross_entropy(logits, y)

    flat = torch.cat([p.detach().flatten() for p in params])
    exact = torch.autograd.functional.hessian(loss_of, flat)
    v = torch.randn(flat.numel(), dtype=torch.float64)
    product = sharpness.hessian_product(model, x, y)
    for _ in range(2):  # the graph is kept for the next product
        pieces = [c.view(s) for c, s in zip(v.split(sizes), shapes, strict=True)]
        got = torch.cat([h.flatten() for h in product(pieces)])
        assert torch.allclose(got, exact @ v, rtol=1e-8, atol=1e-10)
        v = torch.randn(flat.numel(), dtype=torch.float64)
    top, _ = sharpness.top_eigenvalue(product, params, iters=300, generator=torch.Generator().manual_seed(1))
    eigenvalues = torch.linalg.eigvalsh(exact)
    largest = eigenvalues[eigenvalues.abs().argmax()]
    assert top == pytest.approx(float(largest), rel=1e-4)


def test_the_hessian_is_taken_over_the_whole_set_or_a_fixed_draw_of_it():
    from bsdemo.engine.sharpness import hessian_set

    x, y = torch.arange(100.0).view(50, 2), torch.arange(50)
    assert hessian_set(x, y, seed=0, samples=50)[1] is y
    a, b = hessian_set(x, y, seed=3, samples=20), hessian_set(x, y, seed=3, samples=20)
    assert len(a[1]) == 20 and len(set(a[1].tolist())) == 20 and torch.equal(a[1], b[1])
    assert torch.equal(a[0][:, 0], 2.0 * a[1])  # inputs stay with their labels


def test_neighbourhood_rise_is_zero_at_radius_zero_and_restores_the_weights():
    from bsdemo.engine.sharpness import neighbourhood_rise

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
    before = [p.detach().clone() for p in model.parameters()]
    g = torch.Generator().manual_seed(0)
    assert neighbourhood_rise(model, x, y, g, radius=0.0) == pytest.approx(0.0, abs=1e-7)
    rise = neighbourhood_rise(model, x, y, g, radius=0.5)
    assert rise != 0.0 and math.isfinite(rise)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_rescaling_a_relu_layer_leaves_the_filter_normalised_rise_unchanged():
    """Dinh et al. 2017: multiply one ReLU layer by c and the next by 1/c and the function is the
    same, while the raw Hessian changes; directions scaled to each row's norm see the same
    neighbourhood either way."""
    from bsdemo.engine.sharpness import neighbourhood_rise

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
    plain = neighbourhood_rise(model, x, y, torch.Generator().manual_seed(3), radius=0.2)
    with torch.no_grad():
        model[0].weight.mul_(10.0)
        model[0].bias.mul_(10.0)
        model[2].weight.div_(10.0)
    scaled_rise = neighbourhood_rise(model, x, y, torch.Generator().manual_seed(3), radius=0.2)
    assert scaled_rise == pytest.approx(plain, rel=1e-3)


def test_remedy_lr_scales_by_the_square_root_of_the_batch_ratio_up_to_a_cap():
    assert remedy_lr(0.1, 16, 1024, None) == 0.1
    assert remedy_lr(0.1, 16, 1024, "longer") == 0.1
    assert remedy_lr(0.05, 16, 1024, "scale_lr") == pytest.approx(0.4)
    assert remedy_lr(0.05, 16, 1024, "warmup") == pytest.approx(0.4)
    assert remedy_lr(0.3, 16, 1438, "scale_lr") == 0.8  # not √90 × 0.3 = 2.8: that diverges
    assert remedy_lr(1.0, 16, 1438, "scale_lr") == 1.0  # a remedy never lowers the lr


@pytest.mark.parametrize(
    "options, field",
    [
        ({"batch_sizes": [16]}, "batch_sizes"),
        ({"batch_sizes": [64, 16]}, "batch_sizes"),
        ({"batch_sizes": [16, 64, 256]}, "batch_sizes"),
        ({"remedies": ["magic"]}, "remedies"),
        ({"remedies": ["noise", "noise"]}, "remedies"),
        ({"target_loss": 0}, "target_loss"),
        ({"max_steps": 10**9}, "max_steps"),
    ],
)
def test_sharpness_options_are_checked(options, field):
    with pytest.raises(ConfigError) as err:
        assess("sharpness", RunConfig().validated()[0], options, Limits(), 60.0)
    assert err.value.field == field


def test_sharpness_needs_plain_sgd_on_a_classifier():
    with pytest.raises(ConfigError) as err:
        assess("sharpness", RunConfig(optimizer="adam").validated()[0], {}, Limits(), 60.0)
    assert err.value.field == "optimizer"
    cfg = RunConfig(dataset="arithmetic", model="transformer", norm="none").validated()[0]
    with pytest.raises(ConfigError) as err:
        assess("sharpness", cfg, {}, Limits(), 60.0)
    assert err.value.field == "model"


def test_sharpness_cost_bounds_every_run_and_the_longer_remedy():
    cfg = RunConfig().validated()[0]
    _, plain = assess("sharpness", cfg, {"max_steps": 100}, Limits(), 60.0)
    _, more = assess("sharpness", cfg, {"max_steps": 100, "remedies": ["longer", "noise"]}, Limits(), 60.0)
    assert plain.steps >= 2 * 100 and more.steps >= (2 + 2 + 3) * 100
    assert plain.effective_batch == cfg.train_samples  # the large batch is the whole set


def test_bsdemo_sharpness_json_ends_with_the_result_and_its_runs():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsdemo",
            "sharpness",
            "--batch-sizes",
            "32,4096",
            "--target-loss",
            "0.1",
            "--width",
            "64",
            "--depth",
            "1",
            "--remedies",
            "longer",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(240),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    progress = [e for e in lines if e["kind"] == "sharpness_progress"]  # only if a run takes 1 s
    lines = [e for e in lines if e["kind"] != "sharpness_progress"]
    assert [e["kind"] for e in lines] == ["sharpness_run"] * 3 + ["sharpness_result"]
    finished = {r["label"]: r["steps"] for r in lines[:3]}
    assert all(p["steps"] <= finished[p["label"]] for p in progress)
    end = lines[-1]
    assert [r["label"] for r in end["runs"]] == ["small", "large", "large + longer"]
    for run in end["runs"]:
        assert {
            "batch_size",
            "train_loss",
            "test_loss",
            "train_accuracy",
            "test_accuracy",
            "top_hessian_eigenvalue",
        } <= set(run)
        assert run["status"] == "completed" and run["top_hessian_eigenvalue"] > 0
    small, large, longer = end["runs"]
    assert small["batch_size"] == 32 and large["batch_size"] == end["train_samples"]
    assert small["train_loss"] <= 0.1 and large["train_loss"] <= 0.1  # both reached the target
    assert small["lr"] == large["lr"] == 0.3  # the study's default lr, not train's
    assert (
        longer["steps"] == 4 * longer["reached_at"] and longer["reached_at"] == large["reached_at"]
    )  # the same run, trained on past the target
    assert len(end["slice"]["t"]) == len(end["slice"]["train_loss"]) == 41


def test_the_study_runs_as_a_job_and_stops_when_asked(scheduler):
    job = scheduler.submit(
        RunConfig(width=32, depth=1).validated()[0],
        owner="kim",
        kind="sharpness",
        options={"target_loss": 0.3, "batch_sizes": [64, 512]},
    )
    snap = scheduler.wait(job, timeout=scaled(120))
    assert snap.status == "completed", snap.end
    assert snap.result["kind"] == "sharpness_result"
    assert [p["label"] for p in snap.points if p["kind"] == "sharpness_run"] == ["small", "large"]
    long = scheduler.submit(
        RunConfig(lr=0.001).validated()[0],
        owner="kim",
        kind="sharpness",
        options={"target_loss": 0.0001, "max_steps": 20_000},
    )
    wait_for(lambda: scheduler.snapshot(long).status == "running", timeout=60)
    assert scheduler.cancel(long, "kim")
    snap = scheduler.wait(long, timeout=scaled(60))
    # stopped inside the first run: no run finished (its progress may have shown)
    assert snap.status == "cancelled"
    assert not [p for p in snap.points if p["kind"] == "sharpness_run"]


def test_a_run_in_training_streams_its_loss_curve_before_its_record(monkeypatch):
    """sharpness_progress records come while a run trains (here at every loss check): each
    names its run, its curve only grows, and the run's own record follows them with at least
    as many steps — the page draws the curves before the first run ends."""
    from bsdemo.engine import sharpness as study

    monkeypatch.setattr(study, "PROGRESS_S", 0.0)
    records = list(
        study.sharpness_study(RunConfig(width=32, depth=1), batch_sizes=(64, 512), target_loss=0.3)
    )
    kinds = [r["kind"] for r in records]
    assert kinds[-1] == "sharpness_result" and kinds[0] == "sharpness_progress"
    for label in ("small", "large"):
        shown = [r for r in records if r["kind"] == "sharpness_progress" and r["label"] == label]
        done = next(i for i, r in enumerate(records) if r["kind"] == "sharpness_run" and r["label"] == label)
        assert shown and all(records.index(r) < done for r in shown)
        steps = [r["steps"] for r in shown]
        assert steps == sorted(steps) and steps[-1] <= records[done]["steps"]
        assert all(r["curve"][-1] == [r["steps"], r["train_loss"]] for r in shown)
        assert shown[0]["curve"][0][0] == 0  # from the start: the loss before any step
    # a job keeps each run's latest curve only (and its finished record)
    from bsdemo.runs import add_point

    kept: list[dict] = []
    for r in records[:-1]:
        add_point(kept, r, 256)
    assert [(r["kind"], r["label"]) for r in kept] == [
        ("sharpness_progress", "small"),
        ("sharpness_run", "small"),
        ("sharpness_progress", "large"),
        ("sharpness_run", "large"),
    ]
    assert kept[0] is [r for r in records if r["kind"] == "sharpness_progress" and r["label"] == "small"][-1]


def _run(batch, remedy=None, **kw):
    base = {
        "kind": "sharpness_run",
        "label": "x",
        "remedy": remedy,
        "batch_size": batch,
        "lr": 0.3,
        "warmup_steps": 0,
        "last_lr": 0.3,
        "steps": 300,
        "reached_at": 300,
        "status": "completed",
        "train_loss": 0.01,
        "test_loss": 0.06,
        "train_accuracy": 1.0,
        "test_accuracy": 0.98,
        "loss_gap": 0.05,
        "accuracy_gap": 0.02,
        "top_hessian_eigenvalue": 1.0,
        "two_over_lr": 2 / 0.3,
        "neighbourhood_rise": 1e-4,
        "trace": [[1, 0.5], [300, 1.0]],
        "curve": [[0, 2.3], [300, 0.01]],
    }
    return base | kw


def _result(*runs):
    return {
        "kind": "sharpness_result",
        "runs": list(runs),
        "lr": 0.3,
        "target_loss": 0.01,
        "train_samples": 1438,
        "radius": 0.1,
        "trace_samples": 512,
        "hessian_samples": 1438,
        "slice": {
            "t": [-0.5, 0.0, 0.5, 1.0, 1.5],
            "train_loss": [0.02, 0.01, 0.013, 0.01, 0.3],
            "test_loss": [0.07, 0.06, 0.06, 0.07, 0.4],
        },
    }


def test_the_verdict_names_the_sharper_minimum_and_the_gap_from_the_numbers():
    from bsdemo import recipes

    r = _result(
        _run(16, top_hessian_eigenvalue=0.5, test_loss=0.05, loss_gap=0.04),
        _run(1438, top_hessian_eigenvalue=4.0, test_loss=0.07, loss_gap=0.06, trace=[[1, 1.0], [250, 4.4]]),
    )
    text = recipes.sharpness_verdict(r)
    assert text.startswith(
        "The full batch (1,438) found the sharper minimum: top Hessian "
        "eigenvalue 4.00 against 0.500 (8.0×).\n\n"
    )
    assert (
        "Over the second half of training the full batch (1,438)'s sharpness, traced on 512 "
        "samples, was 4.40 (median), 66% of 2/lr = 6.67, and batch 16's 1.00."
    ) in text
    assert "stopped short of that edge" in text and "rose to that edge" not in text
    # both rises are 1e-4: the neighbourhood measure is named as not agreeing, not cited
    assert "The random-neighbourhood measure does not agree" in text
    assert "In this run batch 16 generalised better: test loss 0.0500 against 0.0700" in text
    assert "rises by 0.00300 between them (a barrier)" in text and "past the full batch" in text
    assert recipes.sharpness_prediction(r) == (
        1,
        "top Hessian eigenvalue 0.500 at batch 16 against 4.00 at batch 1,438",
    )


def test_the_verdict_cites_only_the_measures_that_agree_with_it():
    """The neighbourhood rise supports "sharper" only when it points the same way; "generalised
    better" only when test loss and accuracy agree; the edge of stability only when the trace
    reached 2/lr."""
    from bsdemo import recipes

    agree = _result(
        _run(16, top_hessian_eigenvalue=0.5, neighbourhood_rise=3e-4),
        _run(
            1438,
            top_hessian_eigenvalue=4.0,
            neighbourhood_rise=1.2e-3,
            trace=[[1, 1.0], [200, 6.5], [250, 6.4]],
        ),
    )
    text = recipes.sharpness_verdict(agree)
    assert (
        "The random-neighbourhood measure agrees (a random step of 10% of each weight row's "
        "norm raises the full batch (1,438)'s training loss by 0.0012 against 3.0 × 10⁻⁴)"
    ) in text
    assert "does not agree" not in text
    assert "rose to that edge" in text and "stopped short" not in text
    against = _result(
        _run(16, top_hessian_eigenvalue=0.5, neighbourhood_rise=1e-3),
        _run(1438, top_hessian_eigenvalue=4.0, neighbourhood_rise=1e-4),
    )
    text = recipes.sharpness_verdict(against)
    assert (
        "does not agree: a random step of 10% of each weight row's norm raises the full "
        "batch (1,438)'s training loss by 1.0 × 10⁻⁴ and batch 16's by 0.0010"
    ) in text
    split = _result(
        _run(16, test_loss=0.05, test_accuracy=0.97),
        _run(1438, top_hessian_eigenvalue=4.0, test_loss=0.07, test_accuracy=0.98),
    )
    text = recipes.sharpness_verdict(split)
    assert "In this run" not in text
    assert (
        "Test loss and test accuracy disagree on which generalised better: test loss 0.0500 against 0.0700"
    ) in text
    assert "the loss favours batch 16, the accuracy the full batch (1,438)" in text


def test_the_verdict_says_when_the_usual_finding_did_not_appear_or_a_run_missed_the_target():
    from bsdemo import recipes

    flipped = _result(_run(16, top_hessian_eigenvalue=3.0), _run(1438, top_hessian_eigenvalue=1.0))
    assert "the opposite of the usual finding" in recipes.sharpness_verdict(flipped)
    assert recipes.sharpness_prediction(flipped)[0] == 0
    alike = _result(_run(16, top_hessian_eigenvalue=1.0), _run(1438, top_hessian_eigenvalue=1.1))
    assert "about as sharp" in recipes.sharpness_verdict(alike)
    assert "generalised about equally" in recipes.sharpness_verdict(alike)
    assert recipes.sharpness_prediction(alike)[0] == 2
    capped = _result(_run(16), _run(1438, reached_at=None, status="capped", steps=3000, train_loss=0.02))
    text = recipes.sharpness_verdict(capped)
    assert "did not reach the training loss 0.01 (it stopped at 3,000 steps with loss 0.0200)" in text
    assert text.startswith(
        "The full batch (1,438) did not reach the training loss 0.01, so the two minima are not compared.\n\n"
    )
    diverged = _result(
        _run(16), _run(1438, reached_at=None, status="diverged", top_hessian_eigenvalue=float("nan"))
    )
    text = recipes.sharpness_verdict(diverged)
    assert "it diverged at lr 0.3" in text and "sharper" not in text
    assert recipes.sharpness_prediction(diverged) is None


def test_each_remedy_is_reported_against_the_plain_large_batch():
    from bsdemo import recipes

    r = _result(
        _run(16),
        _run(1438, test_loss=0.07, loss_gap=0.06),
        _run(
            1438,
            "scale_lr",
            status="diverged",
            reached_at=None,
            lr=2.8,
            two_over_lr=2 / 2.8,
            top_hessian_eigenvalue=float("nan"),
        ),
        _run(1438, "noise", test_loss=0.062, loss_gap=0.052, top_hessian_eigenvalue=0.6),
    )
    text = recipes.sharpness_verdict(r)
    assert "(without one: test loss 0.0700, test minus train 0.0600, top eigenvalue 1.00):\n" in text
    assert "\n- **The lr scaled by √k** (lr 2.8): diverged" in text
    assert (
        "\n- **Added small-batch noise** (lr 0.3, 300 steps): test loss 0.0620, test minus "
        "train 0.0520, top eigenvalue 0.600."
    ) in text


def test_every_run_of_a_study_has_its_own_colour_and_the_charts_their_alt_text():
    from bsdemo import charts

    r = _result(
        _run(16), _run(1438), *(_run(1438, remedy) for remedy in ("scale_lr", "warmup", "longer", "noise"))
    )
    curves, trace, cut = charts.sharpness_charts(r)
    colours = [t.line.color for t in curves.figure.data]
    assert len(colours) == 6 and len(set(colours)) == 6
    assert [t.name for t in curves.figure.data][:2] == ["batch 16", "full batch (1,438)"]
    assert all(c.alt for c in (curves, trace, cut)) and len(cut.table) == 5
    stars = [t for t in trace.figure.data if t.marker.symbol == "star"]
    assert len(stars) == 6 and stars[0].y[0] == 1.0  # each run's eigenvalue at its solution
