"""The batch-size finder: predict from a few probes, then verify — it never returns a size it
did not run.

1. Probe two small batches with full training steps and fit memory M(B) = M0 + m·B (if the
   larger fails, half the smaller is the fit's second point).
2. Predict the largest batch under budget × (1 − margin) and run it.
3. If that fails, bisect between the largest size that ran and the prediction.
Doubling finders take about log2(B_max) probes plus a bisection; this takes three or four.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Generator, Iterator
from typing import Any

from bsdemo.config import MAX_BATCH_SIZE, RunConfig
from bsdemo.engine.own import active
from bsdemo.engine.sweep import probe, throughput_in_rounds
from bsdemo.engine.train import check_budget, prepare
from bsdemo.fits import linear_fit
from bsdemo.jobkinds import sweep_config
from bsdemo.tunables import (
    FIND_BISECT_TOLERANCE,
    FIND_PROBES,
    FIND_THROUGHPUT_SIZES,
    FIND_THROUGHPUT_STEPS,
    FIND_TIMED_STEPS,
    FIND_WARMUP_STEPS,
)
from bsdemo.units import format_bytes, percent


class _Stopped(Exception):
    """should_stop() said stop between two probes."""


class _Ended(Exception):
    """A probe's loss diverged (NaN or inf): memory says nothing about a run that cannot train,
    so the search ends and says why."""

    def __init__(self, point: dict[str, Any], tested: dict[int, dict[str, Any]]):
        super().__init__(point.get("message"))
        self.point, self.tested = point, tested


OUTCOMES = {"diverged": "diverged"}  # a probe's status that ends the search -> its outcome


def find_batch_size(cfg: RunConfig, **kwargs) -> Iterator[dict[str, Any]]:
    """Yield one find_probe per real run, then find_result (none when it was stopped). A probe
    whose loss diverged ends the search: its result has no batch and says so ("at batch 64 the
    run diverged: …", outcome "diverged"), never "does not fit"."""
    try:
        yield from _find(cfg, **kwargs)
    except _Stopped:
        return
    except _Ended as ended:
        p = ended.point
        yield p
        # the run's own message ("Diverged at step 2: loss not a number … Lower the lr …")
        why = (p.get("message") or "").removeprefix("Diverged ").strip()
        yield _result(
            None,
            1,
            ended.tested,
            None,
            margin=kwargs.get("margin", 0.10),
            knee=None,
            reference_batch=None,
            reference_lr=None,
            note=f"At batch {p['batch_size']} the run {OUTCOMES[p['status']]} "
            f"{why or '.'} The search stopped there: memory says nothing about a "
            "run that cannot train.",
        ) | {"outcome": p["status"], "failed_at_batch": p["batch_size"]}


class _Probes:
    """The batch sizes run so far and how each went; `run` measures one more, or raises
    _Stopped when should_stop() says so."""

    def __init__(
        self,
        cfg: RunConfig,
        warmup_steps: int,
        timed_steps: int,
        budget: int | None,
        should_stop: Callable[[], bool] | None,
    ):
        self.cfg, self.warmup_steps, self.timed_steps = cfg, warmup_steps, timed_steps
        self.budget, self.should_stop = budget, should_stop
        self.tested: dict[int, dict[str, Any]] = {}
        self.device: dict[str, Any] | None = None
        self.usable: float | None = None  # the memory the margin leaves, once known

    def run(self, b: int, reason: str) -> dict[str, Any]:
        if self.should_stop is not None and self.should_stop():
            raise _Stopped
        # a probe measures memory: its few steps need no minimum duration
        point, self.device = probe(
            self.cfg, b, self.warmup_steps, self.timed_steps, self.budget, self.should_stop
        )
        if point["status"] == "cancelled":
            raise _Stopped
        point = dict(point, kind="find_probe", reason=reason, probe=len(self.tested) + 1)
        self.tested[b] = point
        if point["status"] in OUTCOMES:
            raise _Ended(point, self.tested)
        return point

    def ok(self) -> list[int]:
        return sorted(b for b, p in self.tested.items() if p["status"] == "ok")

    def failed_at_or_below(self, b: int) -> bool:
        return any(p["status"] == "oom" and q <= b for q, p in self.tested.items())

    def safe(self, b: int) -> bool:
        """Ran, and its measured peak leaves the margin free."""
        p = self.tested[b]
        return p["status"] == "ok" and (
            self.usable is None or p["peak_memory_bytes"] is None or p["peak_memory_bytes"] <= self.usable
        )


def _find(
    cfg: RunConfig,
    *,
    memory_budget_bytes: int | None = None,
    margin: float = 0.10,
    target_effective_batch: int | None = None,
    reference_batch: int | None = None,
    reference_lr: float | None = None,
    warmup_steps: int = FIND_WARMUP_STEPS,
    timed_steps: int = FIND_TIMED_STEPS,
    max_batch: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield one find_probe per real run, then find_result. When should_stop() says so (Stop,
    the job's time cap) it ends between two steps, without a result: it never recommends a
    batch it did not finish checking."""
    cfg, _ = cfg.validated()
    if max_batch is not None and max_batch > cfg.train_samples:
        cfg = sweep_config(cfg, [max_batch])  # grow a generated dataset to hold it
    # by default the whole training set (full batch) is the largest batch worth finding
    limit = min(max_batch or cfg.train_samples, cfg.train_samples, MAX_BATCH_SIZE)
    budget = memory_budget_bytes
    model_bytes = check_budget(prepare(cfg), budget) if budget is not None else 0
    probes = _Probes(cfg, warmup_steps, timed_steps, budget, should_stop)
    say = functools.partial(
        _result, margin=margin, reference_batch=reference_batch, reference_lr=reference_lr
    )
    if budget is not None and model_bytes > budget * (1.0 - margin):
        yield say(
            None,
            1,
            probes.tested,
            None,
            knee=None,
            note=(
                f"The model alone needs {format_bytes(model_bytes)}; with a {percent(margin, 0)} "
                "margin the budget "
                f"of {format_bytes(budget)} leaves {format_bytes(budget * (1.0 - margin))}."
            ),
        )
        return
    # 1. two small probes; if even those fail, halve until one runs
    for b in FIND_PROBES:
        b = min(b, limit)
        if b not in probes.tested and not probes.failed_at_or_below(b):
            yield probes.run(b, "probe")
    while not probes.ok() and min(probes.tested) > 1:
        yield probes.run(min(probes.tested) // 2, "probe (smaller: the last one ran out of memory)")
    if not probes.ok():
        yield say(None, 1, probes.tested, None, knee=None, note="Even batch 1 does not fit this budget.")
        return
    if len(probes.ok()) == 1 and probes.ok()[0] > 1:
        # one probe ran and a larger one did not: one point has no slope, and bisecting from it
        # takes four or five more probes; half its size gives the fit a second point instead
        yield probes.run(probes.ok()[0] // 2, "probe (smaller: a second point for the memory fit)")
    # 2. predict from the memory fit, then verify with a real step
    capacity = budget or (probes.device or {}).get("total_memory_bytes")
    probes.usable = capacity * (1.0 - margin) if capacity else None
    predicted = _predict(probes, limit)
    if predicted is not None and predicted not in probes.tested:
        yield probes.run(predicted, "verify the prediction")
    # 3. if the prediction was wrong, bisect in the narrow bracket around it
    best = yield from _bisect(probes, predicted)
    if best is None:
        yield say(
            None,
            1,
            probes.tested,
            predicted,
            knee=None,
            note="Even batch 1 does not fit within the margin of this budget.",
        )
        return
    # 4. the recommendation: the target's micro-batch, or else the throughput knee, measured by
    # the sweep's protocol over the sizes that fit (3-step probes follow the noise), or else the
    # largest that fits
    knee = span = None
    throughput: list[dict[str, Any]] = []
    if target_effective_batch is not None:
        batch, accum = _split(target_effective_batch, best)
        if batch not in probes.tested:
            yield probes.run(batch, "verify the micro-batch for the target effective batch")
        if not probes.safe(batch):  # below a verified size this should not happen: never return it
            batch, accum = best, math.ceil(target_effective_batch / best)
        why = "target"
        note = (
            f"Effective batch {target_effective_batch} = micro-batch {batch} × "
            f"{accum} accumulation steps; the largest batch that fits is {best}."
        )
    else:
        batch, accum, why, note, knee, span, throughput = _by_throughput(
            probes, best, margin if capacity else None
        )
    if best >= limit:  # the search stopped at its ceiling, not at the memory
        note += (
            " That is the whole training set: no larger batch exists."
            if limit == cfg.train_samples and active() is None
            else f" {best} is this search's ceiling (max_batch): a larger batch may fit too."
        )
    yield say(batch, accum, probes.tested, predicted, knee=knee, note=note, best=best, capacity=capacity) | {
        "recommended_because": why,
        "knee_range": span,
        "throughput": throughput,
    }


def _by_throughput(probes: _Probes, best: int, margin: float | None) -> tuple:
    """(batch, 1, "knee" | "largest", the note, the knee, its range, the throughput rows): the
    samples/s of up to FIND_THROUGHPUT_SIZES sizes that fit, timed in rounds."""
    sizes = _throughput_sizes(best, FIND_THROUGHPUT_SIZES)
    reading, throughput = throughput_in_rounds(
        probes.cfg,
        sizes,
        probes.budget,
        probes.should_stop,
        timed_steps=FIND_THROUGHPUT_STEPS,
        min_timed_s=0.0,
    )
    if probes.should_stop is not None and probes.should_stop():
        raise _Stopped
    knee, span = reading.knee, reading.knee_range
    fits = f"up to {best} fits" + (f" under the {percent(margin, 0)} margin" if margin is not None else "")
    row = next((r for r in throughput if r["batch_size"] == knee), None)
    if (
        knee is not None
        and knee < best
        and row is not None
        and (
            probes.usable is None
            or row["peak_memory_bytes"] is None
            or row["peak_memory_bytes"] <= probes.usable
        )
    ):  # ran, within the margin
        return (
            knee,
            1,
            "knee",
            (
                f"Batch {knee} is the throughput knee: the smallest within 10% of the best "
                f"samples/s (68% of resampled rounds: {span[0]:.0f}–{span[1]:.0f}); {fits}."
            ),
            knee,
            span,
            throughput,
        )
    why = (
        "samples/s were still rising there"
        if knee == best
        else f"samples/s level off somewhere in batch {span[0]:.0f}–{span[1]:.0f}, too noisy to "
        "name a smaller knee"
        if span
        else "no knee could be measured"
    )
    return (
        best,
        1,
        "largest",
        f"Batch {best} is the largest that fits: {why}; {fits}.",
        knee,
        span,
        throughput,
    )


def _throughput_sizes(best: int, most: int) -> list[int]:
    """The sizes whose samples/s the recommendation compares: the largest powers of two below
    the largest batch that fits, and that batch."""
    powers = [2**k for k in range(best.bit_length()) if 2**k < best]
    return powers[-(most - 1) :] + [best]


def _predict(probes: _Probes, limit: int) -> int | None:
    """The largest batch the memory fit of the sizes that ran predicts under the margin; None
    with one point and a failure (no slope to extrapolate: bisect instead)."""
    ok = probes.ok()
    fit = linear_fit(ok, [probes.tested[b]["peak_memory_bytes"] for b in ok])
    failed = [b for b, p in probes.tested.items() if p["status"] == "oom"]
    limit = min([limit] + [b - 1 for b in failed])  # a size that failed does not fit
    if fit is not None and probes.usable is not None:
        x = fit.solve(probes.usable)
        return max(1, min(math.floor(x), limit)) if x is not None else limit
    if fit is None and probes.failed_at_or_below(limit):
        return None
    return limit


def _bisect(probes: _Probes, predicted: int | None) -> Generator[dict, None, int | None]:
    """Probe until the largest size that runs within the margin is known to FIND_BISECT_TOLERANCE;
    returns it (measured, never extrapolated), or None when not even batch 1 does."""
    tested, safe = probes.tested, probes.safe
    while not any(safe(b) for b in tested) and min(tested) > 1:
        yield probes.run(max(1, min(tested) // 2), "smaller: nothing tested so far leaves the margin")
    if not any(safe(b) for b in tested):
        return None
    lo = max(b for b in tested if safe(b))
    above = [b for b in tested if b > lo and not safe(b)]
    # a verified prediction stands (the fit found it); bisect only below a failed one
    hi = min(above) if above and not (predicted is not None and lo == predicted) else None
    while hi is not None and hi - lo > max(1, int(lo * FIND_BISECT_TOLERANCE)):
        mid = (lo + hi) // 2
        yield probes.run(mid, "bisect")
        lo, hi = (mid, hi) if safe(mid) else (lo, mid)
    return lo


def _split(target: int, largest: int) -> tuple[int, int]:
    """(micro-batch, steps) with micro × steps == target exactly and micro <= largest."""
    for k in range(math.ceil(target / largest), target + 1):
        if target % k == 0:
            return target // k, k
    return 1, target


def _result(
    batch,
    accum,
    tested,
    predicted,
    *,
    margin,
    knee,
    note,
    reference_batch,
    reference_lr,
    best=None,
    capacity=None,
) -> dict[str, Any]:
    effective = batch * accum if batch else None
    lr = {}
    if reference_batch and reference_lr and effective:
        ratio = effective / reference_batch
        lr = {"lr_linear": reference_lr * ratio, "lr_sqrt": reference_lr * math.sqrt(ratio)}
    return {
        "kind": "find_result",
        "batch_size": batch,
        "accumulation_steps": accum,
        "effective_batch_size": effective,
        "max_batch_size": best,
        "knee_batch_size": knee,
        "probes": len(tested),
        "tested_batch_sizes": sorted(tested),
        "predicted_max": predicted,
        "margin": margin,
        "capacity_bytes": capacity,
        "recommended_because": None,
        "knee_range": None,
        "throughput": [],
        "outcome": "found" if batch else "does not fit",
        "failed_at_batch": None,
        "message": note,
        **lr,
    }
