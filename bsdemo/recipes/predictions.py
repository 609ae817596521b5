"""What the student's runs say about a lesson's "Predict first" question: the index of the
answer (bsdemo.lessons.Lesson.answers) they support, and the numbers that show it; None when
the runs do not answer it yet. Pure functions of finished results, unit-tested."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bsdemo.runs import JobSnapshot, batch_extremes

Judged = tuple[int, str] | None


def lab_prediction(snaps: Sequence[JobSnapshot]) -> Judged:
    """Updates per epoch at the smallest and the largest batch the student ran to the end."""
    pair = batch_extremes(snaps)
    if pair is None:
        return None
    small, large = pair
    a, b = small.updates_per_epoch, large.updates_per_epoch
    index = 0 if b > a else 1 if b == a else 2
    return index, (f"batch {small.effective_batch} made {a:,} updates per epoch, batch "
                   f"{large.effective_batch} made {b:,}: ceil(N / B) falls as B grows")


def throughput_prediction(points: Sequence[dict[str, Any]]) -> Judged:
    """A step at batch 64 against a step at batch 1, both measured in the sweep."""
    times = {p["batch_size"]: p["step_time_s"] for p in points
             if p.get("status") == "ok" and p.get("step_time_s")}
    if 1 not in times or 64 not in times:
        return None
    ratio = times[64] / times[1]
    index = 0 if ratio >= 32 else 1 if ratio < 1.5 else 2
    return index, (f"a step took {times[1] * 1e3:.2f} ms at batch 1 and {times[64] * 1e3:.2f} ms "
                   f"at batch 64: {ratio:.1f} times as long for 64 times the samples")


def regimes_prediction(rows: Sequence[dict[str, Any]]) -> Judged:
    """Which of the three regimes (regime_configs' order) made the most weight updates."""
    if len(rows) != 3 or any(r["status"] in ("queued", "running") for r in rows):
        return None
    counts = [r["weight updates"] or 0 for r in rows]
    index = max(range(3), key=counts.__getitem__)
    return index, ", ".join(f"{r['run']} made {c:,}" for r, c in zip(rows, counts, strict=True))


def lr_prediction(rows: Sequence[dict[str, Any]]) -> Judged:
    """The batch k times larger with the lr kept, against the reference (lr_variants' order)."""
    if len(rows) != 5 or any(r["status"] in ("queued", "running") for r in rows):
        return None
    ref, same = rows[0], rows[1]
    if ref["test accuracy"] is None or same["status"] not in ("completed", "diverged"):
        return None
    acc = same["test accuracy"] if same["status"] == "completed" else 0.0
    delta = (acc - ref["test accuracy"]) * 100
    index = 1 if delta < -1 else 2 if delta > 1 else 0
    return index, (f"the reference reached {ref['test accuracy']:.1%}, the larger batch with the "
                   f"same lr {acc:.1%} ({delta:+.1f} points)")
