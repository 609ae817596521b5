"""What a GAN's evaluation reports (bsdemo.engine.models.GAN trains in the ordinary loop):

- the discriminator's loss and accuracy on each split's real images against as many generated
  ones — train against test shows whether the discriminator memorised the training images;
- the Fréchet distance (Heusel et al., 2017) between generated and real test images, in the
  feature space of a small classifier trained here on the training split (not Inception: these
  are 8×8 or 28×28 digits). Lower is better; real training images score `reference`;
- a grid of GRID × GRID generated images from fixed latent points, so successive grids show the
  same points as training moves the generator.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bsdemo.engine.data import Dataset

GRID = 4  # samples per side of the sample grid
GRID_LINE = 0.35  # the grey between the grid's images (pixels are 0 black to 1 white)
FEATURE_STEPS = 300  # the feature classifier's training steps (Adam, batch 128)
FEATURE_WIDTH = 128
FD_SAMPLES = 1000  # generated images per Fréchet distance
SAMPLE_SEED = 7  # the grid's latent points and the evaluation's generated images


_FEATURES: dict[tuple[str, str], nn.Module] = {}


def feature_net(name: str, data: Dataset) -> nn.Module:
    """A one-hidden-layer classifier of dataset `name`, trained once per process and device
    (fixed seed); its hidden layer is the Fréchet distance's feature space."""
    key = (name, str(data.x_train.device))
    if key not in _FEATURES:
        _FEATURES[key] = _train_features(data)
    return _FEATURES[key]


def _train_features(data: Dataset) -> nn.Module:
    pixels = math.prod(data.input_shape)
    net = nn.Sequential(
        nn.Flatten(), nn.Linear(pixels, FEATURE_WIDTH), nn.ReLU(), nn.Linear(FEATURE_WIDTH, data.n_classes)
    ).to(data.x_train.device)
    g = torch.Generator(device=data.x_train.device).manual_seed(0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for layer in net:
            if isinstance(layer, nn.Linear):
                layer.reset_parameters()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    n = len(data.y_train)
    with torch.enable_grad():
        for _ in range(FEATURE_STEPS):
            idx = torch.randint(0, n, (128,), generator=g, device=data.x_train.device)
            loss = F.cross_entropy(net(data.x_train[idx]), data.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval().requires_grad_(False)
    return net[:3]


def frechet_distance(features_a: torch.Tensor, features_b: torch.Tensor) -> float:
    """|mu_a - mu_b|^2 + Tr(S_a + S_b - 2 (S_a S_b)^(1/2)), in float64."""
    a, b = features_a.double(), features_b.double()
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a, s_b = torch.cov(a.T), torch.cov(b.T)
    values, vectors = torch.linalg.eigh(s_a)
    root = (vectors * values.clamp_min(0).sqrt()) @ vectors.T
    cross = torch.linalg.eigvalsh(root @ s_b @ root).clamp_min(0).sqrt().sum()
    return float(((mu_a - mu_b) ** 2).sum() + s_a.trace() + s_b.trace() - 2 * cross)


@torch.no_grad()
def gan_evaluation(model: nn.Module, data: Dataset, name: str) -> dict:
    """The GAN's evaluation: discriminator loss and accuracy per split, Fréchet distance, grid."""
    device = data.x_train.device
    model.eval()
    g = torch.Generator(device=device).manual_seed(SAMPLE_SEED)
    out = {}
    for split, x in (("train", data.x_train), ("test", data.x_test)):
        loss_sum, correct = torch.zeros((), device=device), torch.zeros((), device=device)
        for chunk in x.split(1024):
            loss, right = model.judge(chunk, model.generate(len(chunk), g))
            loss_sum += loss
            correct += right
        out[f"{split}_loss"] = loss_sum.item() / (2 * len(x))
        out[f"{split}_accuracy"] = correct.item() / (2 * len(x))
    features = feature_net(name, data)
    fake = model.unscaled(model.generate(FD_SAMPLES, g))
    out["frechet_distance"] = frechet_distance(features(fake), features(data.x_test))
    tiles = (
        model.generate(GRID * GRID, torch.Generator(device=device).manual_seed(SAMPLE_SEED))
        .add(1)
        .div(2)
        .clamp(0, 1)
        .view(GRID, GRID, *model.shape[-2:])
    )
    tiles = F.pad(tiles, (0, 1, 0, 1), value=GRID_LINE)  # a grey line after each image
    side = tiles.shape[-1]
    grid = F.pad(tiles.permute(0, 2, 1, 3).reshape(GRID * side, GRID * side), (1, 0, 1, 0), value=GRID_LINE)
    out["samples"] = [[round(v, 3) for v in row] for row in grid.tolist()]
    model.train()
    return out


@torch.no_grad()
def reference_distance(data: Dataset, name: str) -> float:
    """The Fréchet distance of real training images (as many as a generated set) to the test
    images: what a perfect generator would score."""
    features = feature_net(name, data)
    return frechet_distance(features(data.x_train[:FD_SAMPLES]), features(data.x_test))
