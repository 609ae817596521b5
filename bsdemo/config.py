"""What one training run is: `RunConfig`, its validation, and its URL/CLI string form.

Pure Python (no torch): the Streamlit server validates configs before a worker ever sees them,
and the same rules and messages serve widgets, query parameters and CLI flags.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bsdemo.errors import QUOTE_CHARS, ConfigError, clip  # noqa: F401 - re-exported
from bsdemo.units import number_text, real_number, whole_number

REAL_SPLITS = {
    "mnist": (60_000, 10_000),
    "fashion": (60_000, 10_000),  # official train/test
    "cifar10": (50_000, 10_000),
}  # downloaded once into the cache (bsdemo.datasets)
DATASETS = ("digits", "synthetic", "spirals", "moons", "circles", "xor", "blobs", "arithmetic", *REAL_SPLITS)
IMAGE_DATASETS = ("digits", "synthetic", *REAL_SPLITS)  # the ones a CNN can take
TOY_DATASETS = ("spirals", "moons", "circles", "xor", "blobs")
SEQUENCE_DATASETS = ("arithmetic",)  # character-level: the Transformer's, and only its
MODELS = ("mlp", "cnn", "transformer", "lstm", "gan")
GAN_DATASETS = ("digits", "mnist", "fashion")  # one-channel images a small MLP GAN can draw
GAN_LATENT = 16  # the generator's input: this many standard normal numbers
SIZES = {  # workload size presets: (width, depth); XL makes a large GPU reach OOM in seconds
    "mlp": {"S": (256, 3), "M": (1024, 3), "L": (2048, 4), "XL": (4096, 6)},
    "cnn": {"S": (16, 2), "M": (32, 3), "L": (64, 3), "XL": (128, 4)},
    "transformer": {"S": (64, 2), "M": (128, 4), "L": (256, 6), "XL": (512, 8)},
    "lstm": {"S": (64, 1), "M": (128, 2), "L": (256, 2), "XL": (512, 3)},
    "gan": {"S": (64, 1), "M": (128, 2), "L": (256, 2), "XL": (1024, 3)},
}
TRANSFORMER_HEADS = 4
NORMS = ("none", "batch", "group", "layer")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")
DEVICES = ("auto", "cpu", "cuda", "mps")

DIGITS_SAMPLES = 1797  # scikit-learn's bundled 8x8 digits: fixed size
TEST_FRACTION = 0.2  # share of every dataset held out for the test loss/accuracy
MAX_BATCH_SIZE = 65536
MAX_ACCUMULATION_STEPS = 1024
MAX_SAMPLES = 200_000
MAX_EPOCHS = 10_000
MAX_STEPS = 10_000_000
MAX_SEED = 2**31 - 1
VIEW_PARAMS = ("present", "hide")  # a link's view switches, not settings (bsdemo.links)
LAB_VIEW_PARAMS = ("x_axis",)  # the Training Lab's own view of its runs (its charts' x-axis)


@dataclass(frozen=True)
class RunConfig:
    dataset: str = "digits"  # one of DATASETS; the 2-D toy sets and synthetic images are generated
    model: str = "mlp"  # "mlp", "cnn" (images), "transformer" and "lstm" (either), "gan"
    norm: str = "none"  # normalisation after each hidden layer; "batch" depends on the batch
    width: int = 256  # MLP/LSTM hidden units per layer / CNN channels of the first conv
    depth: int = 3  # MLP hidden layers / CNN conv blocks / LSTM layers
    batch_size: int = 32  # micro-batch: samples per forward/backward pass
    lr: float = 0.05  # peak learning rate, reached after warmup_steps
    accumulation_steps: int = 1  # micro-batches summed into one optimizer step
    optimizer: str = "sgd"  # "sgd", "momentum" (SGD, 0.9), "adam", "adamw" (weight decay 0.01)
    warmup_steps: int = 0  # optimizer steps of linear lr ramp from lr/warmup_steps to lr
    epochs: int | None = 10  # passes over the training set; None = bounded by max_steps only
    max_steps: int | None = None  # optimizer steps; the run stops at whichever bound comes first
    seed: int = 0  # model init and shuffling; the datasets themselves are fixed
    device: str = "auto"  # "auto" = cuda, then mps, then cpu
    eval_interval: int = 0  # optimizer steps between train/test evaluations; 0 = once per epoch
    samples: int = 4000  # dataset size (train + test) for generated datasets; digits is fixed
    noise: float = 0.1  # label-free input noise of the 2-D toy sets (std, in data units)
    time_limit_s: float | None = None  # wall-clock cap on the whole run (setup, evaluations in)

    # ----- derived quantities (pure arithmetic, shown before Run) -----
    @property
    def effective_batch_size(self) -> int:
        """Samples per optimizer step: micro-batch x accumulation steps."""
        return self.batch_size * self.accumulation_steps

    @property
    def total_samples(self) -> int:
        if self.dataset in REAL_SPLITS:
            return sum(REAL_SPLITS[self.dataset])
        return DIGITS_SAMPLES if self.dataset == "digits" else self.samples

    @property
    def test_samples(self) -> int:
        if self.dataset in REAL_SPLITS:
            return REAL_SPLITS[self.dataset][1]
        return max(1, round(self.total_samples * TEST_FRACTION))

    @property
    def train_samples(self) -> int:
        if self.dataset in REAL_SPLITS:
            return REAL_SPLITS[self.dataset][0]
        return self.total_samples - self.test_samples

    @property
    def updates_per_epoch(self) -> int:
        """Optimizer steps per epoch: ceil(N / effective batch), the last batch may be partial."""
        return math.ceil(self.train_samples / self.effective_batch_size)

    @property
    def planned_steps(self) -> int:
        bounds = [b for b in (self.max_steps,) if b is not None]
        if self.epochs is not None:
            bounds.append(self.epochs * self.updates_per_epoch)
        return min(bounds)

    # ----- validation -----
    def validated(self) -> tuple[CheckedRunConfig, list[str]]:
        """Check every field: (the config as a CheckedRunConfig, oversize batches clamped; a
        notice for each clamp). Raises ConfigError for the first invalid field. A config that is
        already a CheckedRunConfig comes back as it is (its notices were given where it was
        checked): a config is checked once, where it enters (a page, a link, the CLI, the API,
        a job's settings in a worker)."""
        cfg, notices = _checked(self)
        out = object.__new__(CheckedRunConfig)  # checked just now: not again by its __post_init__
        for f in dataclasses.fields(RunConfig):
            object.__setattr__(out, f.name, getattr(cfg, f.name))
        return out, notices

    def __eq__(self, other: object) -> bool:
        """Equal settings are equal configs, checked or not."""
        if not isinstance(other, RunConfig):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in dataclasses.fields(RunConfig))

    @property
    def batch_norm_1d(self) -> bool:
        """Whether the model normalises features over the batch alone (the MLP with BatchNorm:
        a one-sample batch cannot train). The CNN's BatchNorm also averages over positions."""
        return self.model == "mlp" and self.norm == "batch"

    @property
    def drops_lone_sample(self) -> bool:
        """Whether each epoch's last micro-batch would hold one sample on a BatchNorm MLP (the
        engine then leaves that sample out of the epoch)."""
        if not self.batch_norm_1d:
            return False
        last = self.train_samples % self.effective_batch_size or self.effective_batch_size
        return (last % self.batch_size or self.batch_size) == 1

    # ----- string form (query parameters, CLI) -----
    def to_params(self) -> dict[str, str]:
        """The fields that differ from the defaults, as strings (a shareable URL query)."""
        default = RunConfig()
        params = {
            f.name: _format(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        }
        if "max_steps" in params:  # from_params reads a lone step budget as "no epoch budget"
            params["epochs"] = _format(self.epochs)
        return params

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RunConfig:
        """Parse string values by field name; unknown names are errors. Does not validate ranges."""
        kinds = {f.name: f.type for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for name, raw in params.items():
            if name not in kinds:
                raise ConfigError(name, raw, "one of the settings " + ", ".join(kinds))
            values[name] = _parse(name, kinds[name], raw)
        if "max_steps" in values and "epochs" not in values:
            values["epochs"] = None  # a step budget alone replaces the default epoch budget
        return cls(**values)


@dataclass(frozen=True, eq=False)
class CheckedRunConfig(RunConfig):
    """A RunConfig whose every field has been checked, with oversize batches clamped: made by
    RunConfig.validated() alone, so code that takes one never checks it again. Made any other
    way — dataclasses.replace on one, say — it is a plain RunConfig: a changed config is a new
    one, checked where it enters."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "__class__", RunConfig)  # not made by validated(): unchecked

    def validated(self) -> tuple[CheckedRunConfig, list[str]]:
        return self, []

    def with_time_limit(self, seconds: float | None) -> CheckedRunConfig:
        """The same checked config under another time cap (None: none); only the cap is
        checked."""
        if seconds is not None:
            real_number("time_limit_s", seconds, 0.0, 86_400.0, low_open=True)
        out = object.__new__(CheckedRunConfig)
        for f in dataclasses.fields(RunConfig):
            object.__setattr__(out, f.name, getattr(self, f.name))
        object.__setattr__(out, "time_limit_s", seconds)
        return out


def _checked(cfg: RunConfig) -> tuple[RunConfig, list[str]]:
    """(cfg as a plain RunConfig with oversize batches clamped, a notice per clamp); raises
    ConfigError for the first invalid field."""
    cfg = RunConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(RunConfig)})
    _choice("dataset", cfg.dataset, DATASETS)
    _choice("model", cfg.model, MODELS)
    _choice("norm", cfg.norm, NORMS)
    _choice("optimizer", cfg.optimizer, OPTIMIZERS)
    _choice("device", cfg.device, DEVICES)
    if cfg.model == "cnn" and cfg.dataset not in IMAGE_DATASETS:
        raise ConfigError(
            "dataset", cfg.dataset, f"an image dataset for the CNN: {', '.join(IMAGE_DATASETS)}"
        )
    if cfg.model in ("transformer", "lstm") and cfg.dataset not in (*IMAGE_DATASETS, *SEQUENCE_DATASETS):
        raise ConfigError(
            "dataset",
            cfg.dataset,
            "an image dataset (read row by row) or "
            f"arithmetic for the {cfg.model}: " + ", ".join((*IMAGE_DATASETS, *SEQUENCE_DATASETS)),
        )
    if cfg.model == "gan" and cfg.dataset not in GAN_DATASETS:
        raise ConfigError(
            "dataset", cfg.dataset, "a one-channel image dataset for the GAN: " + ", ".join(GAN_DATASETS)
        )
    if cfg.dataset in SEQUENCE_DATASETS and cfg.model not in ("transformer", "lstm"):
        raise ConfigError("model", cfg.model, "transformer or lstm for the arithmetic task")
    if cfg.model == "transformer" and cfg.width % TRANSFORMER_HEADS:
        raise ConfigError(
            "width", cfg.width, f"a multiple of {TRANSFORMER_HEADS} for the transformer's heads"
        )
    whole_number("width", cfg.width, 1, 4096)
    whole_number("depth", cfg.depth, 1, 16)
    whole_number("batch_size", cfg.batch_size, 1, MAX_BATCH_SIZE)
    real_number("lr", cfg.lr, 0.0, 100.0, low_open=True)
    whole_number("accumulation_steps", cfg.accumulation_steps, 1, MAX_ACCUMULATION_STEPS)
    whole_number("warmup_steps", cfg.warmup_steps, 0, MAX_STEPS)
    if cfg.epochs is None and cfg.max_steps is None:
        raise ConfigError("epochs", None, "an epoch budget or max_steps (at least one)")
    if cfg.epochs is not None:
        whole_number("epochs", cfg.epochs, 1, MAX_EPOCHS)
    if cfg.max_steps is not None:
        whole_number("max_steps", cfg.max_steps, 1, MAX_STEPS)
    whole_number("seed", cfg.seed, 0, MAX_SEED)
    whole_number("eval_interval", cfg.eval_interval, 0, MAX_STEPS)
    whole_number("samples", cfg.samples, 20, MAX_SAMPLES)
    real_number("noise", cfg.noise, 0.0, 10.0)
    if cfg.time_limit_s is not None:
        real_number("time_limit_s", cfg.time_limit_s, 0.0, 86_400.0, low_open=True)

    notices: list[str] = []
    n_train = cfg.train_samples
    if cfg.batch_size > n_train:
        notices.append(
            f"Batch size {cfg.batch_size} is larger than the {n_train} training "
            f"samples; clamped to {n_train} (full-batch gradient descent)."
        )
        cfg = dataclasses.replace(cfg, batch_size=n_train)
    if cfg.effective_batch_size > n_train:
        k = math.ceil(n_train / cfg.batch_size)
        notices.append(
            f"Effective batch {cfg.effective_batch_size} is larger than the "
            f"{n_train} training samples; accumulation steps clamped to {k}."
        )
        cfg = dataclasses.replace(cfg, accumulation_steps=k)
    if cfg.batch_norm_1d and cfg.batch_size < 2:
        raise ConfigError(
            "batch_size",
            cfg.batch_size,
            "at least 2 with BatchNorm (norm "
            "batch): it normalises each feature over the batch, and one sample "
            "has no spread",
        )
    if cfg.drops_lone_sample:
        notices.append(
            "With BatchNorm, the one sample left over at the end of each epoch "
            f"({n_train:,} training samples in batches of {cfg.batch_size}) is "
            "dropped: a batch of one sample has no spread to normalise by."
        )
    return cfg, notices


MAX_QUERY_PARAMS = 32  # a lab link names at most every setting once (and the run)


def config_from_query(params: Mapping[str, Any]) -> tuple[RunConfig, str | None]:
    """A link's query parameters -> (validated config, None), or (the defaults, a message).

    Never raises: any URL a user can type gives the page a config to show. The message quotes at
    most QUOTE_CHARS of any name or value (and is plain text: the page escapes it).
    """
    extra = {k: v for k, v in params.items() if k not in ("run", *VIEW_PARAMS, *LAB_VIEW_PARAMS)}
    if len(extra) > MAX_QUERY_PARAMS:
        return RunConfig(), (
            f"This link has {len(extra):,} settings; a lab link has at most "
            f"{MAX_QUERY_PARAMS}. The defaults are shown instead."
        )
    try:
        cfg, _ = RunConfig.from_params(extra).validated()
    except ConfigError as exc:
        return RunConfig(), (
            f"This link's settings could not be used — {exc}. The defaults are shown instead."
        )
    return cfg, None


def parse_run_id(raw: Any) -> int | None:
    """A link's `run` parameter -> a job id, or None. ASCII digits only: '²' passes
    str.isdigit but not int(); old links' '<id>.<proof>' keep working as a plain id."""
    if isinstance(raw, (list, tuple)):
        raw = raw[-1] if raw else ""
    text = str(raw or "")[:40].partition(".")[0]
    if not text or len(text) > 12 or any(c not in "0123456789" for c in text):
        return None
    return int(text)


def _format(value: Any) -> str:
    return "none" if value is None else repr(value) if isinstance(value, float) else str(value)


def _parse(name: str, kind: str, raw: Any) -> Any:
    if isinstance(raw, (list, tuple)):  # a repeated URL parameter: the last one wins
        raw = raw[-1] if raw else ""
    text = str(raw).strip()
    if len(text) > 64:
        raise ConfigError(name, text[:64] + "…", "a value of at most 64 characters")
    if "None" in kind and text.lower() == "none":
        return None
    if not text:
        raise ConfigError(name, text, "a value, or none to leave it unset" if "None" in kind else "a value")
    if (kind.startswith("int") or kind.startswith("float")) and not number_text(text):
        raise ConfigError(name, text, "a number in ASCII digits")
    if kind.startswith("int"):
        try:
            as_float = float(text)
        except ValueError:
            raise ConfigError(name, text, "a whole number") from None
        if not as_float.is_integer():
            raise ConfigError(name, text, "a whole number")
        return int(as_float)
    if kind.startswith("float"):
        try:
            return float(text)
        except ValueError:
            raise ConfigError(name, text, "a number") from None
    return text


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(name, value, "one of " + ", ".join(allowed))


def sized(cfg: RunConfig, size: str) -> RunConfig:
    """cfg with the width and depth of a workload size preset (S, M, L, XL) for its model."""
    if size not in SIZES[cfg.model]:
        raise ConfigError("size", size, "one of " + ", ".join(SIZES[cfg.model]))
    width, depth = SIZES[cfg.model][size]
    return dataclasses.replace(cfg, width=width, depth=depth)
