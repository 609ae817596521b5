"""Your own model in the lab's measurements, from a terminal:

    bsdemo find  --model-file examples/own_model.py:resnet --memory-budget 64MiB
    bsdemo sweep --model-file examples/own_model.py:gpt --batch-sizes 4,16,64
    bsdemo fit-batch --model-file examples/own_model.py:gpt --memory-budget 32MiB
    bsdemo noise --model-file examples/own_model.py:resnet

Each factory returns a bsdemo.api.Workload: a model (or a function making a fresh one), a
function of the batch size returning (inputs, targets), a loss and an optimizer. Swap in your
own; the data here is random, which is all a measurement of time and memory needs (the noise
scale of random labels is a property of random labels: bring real data for that one).
"""

import torch
from torch import nn

from bsdemo.api import Workload


class Residual(nn.Module):
    """Two 3×3 convolutions with batch norm, added to the input (a ResNet basic block)."""

    def __init__(self, channels: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x):
        return torch.relu(x + self.body(x))


class SmallResNet(nn.Module):
    """A stem, `blocks` residual blocks at 32×32, global pooling and a classifier."""

    def __init__(self, channels: int = 32, blocks: int = 4, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU()
        )
        self.blocks = nn.ModuleList(Residual(channels) for _ in range(blocks))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes))

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    def segments(self):
        """(stem, blocks, head): where activation checkpointing may cut the model."""
        return self.stem, list(self.blocks), self.head


class Block(nn.Module):
    """Pre-norm causal self-attention and an MLP, each added to the residual stream."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        t = x.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class SmallGPT(nn.Module):
    """Token and position embeddings, `depth` blocks, a final norm and the vocabulary logits."""

    def __init__(self, vocab: int = 256, context: int = 64, width: int = 64, depth: int = 2, heads: int = 4):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.norm, self.read = nn.LayerNorm(width), nn.Linear(width, vocab)

    def embed(self, ids):
        return self.tokens(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.read(self.norm(x))

    def segments(self):
        return self.embed, list(self.blocks), lambda x: self.read(self.norm(x))


def images(n: int):
    """n random 3×32×32 images and labels of 10 classes."""
    return torch.randn(n, 3, 32, 32), torch.randint(0, 10, (n,))


def token_windows(n: int, vocab: int = 256, context: int = 64):
    """n random token windows, each target the next token (language modelling)."""
    ids = torch.randint(0, vocab, (n, context + 1))
    return ids[:, :-1], ids[:, 1:]


def next_token_loss(logits, targets):
    return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def resnet() -> Workload:
    return Workload(
        model=SmallResNet,
        batch=images,
        loss=nn.functional.cross_entropy,
        optimizer=lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
        name="small ResNet",
    )


def gpt() -> Workload:
    return Workload(
        model=SmallGPT,
        batch=token_windows,
        loss=next_token_loss,
        optimizer=lambda params: torch.optim.AdamW(params, lr=3e-4),
        name="small GPT",
    )
