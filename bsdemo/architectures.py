"""Lesson 11's architecture study (pure Python): which runs it trains, and what they show.

Each architecture trains from its preset at every batch size for the same few seconds of
training — the budget a practitioner actually has is time, and a fixed number of epochs would
hand the small batches all the updates — with the lr scaled by the square-root rule from the
preset's lr at batch 32 (the Transformer also warms up over its first steps). One run gives
three measurements: samples/s (the median step), accounted peak memory, and the quality at the
end of the budget — test accuracy, or for the GAN the Fréchet distance of its images.
`analyse` turns an architecture's runs into its measured range and sets it beside the rule of
thumb (CNNs 32–256, Transformers into the thousands with lr scaling and warm-up, RNNs 16–64,
GANs 32–128), with the reason where they disagree, taken from the numbers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bsdemo.config import RunConfig
from bsdemo.fits import linear_fit
from bsdemo.presets import PRESETS
from bsdemo.units import fixed, percent, sig

REFERENCE_BATCH = 32  # the presets' lr is the lr at this batch
KNEE_SHARE = 0.8  # the throughput knee: the smallest batch reaching this share of the best
FAST_SHARE = 0.5  # a batch in the measured range runs at least this share of the best samples/s
ACCURACY_TOLERANCE = 0.02  # within 2 points of the best accuracy counts as as good
FRECHET_TOLERANCE = 0.25  # within 25 % of the best (lowest) Fréchet distance counts as as good
LEARNED = 0.5  # a run learned if it closed this share of the gap from its start to perfect
DEFAULT_BATCHES = (8, 32, 128, 512)
DEFAULT_SECONDS = 0.6  # each run's training time (evaluations not counted): the training
# thread's CPU time where it does all the work (bsdemo.engine.architectures), else the wall clock
MAX_SECONDS = 30.0
MAX_EPOCHS = 100  # a run's epoch cap: a bound on its steps should the time budget not end it
WARMUP_STEPS = 10  # the Transformer's lr ramp
NO_EVALUATIONS = 10**7  # eval_interval: evaluate at the start and at the end of the budget only


@dataclass(frozen=True)
class Architecture:
    name: str  # the model's name in RunConfig
    label: str
    preset: str  # bsdemo.presets: the dataset, sizes, optimizer and lr at batch 32
    rule: tuple[int, int]  # the rule of thumb's range of batch sizes
    rule_text: str
    warmup: bool = False  # warm the lr up over WARMUP_STEPS

    @property
    def quality(self) -> str:
        return "frechet_distance" if self.name == "gan" else "test_accuracy"


ARCHITECTURES = {
    a.name: a
    for a in (
        Architecture("cnn", "CNN", "digits-cnn", (32, 256), "32–256"),
        # the digits read row by row: a task the tiny Transformer learns in the budget (on the
        # characters' 3-digit sums it stays near a third of the digits right at every batch)
        Architecture(
            "transformer",
            "Transformer",
            "digits-transformer",
            (256, 4096),
            "into the thousands, with warm-up",
            warmup=True,
        ),
        Architecture("lstm", "LSTM (an RNN)", "digits-lstm", (16, 64), "16–64"),
        Architecture("gan", "GAN", "digits-gan", (32, 128), "32–128"),
    )
}


def run_config(cfg: RunConfig, architecture: str, batch: int, seconds: float = DEFAULT_SECONDS) -> RunConfig:
    """The run of `architecture` at `batch`: its preset, `seconds` of training, the √-scaled lr,
    warm-up. The device and seed come from cfg."""
    arch = ARCHITECTURES[architecture]
    settings = {k: v for k, v in PRESETS[arch.preset].settings.items() if k != "epochs"}
    run = RunConfig(
        **settings,
        epochs=MAX_EPOCHS,
        time_limit_s=seconds,
        eval_interval=NO_EVALUATIONS,
        seed=cfg.seed,
        device=cfg.device,
        warmup_steps=WARMUP_STEPS if arch.warmup else 0,
    )
    return dataclasses.replace(
        run, batch_size=min(batch, run.train_samples), lr=run.lr * math.sqrt(batch / REFERENCE_BATCH)
    )


def analyse(architecture: str, points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """An architecture's measured range from its runs (completed ones), against the rule."""
    arch = ARCHITECTURES[architecture]
    done = sorted(
        (p for p in points if p["status"] == "completed" and p["quality"] is not None),
        key=lambda p: p["batch_size"],
    )
    out: dict[str, Any] = {
        "kind": "architecture_summary",
        "architecture": architecture,
        "label": arch.label,
        "rule": list(arch.rule),
        "rule_text": arch.rule_text,
        "quality": arch.quality,
    }
    if not done:
        return out | {"range": None, "agreement": None, "why": "No run completed."}
    lower = arch.quality == "frechet_distance"
    best = (min if lower else max)(p["quality"] for p in done)
    learned = [p for p in done if learned_in_budget(p)]
    if not learned:  # no range from models that did not learn: nothing comparable to read
        top = next(p for p in done if p["quality"] == best)
        start = (
            f" from {_quality(arch, top['initial_quality'])} at its start"
            if top.get("initial_quality") is not None
            else ""
        )
        # speed and memory do not depend on learning: still measured
        peak = max(p["samples_per_sec"] for p in done)
        memory = linear_fit([p["batch_size"] for p in done], [p["peak_memory_bytes"] for p in done])
        return out | {
            "range": None,
            "agreement": None,
            "not_learned": True,
            "best_quality": best,
            "best_batch": top["batch_size"],
            "knee": next(p["batch_size"] for p in done if p["samples_per_sec"] >= KNEE_SHARE * peak),
            "memory_per_sample_bytes": memory.slope if memory else None,
            "peak_samples_per_sec": peak,
            "why": f"no run learned in its budget: the best, batch "
            f"{top['batch_size']}, reached {_quality(arch, best)}{start}, less "
            f"than half the way to {_perfect(arch, top)}, so no range is read. "
            "Give it more seconds.",
        }
    # a run that ended at least as well as one that learned counts as learned too (its own
    # start may have been better): the range is never read from runs worse than one left out
    worst = (max if lower else min)(p["quality"] for p in learned)
    done = [p for p in done if p in learned or (p["quality"] <= worst if lower else p["quality"] >= worst)]
    best = (min if lower else max)(p["quality"] for p in done)
    good = [
        p
        for p in done
        if (
            p["quality"] <= best * (1 + FRECHET_TOLERANCE)
            if lower
            else p["quality"] >= best - ACCURACY_TOLERANCE
        )
    ]
    peak = max(p["samples_per_sec"] for p in done)
    knee = next(p["batch_size"] for p in done if p["samples_per_sec"] >= KNEE_SHARE * peak)
    fast = [p for p in good if p["samples_per_sec"] >= FAST_SHARE * peak] or [
        next(p for p in done if p["quality"] == best)
    ]
    lo, hi = fast[0]["batch_size"], fast[-1]["batch_size"]
    memory = linear_fit([p["batch_size"] for p in done], [p["peak_memory_bytes"] for p in done])
    out |= {
        "range": [lo, hi],
        "knee": knee,
        "best_quality": best,
        "best_batch": next(p["batch_size"] for p in done if p["quality"] == best),
        "good_batches": [p["batch_size"] for p in good],
        "memory_per_sample_bytes": memory.slope if memory else None,
        "peak_samples_per_sec": peak,
    }
    return out | _agreement(arch, done, out)


def _agreement(arch: Architecture, done: list, summary: dict) -> dict[str, Any]:
    """Whether the measured range meets the rule's, and why not, from the runs."""
    (lo, hi), (rule_lo, rule_hi) = summary["range"], arch.rule
    if hi < rule_lo or lo > rule_hi:
        agreement = "disagrees"
    elif rule_lo <= lo and hi <= rule_hi:
        agreement = "agrees"
    else:
        agreement = "overlaps"
    reasons = []
    tested = [p["batch_size"] for p in done]
    bad = [p for p in done if p["batch_size"] not in summary["good_batches"]]
    worse_large = [p for p in bad if p["batch_size"] > summary["best_batch"]]
    worse_small = [p for p in bad if p["batch_size"] < summary["best_batch"]]
    if worse_large:
        p = worse_large[0]
        reasons.append(
            f"at batch {p['batch_size']} the same seconds bought only {p['steps']:,} "
            f"updates and quality fell ({_quality(arch, p['quality'])}, against "
            f"{_quality(arch, summary['best_quality'])} at batch "
            f"{summary['best_batch']})"
        )
    if worse_small:
        p = worse_small[-1]
        reasons.append(
            f"at batch {p['batch_size']} the {p['steps']:,} updates were smaller and "
            f"noisier steps, at {fixed(p['samples_per_sec'], 0)} samples/s, and quality was "
            f"lower ({_quality(arch, p['quality'])})"
        )
    slow = [
        p
        for p in done
        if p["samples_per_sec"] < FAST_SHARE * summary["peak_samples_per_sec"]
        and p["batch_size"] in summary["good_batches"]
    ]
    if slow:
        p = slow[-1]
        reasons.append(
            f"batch {p['batch_size']} trained as well but at "
            f"{percent(p['samples_per_sec'] / summary['peak_samples_per_sec'], 0)} of the best "
            "samples/s"
        )
    if summary["knee"] < arch.rule[0]:
        reasons.append(
            f"this device already reaches {percent(KNEE_SHARE, 0)} of its best samples/s at "
            f"batch {summary['knee']} (a GPU needs larger batches to fill)"
        )
    elif summary["knee"] == max(tested):
        reasons.append(f"samples/s still rose up to batch {max(tested)}, the largest tried")
    if hi == max(tested) and hi < arch.rule[1]:
        reasons.append(f"nothing above batch {hi} was tried")
    return {"agreement": agreement, "why": "; ".join(reasons) + "." if reasons else ""}


def learned_in_budget(point: Mapping[str, Any]) -> bool:
    """Whether a run closed at least LEARNED of the gap between its starting quality and perfect
    (test accuracy 100 %; for the GAN the Fréchet distance of real training images). A run
    without a recorded start counts as learned."""
    start, end = point.get("initial_quality"), point["quality"]
    if start is None:
        return True
    if point["architecture"] == "gan":
        floor = point.get("frechet_reference") or 0.0
        return end - floor <= (1 - LEARNED) * (start - floor)
    return end - start >= LEARNED * (1.0 - start)


def _perfect(arch: Architecture, point: Mapping[str, Any]) -> str:
    if arch.name == "gan":
        return f"real images' Fréchet distance ({sig(point.get('frechet_reference') or 0, 2)})"
    return "100 %"


def _quality(arch: Architecture, value: float) -> str:
    return f"Fréchet distance {sig(value)}" if arch.name == "gan" else f"test accuracy {percent(value)}"
