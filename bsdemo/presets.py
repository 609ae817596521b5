"""The named dataset + model pairs the pages and `bsdemo warm` offer (pure Python).

A preset fixes what is trained on (and the sizes that suit it); every other setting stays the
user's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from bsdemo.config import RunConfig
from bsdemo.recipes import LR_PRESETS


@dataclass(frozen=True)
class Preset:
    """A named dataset + model pair the pages offer; the other settings stay the user's."""

    name: str
    label: str
    settings: dict[str, Any] = field(default_factory=dict)


PRESETS = {
    p.name: p
    for p in (
        Preset("digits-mlp", "Handwritten digits (8×8) · MLP", {"dataset": "digits", "model": "mlp"}),
        Preset(
            "spirals-mlp",
            "Two spirals (2-D) · MLP",
            {"dataset": "spirals", "model": "mlp", "width": 64, "noise": 0.1},
        ),
        Preset("moons-mlp", "Two moons (2-D) · MLP", {"dataset": "moons", "model": "mlp", "width": 64}),
        Preset("circles-mlp", "Circles (2-D) · MLP", {"dataset": "circles", "model": "mlp", "width": 64}),
        Preset("xor-mlp", "XOR (2-D) · MLP", {"dataset": "xor", "model": "mlp", "width": 64}),
        Preset("blobs-mlp", "Gaussian blobs (2-D) · MLP", {"dataset": "blobs", "model": "mlp", "width": 64}),
        Preset(
            "digits-cnn",
            "Handwritten digits (8×8) · CNN",
            {"dataset": "digits", "model": "cnn", "width": 32, "depth": 2},
        ),
        Preset(
            "synthetic-cnn",
            "Synthetic 28×28 images · CNN",
            {"dataset": "synthetic", "model": "cnn", "width": 16, "depth": 2, "samples": 4000},
        ),
        Preset(
            "synthetic-mlp",
            "Synthetic 28×28 images · MLP",
            {"dataset": "synthetic", "model": "mlp", "samples": 4000},
        ),
        Preset(
            "mnist-cnn",
            "MNIST digits (28×28, download) · CNN",
            {"dataset": "mnist", "model": "cnn", "width": 16, "depth": 2},
        ),
        Preset(
            "fashion-cnn",
            "Fashion-MNIST (28×28, download) · CNN",
            {"dataset": "fashion", "model": "cnn", "width": 16, "depth": 2},
        ),
        Preset(
            "cifar10-cnn",
            "CIFAR-10 (32×32 colour, download) · CNN",
            {"dataset": "cifar10", "model": "cnn", "width": 32, "depth": 3},
        ),
        Preset(
            "arithmetic-transformer",
            "Character arithmetic · tiny Transformer",
            {
                "dataset": "arithmetic",
                "model": "transformer",
                "width": 64,
                "depth": 2,
                "samples": 8000,
                "optimizer": "adamw",
                "lr": 0.003,
            },
        ),
        Preset(
            "digits-transformer",
            "Handwritten digits, read row by row · tiny Transformer",
            {
                "dataset": "digits",
                "model": "transformer",
                "width": 64,
                "depth": 2,
                "optimizer": "adamw",
                "lr": 0.003,
            },
        ),
        Preset(
            "digits-lstm",
            "Handwritten digits, read row by row · LSTM",
            {"dataset": "digits", "model": "lstm", "width": 64, "depth": 1, "optimizer": "adam", "lr": 0.01},
        ),
        Preset(
            "arithmetic-lstm",
            "Character arithmetic · LSTM",
            {
                "dataset": "arithmetic",
                "model": "lstm",
                "width": 128,
                "depth": 1,
                "samples": 8000,
                "optimizer": "adam",
                "lr": 0.01,
            },
        ),
        # a GAN needs more steps than a classifier: 30 epochs at batch 32 is ~1,350 updates (~7 s)
        Preset(
            "digits-gan",
            "Handwritten digits (8×8) · GAN",
            {
                "dataset": "digits",
                "model": "gan",
                "width": 128,
                "depth": 2,
                "optimizer": "adam",
                "lr": 0.001,
                "epochs": 30,
            },
        ),
    )
}


def preset_of(cfg: RunConfig) -> str | None:
    """The preset whose dataset and model match cfg, if any."""
    for preset in PRESETS.values():
        if (preset.settings["dataset"], preset.settings["model"]) == (cfg.dataset, cfg.model):
            return preset.name
    return None


# The Training Lab's lecture scenarios: a name and the lab link that sets every control (the
# lab's own query string; `bsdemo warm --plan` takes the same links). In lecture order.
LAB_SCENARIOS = {
    "SGD is slow (batch 1)": "batch_size=1&epochs=1",
    "The default (batch 32)": "batch_size=32&epochs=10",
    "Batch 256: 8× fewer updates": "batch_size=256&epochs=10",
    "Batch 256, lr × 8": "batch_size=256&lr=0.4&epochs=10",
    "Two spirals: the regions as it learns": "dataset=spirals&width=64&depth=3&lr=0.1&epochs=30",
    "Accumulate 8 × 32": "batch_size=32&accumulation_steps=8&epochs=10",
}
# the two scenarios the quiz suggests running first: its explanations then quote their numbers
COMPARED_SCENARIOS = ("The default (batch 32)", "Batch 256: 8× fewer updates")

# Every lesson's lecture scenarios: slug -> name -> the page's own query string (its link's
# settings; a control a scenario leaves out takes the page's default). Each page draws its own
# as buttons (bsdemo.ui.links.PageLink.scenarios); tests/app checks every one against its page's
# controls, and `bsdemo warm --lesson` trains the stored lessons' runs ahead of a lecture.
# Names say what is set, not what will happen: the page says that from the run.
SCENARIOS = {
    "training_lab": LAB_SCENARIOS,
    "throughput": {
        "Digits MLP (default)": "",
        "The same MLP, size L": "size=L",
        "CNN on 28×28 images": "preset=synthetic-cnn&largest=512",
        "Tiny Transformer": "preset=arithmetic-transformer&largest=256",
    },
    "memory": {
        "SGD (default)": "",
        "Adam: + two state copies": "optimizer=adam",
        "CNN on 28×28 images": "preset=synthetic-cnn&largest=1024",
    },
    "finder": {
        "Simulated device (default)": "",
        "Target effective batch 1024": "target=1024",
        "No safety margin": "margin=0",
    },
    "regimes": {
        "Digits, 5 epochs (default)": "",
        "Mini-batch 256": "mini=256",
        "Two moons": "preset=moons-mlp",
    },
    "lr_scaling": {
        name: urlencode({"preset": "digits-mlp", "size": "preset"} | values)
        for name, values in LR_PRESETS.items()
    },
    "noise": {
        "At initialisation (default)": "",
        "After 300 steps": "after=300",
        "Finer batch sizes": "batches=1%2C2%2C4%2C8%2C16%2C32%2C64%2C128%2C256%2C512",
        "Linear lr rule": "rule=linear&ref_lr=0.1&cap=1.6",
    },
    "fit_batch": {  # the budget's default follows the model, so these keep the model
        "4 micro-batches (default)": "",
        "Accumulate 8": "accum=8",
        "Accumulate 2": "accum=2",
    },
    "sharpness": {
        "16 vs full (default)": "",
        "Every remedy": "scale_lr=1&warmup=1&longer=1&noise=1",
        "Large batch 512": "large=512",
        "Smaller lr: 0.1": "lr=0.1",
    },
    "norms": {
        "Digits MLP (default)": "",
        "Longer: 5 epochs": "epochs=5",
        "Digits CNN (BatchNorm2d)": "preset=digits-cnn",
    },
    "accumulation": {
        "4 × 32 (default)": "",
        "Forget the 1/k": "unscaled=1",
        "BatchNorm model": "bn=1",
        "Uneven sequences": "var=1",
    },
}
