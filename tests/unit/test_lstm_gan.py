"""The LSTM and the GAN: the LSTM is the textbook cell (checked against nn.LSTM), the GAN's one
step moves each player by its own loss only, and both train through the ordinary loop."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bsdemo.config import ConfigError, RunConfig
from bsdemo.engine.gan import frechet_distance
from bsdemo.engine.models import GAN, LSTM
from bsdemo.engine.train import train


def test_the_written_out_lstm_computes_what_nn_lstm_computes():
    torch.manual_seed(0)
    ours = LSTM((1, 6, 5), width=7, depth=2, n_classes=3)
    ref = nn.LSTM(5, 7, num_layers=2, batch_first=True)
    h = 7
    with torch.no_grad():  # ours orders the gates i, f, o, g; PyTorch's i, f, g, o
        order = torch.cat([torch.arange(0, 2 * h), torch.arange(3 * h, 4 * h), torch.arange(2 * h, 3 * h)])
        for i, layer in enumerate(ours.layers):
            getattr(ref, f"weight_ih_l{i}").copy_(layer.input.weight[order])
            getattr(ref, f"bias_ih_l{i}").copy_(layer.input.bias[order])
            getattr(ref, f"weight_hh_l{i}").copy_(layer.recurrent.weight[order])
            getattr(ref, f"bias_hh_l{i}").zero_()
    x = torch.randn(4, 1, 6, 5)
    out, _ = ref(x.view(4, 6, 5))
    assert torch.allclose(ours(x), ours.head(out[:, -1]), atol=1e-6)


def test_a_gan_step_moves_each_player_by_its_own_loss_only():
    torch.manual_seed(0)
    gan = GAN((1, 8, 8), width=16, depth=1)
    gan.fit_range(torch.randn(100, 1, 8, 8))
    x = torch.randn(8, 1, 8, 8)
    g_params, d_params = list(gan.generator.parameters()), list(gan.discriminator.parameters())
    torch.manual_seed(1)
    d_loss, g_loss = gan.losses(x)
    both = torch.autograd.grad(d_loss + g_loss, g_params + d_params)
    torch.manual_seed(1)  # the same latent points
    d_loss, g_loss = gan.losses(x)
    only_g = torch.autograd.grad(g_loss, g_params, retain_graph=True)
    only_d = torch.autograd.grad(d_loss, d_params)
    for a, b in zip(both, [*only_g, *only_d], strict=True):
        assert torch.allclose(a, b)


def test_the_frechet_distance_is_zero_for_one_set_and_the_squared_shift_for_a_moved_one():
    a = torch.randn(2000, 4, generator=torch.Generator().manual_seed(0))
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)
    assert frechet_distance(a, a + 3.0) == pytest.approx(4 * 9.0, rel=1e-6)


def test_a_gan_trains_in_the_loop_and_reports_both_players_and_its_images():
    events = list(
        train(
            RunConfig(
                model="gan",
                dataset="digits",
                width=64,
                depth=1,
                optimizer="adam",
                lr=1e-3,
                batch_size=64,
                epochs=3,
            )
        )
    )
    steps = [e for e in events if e.kind == "step"]
    evals = [e for e in events if e.kind == "eval"]
    end = events[-1]
    assert end.status == "completed", end.message
    assert all(s.generator_loss is not None and s.loss > 0 for s in steps)
    assert all(e.frechet_distance > 0 and 0 <= e.test_accuracy <= 1 for e in evals)
    assert len(evals[-1].samples) == len(evals[-1].samples[0]) == 4 * 9 + 1
    assert evals[-1].frechet_distance < evals[0].frechet_distance  # it learned something
    assert end.summary["frechet_reference"] < evals[-1].frechet_distance
    assert "Fréchet distance" in end.message


@pytest.mark.parametrize("dataset", ["digits", "arithmetic"])
def test_an_lstm_trains_on_images_row_by_row_and_on_characters(dataset):
    events = list(
        train(
            RunConfig(
                model="lstm",
                dataset=dataset,
                width=32,
                depth=1,
                optimizer="adam",
                lr=0.01,
                samples=400,
                epochs=2,
            )
        )
    )
    end = events[-1]
    assert end.status == "completed", end.message
    evals = [e for e in events if e.kind == "eval"]
    assert evals[-1].train_loss < evals[0].train_loss


@pytest.mark.parametrize(
    "model,dataset,field",
    [
        ("gan", "spirals", "dataset"),
        ("gan", "cifar10", "dataset"),
        ("lstm", "moons", "dataset"),
        ("mlp", "arithmetic", "model"),
    ],
)
def test_a_model_on_data_it_cannot_take_is_refused_by_name(model, dataset, field):
    with pytest.raises(ConfigError) as err:
        RunConfig(model=model, dataset=dataset).validated()
    assert err.value.field == field
