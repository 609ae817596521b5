"""A model and data the user brings (bsdemo.api.Workload), torch-side: checked once up front,
then built fresh for every probe by `prepare` exactly where the lab builds its own, so the
sweep, the finder, fit-batch and the noise scale run on it through their one code path.

The user's model is never trained: each probe gets a fresh one (the factory's, or a deep copy
of the module given), so the finder leaves it as it found it. The data is a pool of samples
on the device, drawn once per size from the batch function (or the tensors given) and then
batched like the lab's datasets.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import signal
import threading
import traceback
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import torch
import torch.nn.functional as F

from bsdemo.config import TEST_FRACTION, ConfigError, RunConfig
from bsdemo.engine.data import Dataset
from bsdemo.engine.measure import resolve_device
from bsdemo.units import setting

CHECK_BATCHES = (3, 5)  # sizes the batch function is asked for up front: does it obey the size?
_ACTIVE: ContextVar[OwnWorkload | None] = ContextVar("bsdemo_own_workload", default=None)


def active() -> OwnWorkload | None:
    """The user's workload that `prepare` builds instead of the lab's model, if one is in use."""
    return _ACTIVE.get()


class ProbeTimeout(BaseException):
    """A run of the user's model went past its time limit (a hung step: an endless loop in the
    user's code). A BaseException, so that no `except Exception` on the way — the engine's
    own, which makes a failed step a result — takes it for the model's error."""


@contextlib.contextmanager
def using(workload: OwnWorkload) -> Iterator[OwnWorkload]:
    """Within the block, every run the engine prepares is the user's model on the user's data,
    each run watched by the workload's time limit (`parts` arms it; SIGALRM, so only from the
    main thread). The caller's torch random state is put back after (probes seed the
    generator)."""
    token = _ACTIVE.set(workload)
    watched = workload.timeout is not None and threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGALRM, workload.expired) if watched else None
    workload.watched = watched
    try:
        with kept_random_state():
            yield workload
    finally:
        if watched:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        workload.watched = False
        _ACTIVE.reset(token)


@contextlib.contextmanager
def kept_random_state() -> Iterator[None]:
    """torch's random state (CPU, and CUDA once it is initialised) as it was before the block:
    measuring the user's model must not move their own random stream."""
    state = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        torch.random.set_rng_state(state)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The lab's loss, the default for a model the user brings: cross-entropy of class logits
    (B, C) against (B,) labels, or of token logits (B, T, V) against (B, T) token ids."""
    if outputs.dim() > 2:
        return F.cross_entropy(outputs.flatten(0, 1), targets.flatten())
    return F.cross_entropy(outputs, targets)


def failure(exc: BaseException, batch: int) -> str:
    """One line for the user's code failing during a step of `batch` samples: what raised, and
    where in their code (the innermost frame outside torch and bsdemo)."""
    where = ""
    ours = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not frame.filename.startswith(ours):
            where = f" (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} in {frame.name})"
            break
    return f"Your model failed at batch {batch}: {type(exc).__name__}: {first_line(exc, 300)}{where}"


def _optimizer_kind(optimizer: torch.optim.Optimizer) -> str:
    """The lab's name for the optimizer's state size: sgd (none), momentum (1×), adam (2×,
    also any other: the state as allocated is measured after the first step anyway)."""
    if isinstance(optimizer, torch.optim.SGD):
        return "momentum" if any(g.get("momentum", 0) for g in optimizer.param_groups) else "sgd"
    return "adamw" if isinstance(optimizer, torch.optim.AdamW) else "adam"


def _pair(value: Any, what: str, field: str) -> tuple[torch.Tensor, torch.Tensor]:
    if not (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, torch.Tensor) for v in value)
    ):
        raise ConfigError(
            field,
            _describe(value),
            f"{what} must be (inputs, targets): two "
            "torch tensors with the samples along their first dimension",
        )
    x, y = value
    if x.dim() == 0 or y.dim() == 0 or len(x) != len(y):
        raise ConfigError(
            field,
            f"shapes {tuple(x.shape)} and {tuple(y.shape)}",
            f"{what}: inputs and targets with the same number of samples along their first dimension",
        )
    return x, y


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of " + ", ".join(_describe(v) for v in value[:3])
    return f"a {type(value).__name__}"


def first_line(exc: BaseException, limit: int) -> str:
    """The first line of an exception's message, cut to `limit` characters."""
    return (str(exc).strip().splitlines() or [""])[0][:limit]


def raised(exc: BaseException, limit: int = 200) -> str:
    """The user's code failing, in one line: "it raised TypeName: its message's first line"."""
    return f"it raised {type(exc).__name__}: {first_line(exc, limit)}"


class OwnWorkload:
    """The user's model, data, loss and optimizer, checked: `checked` runs one small step up
    front so that a broken piece is named before any long work; `parts(cfg)` builds a fresh
    model, the data pool and the optimizer for one probe."""

    def __init__(self, workload: Any, device: str = "auto"):
        self.name = getattr(workload, "name", None) or "your model"
        self.timeout = getattr(workload, "probe_timeout_s", None)
        if self.timeout is not None and (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, int | float)
            or not 0 < self.timeout <= 7 * 86400
        ):
            raise ConfigError(
                "probe_timeout_s",
                self.timeout,
                "seconds, more than 0 and at most a week, or None for no limit",
            )
        self.watched, self.running = False, None  # using() watches; the batch of the run now
        self.device = resolve_device(device)
        model = workload.model
        if isinstance(model, torch.nn.Module):
            self.template, self.factory = model, None
        elif callable(model):
            self.template, self.factory = None, model
        else:
            raise ConfigError(
                "model",
                _describe(model),
                "a torch.nn.Module, or a function with no arguments that returns one",
            )
        if (workload.batch is None) == (workload.data is None):
            raise ConfigError(
                "batch",
                "both" if workload.batch is not None else "neither",
                "exactly one of batch (a function of the batch size) or data ((inputs, targets) tensors)",
            )
        self.batch = workload.batch
        self.data = _pair(workload.data, "data", "data") if workload.data is not None else None
        if self.batch is not None and not callable(self.batch):
            raise ConfigError(
                "batch", _describe(self.batch), "a function of the batch size returning (inputs, targets)"
            )
        self.user_loss = workload.loss or cross_entropy
        if not callable(self.user_loss):
            raise ConfigError(
                "loss", _describe(self.user_loss), "a function (outputs, targets) -> a scalar tensor"
            )
        self.optimizer = workload.optimizer or (lambda params: torch.optim.SGD(params, lr=0.05))
        if not callable(self.optimizer):
            raise ConfigError(
                "optimizer",
                _describe(self.optimizer),
                "a function of the parameters returning a torch.optim.Optimizer",
            )
        self.kind, self.lr = "sgd", 0.05
        self._pools: dict[int, Dataset] = {}

    @classmethod
    def checked(cls, workload: Any, device: str = "auto") -> OwnWorkload:
        """The workload, each piece tried once on a small batch on the device (a copy of the
        model, two optimizer steps); a ConfigError names the first piece that is wrong."""
        own = cls(workload, device)
        with kept_random_state():
            own.check()
        return own

    def fresh_model(self) -> torch.nn.Module:
        if self.factory is None:
            return copy.deepcopy(self.template)
        try:
            model = self.factory()
        except Exception as exc:  # noqa: BLE001 - the user's code: named, not a traceback
            raise ConfigError(
                "model",
                getattr(self.factory, "__name__", "the factory"),
                f"a factory that returns a torch.nn.Module; {raised(exc)}",
            ) from None
        if not isinstance(model, torch.nn.Module):
            raise ConfigError("model", _describe(model), "a factory that returns a torch.nn.Module")
        return model

    def draw(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """n samples on the device: the batch function's, or the tensors given (cycled)."""
        if self.data is not None:
            x, y = self.data
            idx = torch.arange(n) % len(y)
            return x[idx].to(self.device), y[idx].to(self.device)
        try:
            got = self.batch(n)
        except Exception as exc:  # noqa: BLE001 - the user's code
            raise ConfigError(
                "batch",
                f"batch({n})",
                f"a function of the batch size that returns (inputs, targets); {raised(exc)}",
            ) from None
        x, y = _pair(got, f"batch({n})", "batch")
        if len(y) != n:
            raise ConfigError(
                "batch",
                f"batch({n}) -> {len(y)} samples",
                "a function that "
                "returns exactly the number of samples asked for (the batch size "
                "is what is measured)",
            )
        return x.to(self.device), y.to(self.device)

    def loss(self, outputs, targets):
        """The user's loss, each call re-arming the watchdog: every step (a step calls it once)
        gets the whole limit, from one loss to the next."""
        self.arm()
        return self.user_loss(outputs, targets)

    def arm(self) -> None:
        if self.watched:
            signal.setitimer(signal.ITIMER_REAL, self.timeout)

    def expired(self, signum, frame) -> None:
        """SIGALRM's handler: the run now going took longer than the limit."""
        raise ProbeTimeout(
            f"a step of {self.name} at batch {self.running} took longer than "
            f"{setting(self.timeout)} s, its time limit: stopped as hung (look "
            "for an endless loop in the model, data or loss code)"
        )

    def check(self) -> None:
        for n in CHECK_BATCHES:
            x, y = self.draw(n)
        model = self.fresh_model().to(self.device)
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ConfigError(
                "model", type(model).__name__, "a model with trainable parameters (requires_grad)"
            )
        try:
            optimizer = self.optimizer(model.parameters())
        except Exception as exc:  # noqa: BLE001 - the user's code
            raise ConfigError(
                "optimizer",
                getattr(self.optimizer, "__name__", "the factory"),
                f"a function of the parameters returning a torch.optim.Optimizer; {raised(exc)}",
            ) from None
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ConfigError(
                "optimizer",
                _describe(optimizer),
                "a function of the parameters returning a torch.optim.Optimizer",
            )
        for _ in range(2):  # the second step runs with the optimizer's state allocated
            try:
                outputs = model(x)
            except Exception as exc:  # noqa: BLE001 - the user's code
                raise ConfigError(
                    "model",
                    f"model(inputs of shape {tuple(x.shape)})",
                    f"a forward pass that runs on a batch; {raised(exc)}",
                ) from None
            try:
                loss = self.loss(outputs, y)
            except Exception as exc:  # noqa: BLE001 - the user's code
                raise ConfigError(
                    "loss",
                    f"loss({_describe(outputs)}, {_describe(y)})",
                    f"a function (outputs, targets) -> a scalar tensor; {raised(exc)}",
                ) from None
            if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad):
                raise ConfigError(
                    "loss",
                    _describe(loss),
                    "a scalar tensor that depends on the model's outputs (so that it has a gradient)",
                )
            if not math.isfinite(loss.item()):
                raise ConfigError(
                    "loss", f"{loss.item()} on the untrained model", "a finite loss on a batch of the data"
                )
            optimizer.zero_grad(set_to_none=True)
            try:
                loss.backward()
                optimizer.step()
            except Exception as exc:  # noqa: BLE001 - the user's code
                raise ConfigError(
                    "model",
                    "the backward pass and optimizer step",
                    f"a loss whose backward and step run; {raised(exc)}",
                ) from None
        self.kind = _optimizer_kind(optimizer)
        self.lr = float(optimizer.param_groups[0]["lr"])

    def config(self, samples: int, seed: int = 0, device: str = "auto") -> RunConfig:
        """The settings a probe of the user's model runs with: its optimizer's kind and first
        learning rate (for the memory prediction and the records; the user's optimizer keeps its
        own), a data pool of at least `samples`, no warm-up, one epoch (each measurement sets
        its own steps)."""
        total = max(20, math.ceil(samples / (1 - TEST_FRACTION)) + 2)
        return RunConfig(
            dataset="synthetic",
            model="mlp",
            optimizer=self.kind,
            lr=self.lr,
            samples=total,
            epochs=1,
            max_steps=None,
            seed=seed,
            device=device,
            warmup_steps=0,
        )

    def pool(self, n: int) -> Dataset:
        """n samples on the device, drawn once and kept (a sweep prepares many runs)."""
        if n not in self._pools:
            x, y = self.draw(n)
            self._pools = {n: Dataset(x, y, x[:0], y[:0], 0)}  # the last size only
        return self._pools[n]

    def parts(self, cfg: RunConfig) -> tuple:
        """(cfg validated, notices, device, data, model, optimizer) of the run cfg describes (its
        batch, accumulation, seed, steps) on the user's model: `steps.prepare` makes it a run."""
        cfg, notices = cfg.validated()
        self.running = cfg.batch_size
        self.arm()  # the run's set-up and its first step within the limit
        torch.manual_seed(cfg.seed)
        model = self.fresh_model().to(self.device)
        return (
            cfg,
            notices,
            self.device,
            self.pool(cfg.train_samples),
            model,
            self.optimizer(model.parameters()),
        )


def lab_parts(cfg: RunConfig) -> tuple:
    """(model factory, (inputs, targets), loss, optimizer factory) of the lab's own model,
    training split and optimizer that cfg names: what bsdemo.api.lab_workload makes a
    Workload of."""
    from bsdemo.engine.data import load_dataset
    from bsdemo.engine.models import build_model, make_optimizer

    cfg, _ = cfg.validated()
    data = load_dataset(cfg, torch.device("cpu"))
    return (
        lambda: build_model(cfg, data.input_shape, data.n_classes),
        (data.x_train, data.y_train),
        cross_entropy,
        lambda params: make_optimizer(cfg, params),
    )
