"""The model zoo: an MLP and a small CNN, each with a choice of normalisation layer.

BatchNorm makes a model depend on which samples share its batch (the lesson on normalisation and
the one on accumulation show this); GroupNorm and LayerNorm do not.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bsdemo.config import TRANSFORMER_HEADS, RunConfig
from bsdemo.footprint import norm_groups


def build_model(cfg: RunConfig, input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    if cfg.model == "mlp":
        return MLP(math.prod(input_shape), cfg.width, cfg.depth, n_classes, cfg.norm)
    if cfg.model == "transformer":
        return TinyTransformer(n_classes, input_shape[0], cfg.width, cfg.depth, TRANSFORMER_HEADS)
    return CNN(input_shape, cfg.width, cfg.depth, n_classes, cfg.norm)


def norm_1d(kind: str, features: int) -> nn.Module:
    return {"none": nn.Identity, "batch": lambda: nn.BatchNorm1d(features),
            "layer": lambda: nn.LayerNorm(features),
            "group": lambda: nn.GroupNorm(norm_groups(features), features)}[kind]()


def norm_2d(kind: str, channels: int) -> nn.Module:
    return {"none": nn.Identity, "batch": lambda: nn.BatchNorm2d(channels),
            # LayerNorm over (C, H, W) without knowing H, W: GroupNorm with one group is exactly that
            "layer": lambda: nn.GroupNorm(1, channels),
            "group": lambda: nn.GroupNorm(norm_groups(channels), channels)}[kind]()


class MLP(nn.Module):
    """Flatten -> depth x (Linear -> norm -> ReLU) -> Linear."""

    def __init__(self, in_features: int, width: int, depth: int, n_classes: int, norm: str):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        for i in range(depth):
            layers += [nn.Linear(in_features if i == 0 else width, width), norm_1d(norm, width),
                       nn.ReLU()]
        layers.append(nn.Linear(width, n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, ...) -> (B, n_classes)
        return self.net(x)


class CNN(nn.Module):
    """depth x (Conv3x3 -> norm -> ReLU -> MaxPool2 while the map is >= 4 px) -> Linear.

    Channels double per block from `width`.
    """

    def __init__(self, input_shape: tuple[int, ...], width: int, depth: int, n_classes: int,
                 norm: str):
        super().__init__()
        channels, side = input_shape[0], input_shape[-1]
        layers: list[nn.Module] = []
        for i in range(depth):
            out = width * 2**i
            layers += [nn.Conv2d(channels, out, 3, padding=1, bias=norm == "none"),
                       norm_2d(norm, out), nn.ReLU()]
            if side >= 4:
                layers.append(nn.MaxPool2d(2))
                side //= 2
            channels = out
        self.features = nn.Sequential(*layers)
        # flatten, not global-average-pool: where a pattern sits carries the label here
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(channels * side * side, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W) -> (B, n_classes)
        return self.head(self.features(x))


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, T, C)
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """Pre-norm Transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    """Decoder-only character model: token + position embeddings -> blocks -> LayerNorm -> head.

    Its normalisation is always LayerNorm (the `norm` setting applies to the MLP and CNN).
    """

    def __init__(self, vocab: int, length: int, width: int, depth: int, heads: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(length, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(depth)))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (B, T) ids -> (B, T, vocab) logits
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tokens(idx) + self.positions(pos))))


def make_optimizer(cfg: RunConfig, params) -> torch.optim.Optimizer:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr)
    if cfg.optimizer == "momentum":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=0.9)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.01)
