"""One training step of a fit-batch technique on a batch, with its memory and its time (`Stepper`),
and a model's blocks, the pieces checkpointing recomputes (`segments`, `own_segments`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from bsdemo.config import RunConfig
from bsdemo.engine.measure import step_clock
from bsdemo.engine.memory import SavedActivations, tensor_bytes
from bsdemo.engine.steps import prepare
from bsdemo.footprint import expected_optimizer_state_bytes


def own_segments(model: torch.nn.Module) -> tuple[Callable, list, Callable] | None:
    """(stem, blocks, head) of a model the user brought: its own segments() method, or a
    torch.nn.Sequential's layers as blocks; None where neither says where its blocks are
    (checkpointing is then not offered)."""
    if callable(getattr(model, "segments", None)):
        stem, blocks, head = model.segments()
        return stem, list(blocks), head
    if isinstance(model, torch.nn.Sequential) and len(model) > 1:
        return (lambda x: x), list(model), (lambda x: x)
    return None


def _own_loss(loss_fn: Callable) -> Callable:
    """The user's loss on outputs made fp32 (as _loss does under autocast)."""
    return lambda out, y: loss_fn(out.float() if out.is_floating_point() else out, y)


def segments(model: torch.nn.Module) -> tuple[Callable, list[torch.nn.Module], Callable]:
    """(stem, blocks, head) with model(x) == head(blocks[-1](...blocks[0](stem(x)))): the
    pieces checkpointing recomputes (the MLP's hidden layers, the CNN's conv blocks, the
    Transformer's blocks)."""
    if hasattr(model, "net"):  # MLP: Flatten, depth x (Linear, norm, ReLU), Linear
        layers = list(model.net)
        blocks = [torch.nn.Sequential(*layers[i : i + 3]) for i in range(1, len(layers) - 1, 3)]
        return layers[0], blocks, layers[-1]
    if hasattr(model, "features"):  # CNN: conv blocks, then Flatten + Linear
        blocks, current = [], []
        for layer in model.features:
            if isinstance(layer, torch.nn.Conv2d) and current:
                blocks.append(torch.nn.Sequential(*current))
                current = []
            current.append(layer)
        blocks.append(torch.nn.Sequential(*current))
        return (lambda x: x), blocks, model.head
    return model.embed, list(model.blocks), model.read  # TinyTransformer


def _loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if logits.dim() > 2:
        logits, y = logits.flatten(0, 1), y.flatten()
    return F.cross_entropy(logits.float(), y)


class Stepper:
    """One training step of a technique on a batch, with its memory (accounted, or the CUDA
    allocator's peak) and its time."""

    def __init__(self, cfg: RunConfig):
        self.run = prepare(cfg)
        self.model, self.device = self.run.model, self.run.device
        # a timed step by the training thread's CPU time where it does all the work (a one-thread
        # CPU: other programs on the machine cannot lengthen it), else the wall clock
        self.tick, self.clock = step_clock(self.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.param_bytes = param_bytes = tensor_bytes(self.params)
        self.fixed = 2 * param_bytes + expected_optimizer_state_bytes(cfg.optimizer, param_bytes)
        own = self.run.loss is not None  # a model the user brought: its loss, its blocks if any
        self.loss = _own_loss(self.run.loss) if own else _loss
        parts = own_segments(self.model) if own else segments(self.model)
        self.checkpointable = parts is not None
        self.stem, self.blocks, self.head = parts or (None, [], None)
        self.scaler = torch.amp.GradScaler("cuda") if self.device.type == "cuda" else None

    def _autocast(self, technique: str):
        if technique.startswith("bf16"):
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        if technique == "fp16":
            return torch.autocast("cuda", dtype=torch.float16)
        return contextlib.nullcontext()

    def _forward(self, x: torch.Tensor, technique: str) -> torch.Tensor:
        if "checkpointing" not in technique:
            return self.model(x)
        h = self.stem(x)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=False)
        return self.head(h)

    def _per_block(self, x: torch.Tensor, technique: str) -> tuple[list[int], int]:
        """(the bytes each block saves when it runs normally, the bytes of all block inputs):
        a checkpoint keeps only its block's input, and the backward holds one block's own
        activations at a time while it recomputes it."""
        saved_by_block, inputs = [], 0
        with torch.no_grad():
            h = self.stem(x)
        for block in self.blocks:
            inputs += h.numel() * h.element_size()
            h = h.detach().requires_grad_(h.is_floating_point())
            with self._autocast(technique), SavedActivations(self.params) as saved:
                out = block(h)
            saved_by_block.append(saved.bytes)
            h = out.detach()
        return saved_by_block, inputs

    def _checkpointed_bytes(self, x: torch.Tensor, technique: str) -> int:
        """What a checkpointed step holds: a plain forward's saved bytes, less the blocks' own
        activations, plus every block's input and the largest block's activations. (Counted
        from a plain forward: the saved-tensor hooks cannot be trusted to see inside a
        checkpoint, or not to.) On the CPU only; not part of the step's time."""
        with self._autocast(technique), SavedActivations(self.params) as plain:
            self.model(x)
        per_block, inputs = self._per_block(x, technique)
        # the workspace as the engine counts it (bsdemo.engine.memory.MemoryBook): the largest
        # saved tensor, the size of the gradient buffer the backward allocates for it
        return plain.bytes - sum(per_block) + inputs + max(per_block) + plain.largest

    def step(
        self, batch: int, technique: str, accumulation: int = 1, memory: bool = True
    ) -> tuple[int | None, float, float]:
        """(peak bytes, seconds by self.clock, loss) of one optimizer step of `accumulation` micro-batches;
        memory=False (a timed step) leaves the peak uncounted (None on the CPU)."""
        x, y = self.run.data.x_train, self.run.data.y_train
        idx = torch.arange(batch, device=x.device) % len(y)
        cuda = self.device.type == "cuda"
        checkpointed = "checkpointing" in technique
        # counted from its parts with a forward of its own: only when the peak is wanted
        held = self._checkpointed_bytes(x[idx], technique) if checkpointed and not cuda and memory else 0
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = self.tick()
        total = 0.0
        self.model.zero_grad(set_to_none=True)
        for _ in range(accumulation):
            with self._autocast(technique), SavedActivations(self.params) as saved:
                loss = self.loss(self._forward(x[idx], technique), y[idx]) / accumulation
            if not checkpointed:  # saved activations and workspace, as the engine counts them
                held = max(held, saved.bytes + saved.largest)
            if technique == "fp16":
                self.scaler.scale(loss).backward()
            else:
                loss.backward()
            total += loss.item()
        if cuda:
            torch.cuda.synchronize()
        seconds = self.tick() - start
        self.model.zero_grad(set_to_none=True)
        peak = torch.cuda.max_memory_allocated() if cuda else self.fixed + held if memory else None
        return peak if peak is None else int(peak), seconds, total

    def allocator_peak(self, batch: int, technique: str, accumulation: int = 1) -> int | None:
        """On the CPU: the real peak of one step — the most bytes torch's CPU allocator held above
        the step's start (gradients, saved activations, temporaries, recomputation), read from
        the profiler's memory events — plus the parameters and the optimizer state that were
        there before it. None on CUDA (its allocator's own peak is the step's memory there) or
        where the profiler's events cannot be read."""
        if self.device.type == "cuda":
            return None
        try:
            from torch.profiler import ProfilerActivity, profile

            with _stderr_muted(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                self.step(batch, technique, accumulation, memory=False)
            moves = sorted(
                (e.start_ns(), e.nbytes())
                for e in prof.profiler.kineto_results.events()
                if e.name() == "[memory]"
            )
        except Exception:  # noqa: BLE001 - a profiler without memory events: not measured
            return None
        held = top = 0
        for _, change in moves:
            held += change
            top = max(top, held)
        return self.fixed - self.param_bytes + top  # the gradients are in `top`


@contextlib.contextmanager
def _stderr_muted():
    """The profiler's C++ side prints a line to stderr (fd 2) at each start and stop: not for
    the reader of a measurement's output."""
    try:
        saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    except OSError:
        yield
        return
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
