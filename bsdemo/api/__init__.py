"""The lab's measurements on a model and data you bring: a Python API for a terminal or a notebook.

    from bsdemo.api import Workload, find_batch_size, sweep

    work = Workload(model=make_model, batch=make_batch, loss=my_loss,
                    optimizer=lambda params: torch.optim.AdamW(params, lr=3e-4))
    found = find_batch_size(work, memory_budget="2GiB", target_effective_batch=512)
    print(found.summary)
    sweep(work, [8, 32, 128, 512]).figure().show()

Each function runs the same engine the lab's pages run (the sweep's rounds and clocks, the
finder's two probes and verified prediction, fit-batch's techniques, the gradient noise
scale), in this process, on your model: a fresh copy for every probe, so your model is left as
it was, and the torch random state is put back after. Results are dataclasses with the raw
records, `to_dict()`, `to_frame()` (pandas) and the pages' Plotly figures.

Importing this module imports neither torch nor Streamlit: torch loads when a function runs.
A broken piece (a factory that raises, a batch function that ignores the size, a loss that is
NaN, ...) is a `bsdemo.errors.ConfigError` naming it, raised before any long work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bsdemo.api.results import FindResult, FitBatchResult, NoiseResult, ProfileResult, SweepResult
from bsdemo.errors import ConfigError
from bsdemo.recipes import finder_summary
from bsdemo.tunables import SWEEP_MIN_TIMED_S, SWEEP_ROUNDS, SWEEP_TIMED_STEPS, SWEEP_WARMUP_STEPS
from bsdemo.units import parse_bytes

__all__ = [
    "FindResult",
    "FitBatchResult",
    "NoiseResult",
    "ProfileResult",
    "SweepResult",
    "Workload",
    "find_batch_size",
    "fit_batch",
    "lab_workload",
    "noise_scale",
    "profile",
    "sweep",
]

DEFAULT_SIZES = (8, 16, 32, 64, 128, 256, 512)
DEFAULT_MAX_BATCH = 4096  # the finder's ceiling on your model: its data pool holds this many
POOL = 1024  # samples fit-batch steps on and the noise scale's full gradient is taken over


@dataclass
class Workload:
    """What the lab measures on: your model, your data, your loss and your optimizer.

    model: a torch.nn.Module (copied for every probe, never trained) or a function with no
        arguments that returns a fresh one.
    batch: a function of a batch size n returning (inputs, targets) with exactly n samples along
        the first dimension; or
    data: (inputs, targets) tensors that batches are drawn from (repeated past their length).
    loss: (outputs, targets) -> a scalar tensor, the mean over the batch; by default the lab's
        cross-entropy (class logits (B, C) against labels (B,), or token logits (B, T, V)
        against token ids (B, T)).
    optimizer: a function of the parameters returning a torch.optim.Optimizer; by default
        SGD with lr 0.05, the lab's. It keeps its own learning rates.
    name: what results call it.
    probe_timeout_s: the most seconds one run of your model (a probe: its few steps) may take
        before it is stopped as hung (an endless loop in your code), with a TimeoutError
        naming the batch; None: no limit. Watched only from the main thread (a script, a
        notebook's cell).
    Checkpointing (fit_batch) needs to know the model's blocks: a torch.nn.Sequential's layers,
    or a `segments()` method returning (stem, blocks, head) with
    model(x) == head(blocks[-1](... blocks[0](stem(x)))).
    """

    model: Any
    batch: Callable[[int], tuple] | None = None
    data: tuple | None = None
    loss: Callable | None = None
    optimizer: Callable | None = None
    name: str = "your model"
    probe_timeout_s: float | None = 600.0


def lab_workload(cfg) -> Workload:
    """The lab's own model, training data and optimizer of a bsdemo.config.RunConfig as a
    Workload (what a page runs): a second door to the pages' numbers, held to them by the
    tests."""
    from bsdemo.engine.own import lab_parts

    model, data, loss, optimizer = lab_parts(cfg)
    return Workload(
        model=model, data=data, loss=loss, optimizer=optimizer, name=f"the lab's {cfg.model} on {cfg.dataset}"
    )


def _own(workload: Workload, device: str):
    """The workload checked on the device (imports torch)."""
    if not isinstance(workload, Workload) and not all(
        hasattr(workload, k) for k in ("model", "batch", "data", "loss", "optimizer")
    ):
        raise ConfigError("workload", type(workload).__name__, "a bsdemo.api.Workload")
    from bsdemo.engine.own import OwnWorkload

    return OwnWorkload.checked(workload, device)


def _budget(value: int | str | None, field_name: str = "memory_budget") -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    if isinstance(value, str):
        return parse_bytes(value, field_name)
    raise ConfigError(field_name, value, "bytes (a positive whole number) or a size such as '2GiB'")


def _sizes(batch_sizes: Sequence[int]) -> list[int]:
    sizes = list(batch_sizes)
    if not sizes or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in sizes):
        raise ConfigError("batch_sizes", batch_sizes, "positive whole numbers")
    return sizes


def _drain(own, events: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    """The engine's records, run with the user's workload in place of the lab's model; the
    config each carries names the user's model, not the lab's placeholder."""
    from bsdemo.engine.own import ProbeTimeout, using

    try:
        with using(own):
            records = list(events)
    except ProbeTimeout as exc:  # out of the engine as a BaseException: an error here
        raise TimeoutError(str(exc)) from None
    for r in records:
        if "config" in r:
            r["config"] = {"model": own.name, "optimizer": own.kind, "lr": own.lr, "device": str(own.device)}
    return records


def sweep(
    workload: Workload,
    batch_sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    memory_budget: int | str | None = None,
    device: str = "auto",
    seed: int = 0,
    rounds: int = SWEEP_ROUNDS,
    warmup_steps: int = SWEEP_WARMUP_STEPS,
    timed_steps: int = SWEEP_TIMED_STEPS,
    min_timed_s: float = SWEEP_MIN_TIMED_S,
    continue_after_oom: bool = False,
) -> SweepResult:
    """Samples/s, step time and memory per batch size, measured in rounds in a shuffled order
    (the Throughput page's sweep), with the fits t(B) = t0 + t1·B and M(B) = M0 + m·B and the
    throughput knee. memory_budget (bytes or '2GiB'): a CUDA allocator cap, or on the CPU a
    simulated out-of-memory past it."""
    sizes, budget = _sizes(batch_sizes), _budget(memory_budget)
    own = _own(workload, device)
    from bsdemo.engine.sweep import sweep as engine_sweep
    from bsdemo.recipes import throughput_verdict

    cfg = own.config(max(sizes), seed, device)
    records = _drain(
        own,
        engine_sweep(
            cfg,
            sizes,
            warmup_steps=warmup_steps,
            timed_steps=timed_steps,
            min_timed_s=min_timed_s,
            rounds=rounds,
            memory_budget_bytes=budget,
            continue_after_oom=continue_after_oom,
        ),
    )
    last = {r["batch_size"]: r for r in records if r["kind"] == "sweep_point"}
    points = [last[b] for b in sizes]
    end = next(r for r in records if r["kind"] == "sweep_end")
    return SweepResult(records, throughput_verdict(end, points, end.get("peak_source")), points, end)


def find_batch_size(
    workload: Workload,
    *,
    memory_budget: int | str | None = None,
    margin: float = 0.10,
    target_effective_batch: int | None = None,
    reference_batch: int | None = None,
    reference_lr: float | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    device: str = "auto",
    seed: int = 0,
) -> FindResult:
    """The largest batch that fits memory_budget (bytes or '2GiB'; None: the device's own memory,
    which the CPU does not have) with `margin` kept free, found in a few real probes: two small
    ones fit M(B) = M0 + m·B, the prediction is run, a bisection follows only if it fails. It
    never returns a size it did not run. With target_effective_batch: micro-batch × accumulation
    steps making it exactly; with reference_batch and reference_lr, the learning rate for the
    effective batch by the linear and square-root rules. Without a target, the throughput knee
    (measured) where it is smaller than the largest batch."""
    budget = _budget(memory_budget)
    own = _own(workload, device)
    from bsdemo.engine.finder import find_batch_size as engine_find

    if budget is None and own.device.type == "cpu":
        raise ConfigError(
            "memory_budget",
            None,
            "a budget in bytes or a size such as '2GiB' on "
            "the CPU (it has no memory limit of its own to find)",
        )
    cfg = own.config(max_batch, seed, device)
    records = _drain(
        own,
        engine_find(
            cfg,
            memory_budget_bytes=budget,
            margin=margin,
            target_effective_batch=target_effective_batch,
            reference_batch=reference_batch,
            reference_lr=reference_lr if reference_lr is not None else own.lr,
            max_batch=max_batch,
        ),
    )
    result = next(r for r in records if r["kind"] == "find_result")
    probes = [r for r in records if r["kind"] == "find_probe"]
    return FindResult(records, finder_summary(result), probes, result)


def fit_batch(
    workload: Workload,
    memory_budget: int | str,
    *,
    techniques: Sequence[str] | None = None,
    accumulation: int = 4,
    max_batch: int = 65536,
    pool: int = POOL,
    device: str = "auto",
    seed: int = 0,
) -> FitBatchResult:
    """Under one memory budget, the largest batch each technique lets a training step fit and
    its samples/s: fp32, bf16 autocast, fp16 with a scaler (CUDA), activation checkpointing
    (where the model's blocks are known: see Workload), bf16+checkpointing, accumulation. Each
    largest batch is predicted from two probes and verified by a real step. `pool`: samples
    drawn from your data (batches repeat them past that)."""
    budget = _budget(memory_budget)
    if budget is None:
        raise ConfigError("memory_budget", None, "a budget in bytes or a size such as '2GiB'")
    own = _own(workload, device)
    from bsdemo.engine.fitbatch import fit_batch as engine_fit
    from bsdemo.recipes import fit_verdict

    cfg = own.config(pool, seed, device)
    records = _drain(
        own, engine_fit(cfg, budget, techniques=techniques, accumulation=accumulation, max_batch=max_batch)
    )
    rows = [r for r in records if r["kind"] == "fit_batch_result"]
    end = next(r for r in records if r["kind"] == "fit_batch_end")
    text = fit_verdict(rows, budget, own.device.type)
    return FitBatchResult(records, text or end["message"], rows, end, budget)


def noise_scale(
    workload: Workload,
    batch_sizes: Sequence[int] = (1, 4, 16, 64, 256),
    *,
    draws: int = 32,
    after_steps: int = 0,
    pool: int = POOL,
    device: str = "auto",
    seed: int = 0,
) -> NoiseResult:
    """The gradient noise scale B_simple = tr(Σ)/|G|² of your model on `pool` samples of your
    data (G their full gradient), with its 16–84 % range, and the variance of mini-batch
    gradients against the batch; at initialisation, or after `after_steps` optimizer steps."""
    sizes = _sizes(batch_sizes)
    own = _own(workload, device)
    from bsdemo.engine.noise import noise_measure
    from bsdemo.recipes.noise import noise_verdict

    records = _drain(
        own, noise_measure(own.config(pool, seed, device), sizes, draws=draws, after_steps=after_steps)
    )
    result = next(r for r in records if r["kind"] == "noise_result")
    text = noise_verdict(result)
    return NoiseResult(
        records, text or result["message"], [r for r in records if r["kind"] == "noise_point"], result
    )


def profile(
    workload: Workload,
    batch_sizes: Sequence[int] = (8, 512),
    *,
    steps: int = 10,
    cut: bool = True,
    trace_dir: str | None = None,
    device: str = "auto",
    seed: int = 0,
) -> ProfileResult:
    """Where a step's time goes at a small and a large batch (the Throughput page's "Inside one
    step"): `steps` steps under torch.profiler per batch, with unprofiled steps around them
    (profiled steps are never a throughput); the step split into time that stays fixed as the
    batch grows and time that grows with it; with `cut`, the step with its fixed cost cut
    (torch.compile on a CPU, CUDA graphs on a GPU) against eager. `trace_dir`: each batch's
    Chrome/Perfetto trace written there."""
    sizes = _sizes(batch_sizes)
    own = _own(workload, device)
    from bsdemo.engine.profile import profile_steps
    from bsdemo.recipes.profile import profile_verdict

    cfg = own.config(max(sizes), seed, device)
    records = _drain(own, profile_steps(cfg, sizes, steps=steps, cut=cut, trace_dir=trace_dir))
    for r in records:  # the trace travels as a file (trace_dir), not inside the result
        r.pop("trace_gz_b64", None)
    points = [r for r in records if r["kind"] == "profile_point"]
    cuts = [r for r in records if r["kind"] == "cut_point"]
    end = next(r for r in records if r["kind"] == "profile_end")
    return ProfileResult(records, profile_verdict(points, cuts, end), points, cuts, end)
