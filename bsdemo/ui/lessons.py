"""The lesson map shown on Home: each lesson, its one-line goal, and whether it is built yet."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lesson:
    number: int
    title: str
    goal: str
    page: str | None = None  # file under pages/ once built; None = coming


LESSONS = (
    Lesson(1, "What a batch is", "One iteration = batch, forward, loss, backward, step; updates "
           "per epoch = ceil(N / batch).", "pages/training_lab.py"),
    Lesson(2, "Throughput and utilisation", "Samples/s rises with batch size until the device "
           "saturates: t(B) = t0 + t1·B.", "pages/throughput.py"),
    Lesson(3, "Memory and out-of-memory", "Memory = fixed part + activations growing with B; past "
           "capacity the run fails.", "pages/memory.py"),
    Lesson(4, "SGD vs full batch vs mini-batch", "Three regimes on one model: updates, time, "
           "memory, accuracy.", "pages/regimes.py"),
    Lesson(5, "Learning-rate scaling", "Scale the lr with the batch (linear or √ rule) and warm "
           "it up.", "pages/lr_scaling.py"),
    Lesson(6, "Gradient accumulation", "k micro-batches of b = one batch of k·b, at the memory of "
           "b.", "pages/accumulation.py"),
    Lesson(7, "Generalisation gap", "Large batches can train lower but test higher: sharp vs "
           "flat minima."),
    Lesson(8, "Gradient noise", "Gradient variance falls as 1/B; the noise scale predicts the "
           "critical batch."),
    Lesson(9, "Normalisation layers", "BatchNorm depends on the batch; GroupNorm and LayerNorm "
           "do not."),
    Lesson(10, "Scaling out and saving memory", "Mixed precision, checkpointing, data and model "
           "parallelism."),
    Lesson(11, "Choosing a batch size", "Start at 32, grow while throughput rises and memory "
           "allows.", "pages/finder.py"),
    Lesson(12, "Check yourself", "A quiz with explanations."),
)
