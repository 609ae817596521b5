"""The training engine on small CPU tensors with fixed seeds."""

from __future__ import annotations

import math

import pytest
import torch

from bsdemo.config import DATASETS, NORMS, REAL_SPLITS, ConfigError, RunConfig
from bsdemo.engine.data import epoch_batches, load_dataset
from bsdemo.engine.models import build_model
from bsdemo.engine.train import lr_at, prepare, train
from tests.timeouts import scaled

CPU = torch.device("cpu")


def run(cfg: RunConfig, **kw):
    return list(train(cfg, **kw))


def steps_of(events):
    return [e for e in events if e.kind == "step"]


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_accumulation_equals_one_big_batch(optimizer):
    """k micro-batches of b and one batch of k*b: the same parameters after several steps."""
    common = dict(
        dataset="digits",
        model="mlp",
        width=64,
        depth=2,
        optimizer=optimizer,
        lr=0.05 if optimizer != "adam" else 1e-3,
        epochs=None,
        max_steps=6,
        seed=3,
    )
    big, small = (
        prepare(RunConfig(batch_size=64, **common)),
        prepare(RunConfig(batch_size=16, accumulation_steps=4, **common)),
    )
    big_events, small_events = run(big.cfg, prepared=big), run(small.cfg, prepared=small)
    assert big_events[-1].status == small_events[-1].status == "completed"
    for p, q in zip(big.model.parameters(), small.model.parameters(), strict=True):
        assert (p - q).abs().max().item() < 1e-6
    # and the loss reported per step is the mean over the same effective batch
    for a, b in zip(steps_of(big_events), steps_of(small_events), strict=True):
        assert a.loss == pytest.approx(b.loss, abs=1e-6)
        assert a.samples_seen == b.samples_seen


def test_accumulation_with_batchnorm_differs():
    """The equivalence breaks with BatchNorm: its statistics are per micro-batch."""
    common = dict(dataset="digits", model="mlp", width=64, depth=2, norm="batch", epochs=None, max_steps=4)
    big, small = (
        prepare(RunConfig(batch_size=64, **common)),
        prepare(RunConfig(batch_size=4, accumulation_steps=16, **common)),
    )
    run(big.cfg, prepared=big), run(small.cfg, prepared=small)
    diff = max(
        (p - q).abs().max().item()
        for p, q in zip(big.model.parameters(), small.model.parameters(), strict=True)
    )
    assert diff > 1e-4


def test_same_seed_same_losses_and_other_seed_differs():
    cfg = RunConfig(epochs=1, seed=7)
    a, b = steps_of(run(cfg)), steps_of(run(cfg))
    assert [e.loss for e in a] == [e.loss for e in b]
    c = steps_of(run(RunConfig(epochs=1, seed=8)))
    assert [e.loss for e in a] != [e.loss for e in c]


def test_divergence_is_detected_with_its_step():
    events = run(RunConfig(lr=50.0, epochs=None, max_steps=200))
    end = events[-1]
    assert end.status == "diverged"
    last_step = steps_of(events)[-1].step if steps_of(events) else 0
    assert f"step {last_step + 1}" in end.message
    assert end.summary["steps"] == last_step + 1


def test_updates_per_epoch_is_ceil_of_n_over_effective_batch():
    cfg = RunConfig(batch_size=100, accumulation_steps=3, epochs=2)
    steps = steps_of(run(cfg))
    per_epoch = math.ceil(cfg.train_samples / 300)
    assert len(steps) == 2 * per_epoch == cfg.planned_steps
    assert steps[per_epoch - 1].samples_seen == cfg.train_samples  # partial last batch included
    assert steps[per_epoch - 1].epoch == pytest.approx(1.0)


def test_epoch_batches_cover_every_sample_once():
    g = torch.Generator().manual_seed(0)
    batches = epoch_batches(103, 10, g, CPU)
    assert [len(b) for b in batches] == [10] * 10 + [3]
    assert sorted(torch.cat(batches).tolist()) == list(range(103))


def test_accounted_memory_grows_linearly_with_batch_size():
    peaks = {}
    for b in (16, 32, 64, 128):
        end = run(RunConfig(batch_size=b, epochs=None, max_steps=2))[-1]
        assert end.summary["memory_source"] == "accounted"
        peaks[b] = end.summary["peak_memory_bytes"]
    slopes = [(peaks[b2] - peaks[b1]) / (b2 - b1) for b1, b2 in ((16, 32), (32, 64), (64, 128))]
    assert slopes[0] > 0
    for s in slopes[1:]:
        assert s == pytest.approx(slopes[0], rel=0.01)


def test_accumulation_keeps_memory_at_the_micro_batch_level():
    big = run(RunConfig(batch_size=256, epochs=None, max_steps=2))[-1].summary
    accum = run(RunConfig(batch_size=32, accumulation_steps=8, epochs=None, max_steps=2))[-1].summary
    small = run(RunConfig(batch_size=32, epochs=None, max_steps=2))[-1].summary
    assert accum["peak_memory_bytes"] == small["peak_memory_bytes"] < big["peak_memory_bytes"]


def test_adam_state_is_counted_after_the_first_step():
    sgd = run(RunConfig(epochs=None, max_steps=2))[-1].summary["peak_memory_bytes"]
    adam = run(RunConfig(optimizer="adam", lr=1e-3, epochs=None, max_steps=2))[-1].summary
    params = run(RunConfig(epochs=None, max_steps=1))[0].parameters
    assert adam["peak_memory_bytes"] - sgd == pytest.approx(2 * 4 * params, rel=0.01)


def test_warmup_ramps_the_learning_rate_linearly():
    cfg = RunConfig(lr=0.1, warmup_steps=4)
    assert [lr_at(cfg, i) for i in range(6)] == pytest.approx([0.025, 0.05, 0.075, 0.1, 0.1, 0.1])
    steps = steps_of(run(RunConfig(lr=0.1, warmup_steps=4, epochs=None, max_steps=6)))
    assert [e.lr for e in steps] == pytest.approx([0.025, 0.05, 0.075, 0.1, 0.1, 0.1])


def test_step_budget_and_cancellation():
    events = run(RunConfig(epochs=None, max_steps=7, eval_interval=5))
    assert events[-1].status == "completed" and events[-1].summary["steps"] == 7
    assert [e.step for e in events if e.kind == "eval"] == [0, 5, 7]
    calls = {"n": 0}

    def stop_after_three():
        calls["n"] += 1
        return calls["n"] > 3

    events = run(RunConfig(epochs=5), should_stop=stop_after_three)
    assert events[-1].status == "cancelled" and len(steps_of(events)) == 3


def test_events_carry_the_documented_fields():
    events = run(RunConfig(epochs=None, max_steps=3))
    assert [e.kind for e in events][:2] == ["start", "eval"]
    step = steps_of(events)[0].to_dict()
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
        "memory_reserved_bytes",
        "peak_memory_bytes",
    ):
        assert step[key] is not None or key == "memory_reserved_bytes", key
    assert step["samples_per_sec"] == pytest.approx(32 / step["step_time_s"])
    summary = events[-1].summary
    for key in (
        "steps",
        "samples_per_sec",
        "peak_memory_bytes",
        "memory_source",
        "final_train_loss",
        "test_accuracy",
        "device",
    ):
        assert summary[key] is not None, key


def test_training_learns_digits():
    end = run(RunConfig(epochs=10))[-1]
    assert end.status == "completed"
    assert end.summary["test_accuracy"] > 0.9


@pytest.mark.parametrize("name", [d for d in DATASETS if d not in ("arithmetic", *REAL_SPLITS)])
def test_every_dataset_loads_split_and_standardised(name):
    cfg = RunConfig(dataset=name, samples=500)
    data = load_dataset(cfg, CPU)
    assert len(data.y_train) == cfg.train_samples and len(data.y_test) == cfg.test_samples
    assert data.x_train.dtype == torch.float32 and data.y_train.dtype == torch.int64
    assert data.x_train.mean().abs().item() < 0.1
    assert len(torch.unique(data.y_train)) == data.n_classes >= 2


def test_synthetic_labels_are_roughly_balanced():
    data = load_dataset(RunConfig(dataset="synthetic", samples=4000), CPU)
    counts = torch.bincount(data.y_train, minlength=10)
    assert data.x_train.shape[1:] == (1, 28, 28)
    assert counts.min().item() > 0.3 * counts.float().mean().item()


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("model,dataset", [("mlp", "moons"), ("cnn", "digits"), ("cnn", "synthetic")])
def test_models_forward_for_each_norm(model, dataset, norm):
    cfg = RunConfig(model=model, dataset=dataset, norm=norm, width=8, depth=2, samples=100)
    data = load_dataset(cfg, CPU)
    out = build_model(cfg, data.input_shape, data.n_classes)(data.x_train[:4])
    assert out.shape == (4, data.n_classes)


def test_arithmetic_task_scores_only_the_answer_digits():
    data = load_dataset(RunConfig(dataset="arithmetic", model="transformer", samples=200), CPU)
    assert data.x_train.shape[1:] == (11,) and data.tokens_per_sample == 11
    assert (data.y_train[:, :7] == -100).all() and (data.y_train[:, 7:] >= 0).all()
    from bsdemo.engine.data import VOCAB

    text = "".join(VOCAB[i] for i in data.x_train[0].tolist()) + VOCAB[data.y_train[0, -1]]
    a, rest = text.split("+")
    b, total = rest.split("=")
    assert int(a) + int(b) == int(total)


def test_transformer_accumulation_equals_one_big_batch():
    # momentum SGD: Adam divides by sqrt(v), which turns float32 rounding in near-zero
    # gradients (unused embedding rows) into visible update differences
    common = dict(
        dataset="arithmetic",
        model="transformer",
        width=32,
        depth=1,
        samples=400,
        optimizer="momentum",
        lr=0.05,
        epochs=None,
        max_steps=4,
    )
    big, small = (
        prepare(RunConfig(batch_size=32, **common)),
        prepare(RunConfig(batch_size=8, accumulation_steps=4, **common)),
    )
    run(big.cfg, prepared=big), run(small.cfg, prepared=small)
    for p, q in zip(big.model.parameters(), small.model.parameters(), strict=True):
        assert (p - q).abs().max().item() < 1e-6


def test_tiny_transformer_learns_arithmetic_digits():
    end = run(
        RunConfig(
            dataset="arithmetic",
            model="transformer",
            width=64,
            depth=2,
            samples=4000,
            optimizer="adamw",
            lr=0.003,
            epochs=4,
        )
    )[-1]
    assert end.status == "completed"
    assert end.summary["test_accuracy"] > 0.35  # per answer digit; chance is 0.1


def test_tiny_transformer_reads_digits_row_by_row_and_learns_them():
    """The Transformer on images: rows as the sequence, one prediction per image (from the last
    row, which attends to all of them), and it learns the digits in a few epochs."""
    prepared = prepare(RunConfig(dataset="digits", model="transformer", width=32, depth=1))
    x = prepared.data.x_test[:5]
    assert prepared.model(x).shape == (5, 10)
    # causal: the last row's output changes with the first row, the first row's does not
    # with the last
    h = prepared.model.blocks(prepared.model.embed(x))
    changed = x.clone()
    changed[:, :, -1] += 1.0
    h2 = prepared.model.blocks(prepared.model.embed(changed))
    assert torch.allclose(h[:, 0], h2[:, 0]) and not torch.allclose(h[:, -1], h2[:, -1])
    end = run(
        RunConfig(
            dataset="digits", model="transformer", width=64, depth=2, optimizer="adamw", lr=0.003, epochs=4
        )
    )[-1]
    assert end.status == "completed"
    assert end.summary["test_accuracy"] > 0.8  # chance is 0.1


def test_only_the_test_split_is_evaluated_when_asked():
    evals = [e for e in train(RunConfig(epochs=1), evaluations="test") if e.kind == "eval"]
    assert evals and all(e.train_loss is None and e.train_accuracy is None for e in evals)
    assert all(0.0 <= e.test_accuracy <= 1.0 for e in evals)


def test_size_presets_set_width_and_depth():
    from bsdemo.config import SIZES, sized

    cfg = sized(RunConfig(model="cnn", dataset="synthetic"), "L")
    assert (cfg.width, cfg.depth) == SIZES["cnn"]["L"]
    assert sized(RunConfig(), "XL").validated()[0].width == SIZES["mlp"]["XL"][0]
    with pytest.raises(ConfigError, match="size"):
        sized(RunConfig(), "XXL")


def test_time_cap_stops_the_run_says_so_and_evaluates_where_it_stopped():
    events = run(RunConfig(batch_size=1, epochs=50, time_limit_s=0.3))
    end = events[-1]
    assert end.status == "cancelled" and end.summary["time_capped"]
    assert "time cap of 0.3 s" in end.message
    # how far it got, and what the rest would have cost, labelled as a prediction
    planned = RunConfig(batch_size=1, epochs=50).validated()[0].planned_steps
    left = planned - end.summary["steps"]
    assert f"The {left:,} steps left of its {planned:,}" in end.message
    assert end.message.endswith("at its median step time (predicted).")
    assert end.summary["evaluated_at_step"] == end.summary["steps"]
    # the cap is on the whole run, evaluations included: it ends about there, training a bit less
    assert end.summary["wall_time_s"] < end.summary["run_time_s"] < scaled(3.0)
    assert end.summary["run_time_s"] >= 0.2 and end.summary["steps"] > 0


def test_summary_throughput_is_the_median_over_full_batches():
    """Digits has 1,438 training samples: at batch 1024 every other step is a partial batch of
    414, a shorter step of fewer samples; the summary's medians leave those out."""
    import statistics

    events = run(RunConfig(batch_size=1024, epochs=6), evaluations=False)
    steps, end = steps_of(events), events[-1]
    before = [0] + [s.samples_seen for s in steps[:-1]]
    sizes = [s.samples_seen - p for s, p in zip(steps, before, strict=True)]
    assert sorted(set(sizes)) == [414, 1024]
    full = [s for s, n in zip(steps, sizes, strict=True) if n == 1024]
    steady = full[end.summary["warmup_steps_excluded"] :]
    assert end.summary["samples_per_sec"] == statistics.median(s.samples_per_sec for s in steady)
    assert end.summary["step_time_s"] == statistics.median(s.step_time_s for s in steady)


def test_the_summary_has_the_wall_clock_rate_and_the_process_memory_beside_the_median():
    end = [e for e in train(RunConfig(epochs=None, max_steps=20)) if e.kind == "end"][0]
    s = end.summary
    assert s["wall_samples_per_sec"] == pytest.approx(s["samples_seen"] / s["wall_time_s"])
    assert s["samples_per_sec"] > 0
    if s["process_rss_bytes"] is not None:  # Linux: the worker's resident size, a real figure
        assert s["process_rss_bytes"] > s["peak_memory_bytes"]  # accounted is a lower bound


def test_the_start_event_gives_the_resident_data_set_s_size():
    """An accounted peak leaves out the data set held for the whole run: the start event says
    how large it is (train and test tensors), so the page can say so beside the peak."""
    from bsdemo.engine.train import prepare, resident_bytes, train

    cfg = RunConfig(dataset="digits", model="mlp", max_steps=2, epochs=None)
    data = prepare(cfg).data
    expected = sum(t.nbytes for t in (data.x_train, data.y_train, data.x_test, data.y_test))
    start = next(e for e in train(cfg) if e.kind == "start")
    assert start.dataset_bytes == expected == resident_bytes(data) > 0
