"""The closed-form memory model (bsdemo.footprint) against the engine's own measured accounting."""

from __future__ import annotations

import pytest
import torch

from bsdemo.config import NORMS, RunConfig, sized
from bsdemo.engine.data import load_dataset
from bsdemo.engine.train import train
from bsdemo.footprint import input_shape, n_classes, predict

WORKLOADS = [  # every model on each kind of input it takes, at two shapes
    *(dict(model="mlp", dataset=d) for d in ("digits", "spirals", "blobs", "synthetic")),
    *(dict(model="cnn", dataset=d) for d in ("digits", "synthetic")),
]
SHAPES = [(16, 2), (24, 3)]


def one_step(cfg: RunConfig) -> dict:
    end = list(train(cfg, evaluations=False))[-1]
    assert end.status == "completed", end.message
    return end.summary


@pytest.mark.parametrize("batch_size", [2, 16])  # BatchNorm1d needs 2 samples
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: f"{w['model']}-{w['dataset']}")
def test_prediction_equals_engine_accounting(workload, norm, shape, batch_size):
    """Parameters, gradients, saved activations, workspace and the accounted peak: to the byte."""
    cfg = RunConfig(
        **workload,
        norm=norm,
        width=shape[0],
        depth=shape[1],
        batch_size=batch_size,
        samples=200,
        epochs=None,
        max_steps=1,
        optimizer="momentum",
    )
    s = one_step(cfg)
    fp, breakdown = predict(cfg), s["memory_breakdown"]
    assert fp.parameters == breakdown["parameters"]
    assert fp.gradients == breakdown["gradients"]
    assert fp.optimizer_state == breakdown["optimizer_state"]
    assert fp.activations == breakdown["activations"]
    assert fp.workspace == breakdown["workspace"]
    assert fp.micro_batch == breakdown["micro_batch"]
    assert fp.peak == s["peak_memory_bytes"]


@pytest.mark.parametrize("shape", [(32, 2), (64, 1)])
def test_transformer_prediction(shape):
    cfg = RunConfig(
        dataset="arithmetic",
        model="transformer",
        width=shape[0],
        depth=shape[1],
        batch_size=8,
        samples=200,
        epochs=None,
        max_steps=1,
    )
    s = one_step(cfg)
    fp = predict(cfg)
    assert fp.activations == s["memory_breakdown"]["activations"]
    assert fp.peak == s["peak_memory_bytes"]


@pytest.mark.parametrize(
    "model,dataset",
    [
        ("lstm", "digits"),
        ("lstm", "synthetic"),
        ("lstm", "arithmetic"),
        ("gan", "digits"),
        ("transformer", "digits"),
        ("transformer", "synthetic"),
    ],
)
@pytest.mark.parametrize("shape", [(16, 1), (24, 3)])
def test_sequence_models_and_gan_prediction(model, dataset, shape):
    """The LSTM and the Transformer on an image read row by row, the LSTM on the characters,
    and the GAN's two players: to the byte."""
    cfg = RunConfig(
        dataset=dataset,
        model=model,
        width=shape[0],
        depth=shape[1],
        batch_size=4,
        samples=200,
        epochs=None,
        max_steps=1,
        optimizer="momentum",
    )
    s = one_step(cfg)
    fp, breakdown = predict(cfg), s["memory_breakdown"]
    assert (fp.parameters, fp.optimizer_state) == (breakdown["parameters"], breakdown["optimizer_state"])
    assert fp.activations == breakdown["activations"]
    assert fp.workspace == breakdown["workspace"]
    assert fp.peak == s["peak_memory_bytes"]


@pytest.mark.parametrize("optimizer,factor", [("sgd", 0), ("momentum", 1), ("adam", 2), ("adamw", 2)])
def test_optimizer_state_by_optimizer(optimizer, factor):
    fp = predict(RunConfig(optimizer=optimizer))
    assert fp.optimizer_state == factor * fp.parameters


@pytest.mark.parametrize("dataset", ["digits", "synthetic", "moons", "arithmetic"])
def test_data_and_shapes_match_the_loader(dataset):
    """The dataset bytes the device holds, its input shape and class count, as the loader has them."""
    model = "transformer" if dataset == "arithmetic" else "mlp"
    cfg = RunConfig(dataset=dataset, model=model, samples=300)
    data = load_dataset(cfg, torch.device("cpu"))
    held = sum(t.numel() * t.element_size() for t in (data.x_train, data.y_train, data.x_test, data.y_test))
    assert predict(cfg).data == held
    assert input_shape(cfg) == data.input_shape
    assert n_classes(cfg) == data.n_classes


def test_prediction_scales_with_batch_and_size_preset():
    """Activations grow linearly in the micro-batch; the fixed part does not move with it."""
    base = RunConfig(dataset="synthetic", model="cnn", width=8, depth=2)
    small, big = (
        predict(RunConfig(**{**vars(base), "batch_size": 8})),
        predict(RunConfig(**{**vars(base), "batch_size": 64})),
    )
    assert big.fixed == small.fixed
    assert big.activations - 4 == 8 * (small.activations - 4)  # 4: one per-batch scalar
    assert predict(sized(base, "XL")).device > 10 * predict(base).device
    # the micro-batch never exceeds the training set (the whole set is one batch then)
    assert predict(RunConfig(batch_size=65536)).micro_batch == RunConfig().train_samples


def test_real_dataset_shapes():
    """Shapes of the published sets without downloading them (their readers are tested elsewhere)."""
    cifar = predict(RunConfig(dataset="cifar10", model="cnn", width=16, depth=2, batch_size=128))
    assert cifar.data == 60_000 * (3 * 32 * 32 * 4 + 8)
    assert predict(RunConfig(dataset="mnist", model="mlp")).data == 70_000 * (28 * 28 * 4 + 8)
    assert cifar.evaluation > 0 and cifar.device > cifar.data
