"""The model zoo: an MLP and a small CNN, each with a choice of normalisation layer; a tiny
Transformer, an LSTM and a small GAN.

BatchNorm makes a model depend on which samples share its batch (the lesson on normalisation and
the one on accumulation show this); GroupNorm and LayerNorm do not.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from bsdemo.config import GAN_LATENT, TRANSFORMER_HEADS, RunConfig
from bsdemo.footprint import norm_groups


def build_model(cfg: RunConfig, input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    if cfg.model == "mlp":
        return MLP(math.prod(input_shape), cfg.width, cfg.depth, n_classes, cfg.norm)
    if cfg.model == "transformer":
        return TinyTransformer(input_shape, cfg.width, cfg.depth, TRANSFORMER_HEADS, n_classes)
    if cfg.model == "lstm":
        return LSTM(input_shape, cfg.width, cfg.depth, n_classes)
    if cfg.model == "gan":
        return GAN(input_shape, cfg.width, cfg.depth)
    return CNN(input_shape, cfg.width, cfg.depth, n_classes, cfg.norm)


def norm_1d(kind: str, features: int) -> nn.Module:
    return {
        "none": nn.Identity,
        "batch": lambda: nn.BatchNorm1d(features),
        "layer": lambda: nn.LayerNorm(features),
        "group": lambda: nn.GroupNorm(norm_groups(features), features),
    }[kind]()


def norm_2d(kind: str, channels: int) -> nn.Module:
    return {
        "none": nn.Identity,
        "batch": lambda: nn.BatchNorm2d(channels),
        # LayerNorm over (C, H, W) without knowing H, W: GroupNorm with one group is exactly that
        "layer": lambda: nn.GroupNorm(1, channels),
        "group": lambda: nn.GroupNorm(norm_groups(channels), channels),
    }[kind]()


class MLP(nn.Module):
    """Flatten -> depth x (Linear -> norm -> ReLU) -> Linear."""

    def __init__(self, in_features: int, width: int, depth: int, n_classes: int, norm: str):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        for i in range(depth):
            layers += [nn.Linear(in_features if i == 0 else width, width), norm_1d(norm, width), nn.ReLU()]
        layers.append(nn.Linear(width, n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, ...) -> (B, n_classes)
        return self.net(x)


class CNN(nn.Module):
    """depth x (Conv3x3 -> norm -> ReLU -> MaxPool2 while the map is >= 4 px) -> Linear.

    Channels double per block from `width`.
    """

    def __init__(self, input_shape: tuple[int, ...], width: int, depth: int, n_classes: int, norm: str):
        super().__init__()
        channels, side = input_shape[0], input_shape[-1]
        layers: list[nn.Module] = []
        for i in range(depth):
            out = width * 2**i
            layers += [
                nn.Conv2d(channels, out, 3, padding=1, bias=norm == "none"),
                norm_2d(norm, out),
                nn.ReLU(),
            ]
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


def rows(x: torch.Tensor) -> torch.Tensor:
    """Images (B, C, H, W) as sequences of rows (B, H, C*W): what the sequence models read."""
    b, c, h, w = x.shape
    return x.view(b, h, w) if c == 1 else x.permute(0, 2, 1, 3).reshape(b, h, c * w)


class TinyTransformer(nn.Module):
    """Decoder-only Transformer: inputs + position embeddings -> blocks -> LayerNorm -> head.

    On the arithmetic characters (`input_shape` (T,): token ids) it predicts the next character
    at every position. On images it reads the rows as a sequence like the LSTM does (each row's
    pixels projected to `width`; attention is causal) and classifies from the last position,
    which has attended to every row. Its normalisation is always LayerNorm (the `norm` setting
    applies to the MLP and CNN).
    """

    def __init__(self, input_shape: tuple[int, ...], width: int, depth: int, heads: int, n_classes: int):
        super().__init__()
        self.tokens = len(input_shape) == 1  # (T,) token ids, else (C, H, W) pixels
        length = input_shape[0] if self.tokens else input_shape[1]
        self.inputs = (
            nn.Embedding(n_classes, width)
            if self.tokens
            else nn.Linear(input_shape[0] * input_shape[-1], width)
        )
        self.positions = nn.Embedding(length, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(depth)))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, n_classes)

    def embed(self, x: torch.Tensor) -> torch.Tensor:  # inputs -> (B, T, width)
        seq = x if self.tokens else rows(x)  # (B, T) ids, or (B, H, C*W) pixels
        pos = torch.arange(seq.shape[1], device=x.device)
        return self.inputs(seq) + self.positions(pos)

    def read(self, h: torch.Tensor) -> torch.Tensor:  # (B, T, vocab) or (B, classes) logits
        h = self.ln(h)
        return self.head(h if self.tokens else h[:, -1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.read(self.blocks(self.embed(x)))


class LSTMLayer(nn.Module):
    """One LSTM layer written out as its equations, one time step at a time:

        i, f, o = sigmoid(W_i x_t + U_i h + b_i, ...),  g = tanh(W_g x_t + U_g h + b_g)
        c = f * c + i * g,  h = o * tanh(c)

    The input projections of all time steps are one matrix product; the recurrence is the loop.
    Written out (not nn.LSTM) so what autograd saves is plain and the same on every backend
    (bsdemo.footprint predicts it to the byte).
    """

    def __init__(self, in_features: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.input = nn.Linear(in_features, 4 * hidden)
        self.recurrent = nn.Linear(hidden, 4 * hidden, bias=False)
        with torch.no_grad():  # forget gate bias 1: remember by default (Jozefowicz et al., 2015)
            self.input.bias[hidden : 2 * hidden].fill_(1.0)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:  # (B, T, I) -> T x (B, H)
        projected = self.input(x)  # (B, T, 4H)
        h_size = self.hidden
        outputs, h, c = [], None, None
        for t in range(x.shape[1]):
            gates = projected[:, t] if h is None else projected[:, t] + self.recurrent(h)
            ifo = torch.sigmoid(gates[:, : 3 * h_size])
            g = torch.tanh(gates[:, 3 * h_size :])
            i, f, o = ifo[:, :h_size], ifo[:, h_size : 2 * h_size], ifo[:, 2 * h_size :]
            c = i * g if c is None else f * c + i * g
            h = o * torch.tanh(c)
            outputs.append(h)
        return outputs


class LSTM(nn.Module):
    """A recurrent network: an image read row by row (each row one time step, classified from the
    last hidden state), or the arithmetic characters (embedded, the next one predicted at every
    position). `depth` stacked layers of `width` hidden units; no normalisation layer."""

    def __init__(self, input_shape: tuple[int, ...], width: int, depth: int, n_classes: int):
        super().__init__()
        self.tokens = len(input_shape) == 1  # (T,) token ids, else (C, H, W) pixels
        in_features = width if self.tokens else input_shape[0] * input_shape[-1]
        self.embed = nn.Embedding(n_classes, width) if self.tokens else None
        self.layers = nn.ModuleList(LSTMLayer(in_features if i == 0 else width, width) for i in range(depth))
        self.head = nn.Linear(width, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tokens:  # (B, T) ids -> (B, T, vocab) logits
            seq = self.embed(x)
        else:
            seq = rows(x)
        for i, layer in enumerate(self.layers):
            outputs = layer(seq)
            if self.tokens or i < len(self.layers) - 1:
                seq = torch.stack(outputs, dim=1)  # (B, T, H): the next layer's input
        return self.head(seq if self.tokens else outputs[-1])


def _mlp(sizes: list[int], activation: Callable[[], nn.Module]) -> nn.Sequential:
    """Linear layers through `sizes`, `activation` between them."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers += [nn.Linear(a, b)] + ([activation()] if i < len(sizes) - 2 else [])
    return nn.Sequential(*layers)


class GAN(nn.Module):
    """A small GAN on images (Goodfellow et al., 2014): a generator maps GAN_LATENT normal numbers
    to an image (tanh, so pixels in [-1, 1]); a discriminator scores an image real or generated.
    Each has `depth` hidden layers of `width` units (ReLU in the generator, LeakyReLU 0.2 in the
    discriminator).

    One training step updates both players at once from the same point (simultaneous gradient
    steps, one optimizer over both): the discriminator's loss on real and generated images, plus
    the generator's non-saturating loss -log D(G(z)) taken through the discriminator with its
    parameters held fixed — so each loss moves only its own player, and the step is one
    forward/backward pass like every other model's (accumulation, memory and speed work alike).
    Pixels are mapped to [-1, 1] with the training set's range (`fit_range`).
    """

    def __init__(self, input_shape: tuple[int, ...], width: int, depth: int):
        super().__init__()
        self.shape = input_shape
        pixels = math.prod(input_shape)
        self.generator = nn.Sequential(_mlp([GAN_LATENT] + [width] * depth + [pixels], nn.ReLU), nn.Tanh())
        self.discriminator = _mlp([pixels] + [width] * depth + [1], lambda: nn.LeakyReLU(0.2))
        self.register_buffer("low", torch.zeros(()))
        self.register_buffer("high", torch.ones(()))
        self.parts: list[torch.Tensor] = []  # (discriminator, generator) losses of the last step

    def fit_range(self, x: torch.Tensor) -> None:
        self.low.fill_(x.min())
        self.high.fill_(x.max())

    def scaled(self, x: torch.Tensor) -> torch.Tensor:  # data units -> [-1, 1], flat
        return ((x.flatten(1) - self.low) / (self.high - self.low)).mul(2).sub(1)

    def unscaled(self, g: torch.Tensor) -> torch.Tensor:  # [-1, 1], flat -> data units, shaped
        return ((g + 1) / 2 * (self.high - self.low) + self.low).view(-1, *self.shape)

    def generate(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        z = torch.randn(n, GAN_LATENT, device=self.low.device, generator=generator)
        return self.generator(z)

    def losses(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(discriminator loss, generator loss) on a batch of real images and as many generated."""
        fake = self.generate(len(x))
        real_logit = self.discriminator(self.scaled(x))
        fake_logit = self.discriminator(fake.detach())
        d_loss = F.softplus(-real_logit).mean() + F.softplus(fake_logit).mean()
        fixed = {k: p.detach() for k, p in self.discriminator.named_parameters()}
        g_loss = F.softplus(-functional_call(self.discriminator, fixed, (fake,))).mean()
        return d_loss, g_loss

    @torch.no_grad()
    def judge(self, x: torch.Tensor, fake: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(summed discriminator loss, correct calls) over real images x and generated `fake`."""
        real_logit = self.discriminator(self.scaled(x))
        fake_logit = self.discriminator(fake)
        loss = F.softplus(-real_logit).sum() + F.softplus(fake_logit).sum()
        return loss, (real_logit > 0).sum() + (fake_logit <= 0).sum()


def make_optimizer(cfg: RunConfig, params) -> torch.optim.Optimizer:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr)
    if cfg.optimizer == "momentum":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=0.9)
    betas = (0.5, 0.999) if cfg.model == "gan" else (0.9, 0.999)  # GANs: Radford et al., 2016
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, betas=betas)
    return torch.optim.AdamW(params, lr=cfg.lr, betas=betas, weight_decay=0.01)
