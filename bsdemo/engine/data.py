"""Datasets as device-resident tensors, and on-device shuffling into batches.

Every dataset is fixed (its own seed, DATA_SEED), so runs with different run seeds or batch sizes
train on the same samples. Digits ship inside scikit-learn's wheel; MNIST, Fashion-MNIST and
CIFAR-10 are read from the verified download cache (bsdemo.datasets); the rest is generated.
Batches are index slices of one on-device permutation per epoch: no DataLoader.
"""

from __future__ import annotations

import gzip
import importlib.util
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bsdemo.config import REAL_SPLITS, RunConfig

DATA_SEED = 20240601  # fixes every dataset; the run seed only drives init and shuffling
SYNTHETIC_SIDE = 28
SYNTHETIC_CLASSES = 10


@dataclass(frozen=True)
class Dataset:
    x_train: torch.Tensor  # (N, *input_shape), float32, standardised with train statistics
    y_train: torch.Tensor  # (N,), int64 class labels
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int  # classes, or the vocabulary size of a sequence task

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    @property
    def tokens_per_sample(self) -> int:
        """Positions a model processes per sample: the sequence length, or 1."""
        return self.x_train.shape[1] if self.x_train.dtype == torch.int64 else 1

    def to(self, device: torch.device) -> Dataset:
        return Dataset(
            self.x_train.to(device),
            self.y_train.to(device),
            self.x_test.to(device),
            self.y_test.to(device),
            self.n_classes,
        )


def load_dataset(cfg: RunConfig, device: torch.device) -> Dataset:
    """The dataset cfg names, split train/test as cfg.train_samples/test_samples say, on device."""
    if cfg.dataset in REAL_SPLITS:
        return _real_dataset(cfg.dataset).to(device)
    return _cpu_dataset(cfg.dataset, cfg.total_samples, cfg.noise, cfg.test_samples).to(device)


@lru_cache(maxsize=2)
def _real_dataset(name: str) -> Dataset:
    """A published dataset, its official split, pixels scaled to [0, 1] then standardised."""
    from bsdemo.datasets import load

    x_train, y_train, x_test, y_test = (torch.from_numpy(a.copy()) for a in load(name))
    x_train, x_test = x_train.float() / 255, x_test.float() / 255
    mean = x_train.mean(dim=(0, 2, 3), keepdim=True)
    std = x_train.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)
    return Dataset(
        ((x_train - mean) / std).contiguous(),
        y_train.long(),
        ((x_test - mean) / std).contiguous(),
        y_test.long(),
        10,
    )


@lru_cache(maxsize=4)  # a warm worker re-uses the last few datasets instead of regenerating them
def _cpu_dataset(name: str, n: int, noise: float, n_test: int) -> Dataset:
    if name == "digits":
        x, y = _digits()
    elif name == "synthetic":
        x, y = _synthetic_images(n)
    elif name == "arithmetic":
        x, y = _arithmetic(n)
    else:
        x, y = _toy_2d(name, n, noise)
    order = torch.from_numpy(np.random.RandomState(DATA_SEED).permutation(len(y)))
    x, y = x[order], y[order]
    x_test, y_test, x_train, y_train = x[:n_test], y[:n_test], x[n_test:], y[n_test:]
    if x.dtype == torch.int64:  # token ids: nothing to standardise
        return Dataset(
            x_train.contiguous(), y_train.contiguous(), x_test.contiguous(), y_test.contiguous(), len(VOCAB)
        )
    # standardise with training statistics only (per feature; pixels share one scale)
    dims = (0,) if x.dim() == 2 else (0, 2, 3)
    mean = x_train.mean(dim=dims, keepdim=True)
    std = x_train.std(dim=dims, keepdim=True).clamp_min(1e-6)
    n_classes = int(y.max()) + 1
    return Dataset(
        ((x_train - mean) / std).contiguous(),
        y_train.contiguous(),
        ((x_test - mean) / std).contiguous(),
        y_test.contiguous(),
        n_classes,
    )


def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's bundled 8x8 digits, read from its data file without importing
    scikit-learn (about a second of imports a run would otherwise wait for)."""
    raw = _digits_file()
    if raw is None:  # an unusual install: let scikit-learn find its own file
        from sklearn.datasets import load_digits

        digits = load_digits()
        return (
            torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1),
            torch.tensor(digits.target, dtype=torch.int64),
        )
    rows = torch.tensor([[float(v) for v in line.split(",")] for line in raw.splitlines() if line])
    x = rows[:, :-1].reshape(-1, 1, 8, 8)  # (N, 1, 8, 8), the pixels as load_digits' images
    return x.contiguous(), rows[:, -1].to(torch.int64)


def _digits_file() -> str | None:
    """The text of scikit-learn's digits.csv.gz, found without importing scikit-learn."""
    spec = importlib.util.find_spec("sklearn")  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            return gzip.decompress(path.read_bytes()).decode("ascii")
    return None


def _synthetic_images(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Smooth random 28x28 images labelled by a fixed random teacher network (a real signal)."""
    g = torch.Generator().manual_seed(DATA_SEED)
    noise = torch.randn(n, 1, SYNTHETIC_SIDE + 4, SYNTHETIC_SIDE + 4, generator=g)
    x = F.avg_pool2d(noise, kernel_size=5, stride=1)  # spatially correlated, (N, 1, 28, 28)
    w_conv = torch.randn(8, 1, 5, 5, generator=g) / 5.0
    hidden = F.relu(F.conv2d(x, w_conv, stride=2))  # (N, 8, 12, 12)
    w_out = torch.randn(SYNTHETIC_CLASSES, hidden[0].numel(), generator=g) / math.sqrt(hidden[0].numel())
    logits = hidden.flatten(1) @ w_out.T
    # standardise each class's logit over the set so argmax gives roughly balanced classes
    logits = (logits - logits.mean(0)) / logits.std(0).clamp_min(1e-6)
    return x, logits.argmax(1)


VOCAB = "0123456789+="
IGNORE = -100  # target of positions that are not scored (F.cross_entropy's ignore_index)


def _arithmetic(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """'123+456=0579' as characters: input the first 11, predict the next character, scored only
    on the 4 answer digits. Fixed width, so every sample scores the same number of tokens (and
    accumulated micro-batches average exactly like one batch)."""
    rng = np.random.RandomState(DATA_SEED)
    a, b = rng.randint(0, 1000, n), rng.randint(0, 1000, n)
    text = [f"{x:03d}+{y:03d}={x + y:04d}" for x, y in zip(a, b, strict=True)]
    ids = torch.tensor([[VOCAB.index(c) for c in t] for t in text], dtype=torch.int64)
    x, y = ids[:, :-1], ids[:, 1:].clone()  # (N, 11) each
    y[:, :7] = IGNORE  # the operands are given, not predicted
    return x, y


def _toy_2d(name: str, n: int, noise: float) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.RandomState(DATA_SEED)
    if name == "spirals":
        y = np.arange(n) % 2
        t = np.sqrt(rng.uniform(0.0, 1.0, n)) * 3 * np.pi  # sqrt: even density along the arm
        r = t / (3 * np.pi)
        x = np.stack([r * np.cos(t + np.pi * y), r * np.sin(t + np.pi * y)], axis=1)
    elif name == "moons":
        y = np.arange(n) % 2
        t = rng.uniform(0.0, np.pi, n)
        x = np.where(
            y[:, None] == 0,
            np.stack([np.cos(t), np.sin(t)], 1),
            np.stack([1 - np.cos(t), 0.5 - np.sin(t)], 1),
        )
    elif name == "circles":
        y = np.arange(n) % 2
        t = rng.uniform(0.0, 2 * np.pi, n)
        r = np.where(y == 0, 1.0, 0.5)
        x = np.stack([r * np.cos(t), r * np.sin(t)], axis=1)
    elif name == "xor":
        x = rng.uniform(-1.0, 1.0, (n, 2))
        y = ((x[:, 0] > 0) ^ (x[:, 1] > 0)).astype(np.int64)
    elif name == "blobs":
        y = np.arange(n) % 4
        centres = np.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])
        x = centres[y] + rng.normal(0.0, 0.5, (n, 2))
    else:
        raise ValueError(f"unknown toy dataset {name!r}")
    x = x + rng.normal(0.0, noise, x.shape)
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)


def epoch_batches(
    n: int,
    effective_batch_size: int,
    generator: torch.Generator,
    device: torch.device,
    drop_last_one: bool = False,
):
    """Index tensors of one shuffled epoch, effective_batch_size each (the last may be partial).

    The permutation is drawn on the device; a step's micro-batches are consecutive slices of its
    effective batch, so k micro-batches of b hold exactly the samples of one batch of k*b.
    drop_last_one: leave the permutation's last sample out (RunConfig.drops_lone_sample).
    """
    perm = torch.randperm(n, generator=generator, device=device)
    return (perm[:-1] if drop_last_one else perm).split(effective_batch_size)
