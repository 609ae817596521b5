"""The comparison lessons' linked controls and the training runs they ask for (pure Python).

The regimes and learning-rate pages draw these controls (bsdemo.ui.links) and build their runs
with `regimes_runs` / `lr_runs`; `bsdemo warm` reads the same lessons' links and scenarios with
`lesson_runs`, so a run warmed before a lecture is exactly the run the page asks for, and the run
store serves it at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bsdemo import recipes
from bsdemo.config import OPTIMIZERS, SIZES, VIEW_PARAMS, RunConfig, sized
from bsdemo.errors import ConfigError, clip
from bsdemo.links import Control
from bsdemo.presets import PRESETS

SIZE_OPTIONS = ("preset", *SIZES["mlp"])  # every model has the same S/M/L/XL names
LR_STEPS = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


# a page whose default experiment needs another optimizer than its default preset's own:
# prefix -> (that preset, the optimizer). The lr page's default is its Linear rule preset's.
PAGE_OPTIMIZERS = {"lr": ("digits-mlp", next(iter(recipes.LR_PRESETS.values()))["optimizer"])}


def default_optimizer(prefix: str, preset: str) -> str:
    """The optimizer a page starts `preset` with: the page's own for its default preset (where
    it has one), else the preset's own."""
    page = PAGE_OPTIMIZERS.get(prefix)
    if page is not None and page[0] == preset:
        return page[1]
    return PRESETS[preset].settings.get("optimizer", "sgd")


def workload_controls(prefix: str) -> tuple[Control, Control, Control]:
    """Preset (dataset + model), size and optimizer; the optimizer's default (None) is the
    preset's own."""
    return (
        Control(
            "preset",
            f"{prefix}_preset",
            "Dataset and model",
            "choice",
            options=tuple(PRESETS),
            default="digits-mlp",
        ),
        Control("size", f"{prefix}_size", "Size", "choice", options=SIZE_OPTIONS, default="preset"),
        Control("optimizer", f"{prefix}_optimizer", "Optimizer", "choice", options=OPTIMIZERS, default=None),
    )


def workload(preset: str, size: str = "preset", optimizer: str | None = None) -> RunConfig:
    """The config of a preset at a size, with an optimizer (None: the preset's own)."""
    settings = dict(PRESETS[preset].settings)
    cfg = RunConfig(**(settings | {"optimizer": optimizer or settings.get("optimizer", "sgd")}))
    return cfg if size == "preset" else sized(cfg, size)


# ----- learning-rate scaling: the five-run comparison -----
_LINEAR = next(iter(recipes.LR_PRESETS.values()))  # the page's default is the first preset
LR_CONTROLS = (
    *workload_controls("lr"),
    Control("ref_batch", "lr_ref_batch", "Reference batch", "int", 1, 4096, default=_LINEAR["ref_batch"]),
    Control("ref_lr", "lr_ref_lr", "Reference lr", "choice", options=LR_STEPS, default=_LINEAR["ref_lr"]),
    Control("k", "lr_k", "Batch multiplier k", "int", 1, 256, default=_LINEAR["k"]),
    Control("epochs", "lr_epochs", "Epochs", "int", 1, 100, default=_LINEAR["epochs"]),
    Control("warmup", "lr_warmup", "Warm-up epochs", "int", 1, 20, default=_LINEAR["warmup"]),
)
LR_TIME_CAP_S = 30.0  # each of the five runs


def lr_runs(values: Mapping[str, Any]) -> list[tuple[str, RunConfig]]:
    """(label, config) of the five runs, from the controls' values by parameter."""
    optimizer = values["optimizer"] or default_optimizer("lr", values["preset"])
    base = dataclasses.replace(
        workload(values["preset"], values["size"], optimizer),
        epochs=int(values["epochs"]),
        time_limit_s=LR_TIME_CAP_S,
    )
    return recipes.lr_variants(
        base, int(values["ref_batch"]), values["ref_lr"], int(values["k"]), int(values["warmup"])
    )


# ----- SGD, full batch, mini-batch -----
REGIMES_CONTROLS = (
    *workload_controls("reg"),
    Control("epochs", "reg_epochs", "Epochs (each regime)", "int", 1, 100, default=5),
    Control("sgd", "reg_sgd", "SGD batch", "int", 1, 16, default=1),
    Control("mini", "reg_mini", "Mini-batch", "int", 2, 4096, default=32),
    Control("cap", "reg_cap", "Time cap per run (s)", "int", 1, 600, default=20),
)


def regimes_runs(values: Mapping[str, Any]) -> list[tuple[str, RunConfig]]:
    """(label, config) of SGD, full batch and mini-batch, from the controls' values."""
    cfg = workload(values["preset"], values["size"], values["optimizer"])
    return [
        (recipes.regime_label(name, run), run)
        for name, run in recipes.regime_configs(
            cfg,
            int(values["epochs"]),
            int(values["mini"]),
            float(values["cap"]),
            sgd_batch=int(values["sgd"]),
        )
    ]


# slug -> (its linked controls that shape the runs, the runs, its other linked parameters)
LESSONS = {
    "regimes": (REGIMES_CONTROLS, regimes_runs, ("budget",)),
    "lr_scaling": (LR_CONTROLS, lr_runs, ("grid_epochs",)),
}


def lesson_runs(slug: str, params: Mapping[str, Any], where: str = "link") -> list[tuple[str, RunConfig]]:
    """A comparison lesson's link parameters -> the (label, validated config) of its runs, as
    its page submits them; a parameter it does not set is the page's default. Raises
    ConfigError naming `where`, the parameter and what is allowed."""
    if slug not in LESSONS:
        raise ConfigError(
            where,
            clip(slug),
            "a link to " + " or ".join(["training_lab", *LESSONS]) + " (the other pages measure live)",
        )
    controls, runs, others = LESSONS[slug]
    by_param = {c.param: c for c in controls}
    values = {c.param: c.default for c in controls}
    for name, raw in params.items():
        if name in by_param:
            try:
                values[name] = by_param[name].parse(raw)
            except ConfigError as exc:
                raise ConfigError(where, clip(f"{name}={raw}"), f"valid {slug} settings ({exc})") from None
        elif name not in (*VIEW_PARAMS, *others):
            raise ConfigError(
                where,
                clip(str(name)),
                f"a parameter of {slug}: " + ", ".join([*by_param, *others, *VIEW_PARAMS]),
            )
    return [(label, cfg.validated()[0]) for label, cfg in runs(values)]
