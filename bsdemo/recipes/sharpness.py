"""What a sharpness study shows (lesson 7), from its sharpness_result: which solution is sharper,
which generalised better in this run, what the loss slice and the trace against 2/lr show, and
what each remedy did. Pure functions, unit-tested on built results."""

from __future__ import annotations

import math
from typing import Any

SHARPER = 1.2  # a top eigenvalue this many times the other's counts as sharper
SAME_LOSS = 0.1  # test losses within this share of each other count as the same
SAME_POINTS = 0.5  # test accuracies within this many points count as the same
REMEDY_NAMES = {"scale_lr": "the lr scaled by √k", "warmup": "that lr after a warm-up",
                "longer": "training longer", "noise": "added small-batch noise"}


def _name(run: dict[str, Any], samples: int | None = None) -> str:
    if samples is not None and run["batch_size"] >= samples and run["remedy"] is None:
        return f"the full batch ({run['batch_size']:,})"
    return f"batch {run['batch_size']:,}"


def _ending(run: dict[str, Any]) -> str:
    if run["status"] == "diverged":
        return f"it diverged at lr {run['lr']:.3g}"
    return f"it stopped at {run['steps']:,} steps with loss {run['train_loss']:.3g}"


def _pair(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    runs = [r for r in result.get("runs") or [] if r["remedy"] is None]
    return (runs[0], runs[1]) if len(runs) == 2 else None


def _ok(run: dict[str, Any]) -> bool:
    return run["status"] == "completed" and math.isfinite(run["top_hessian_eigenvalue"])


def sharpness_prediction(result: dict[str, Any] | None) -> tuple[int, str] | None:
    """Which solution was sharper (answers: the small batch's, the large batch's, about the
    same), with the numbers; None until both runs reached the target."""
    pair = _pair(result or {})
    if pair is None or not all(_ok(r) for r in pair):
        return None
    small, large = pair
    a, b = small["top_hessian_eigenvalue"], large["top_hessian_eigenvalue"]
    index = 1 if b >= SHARPER * a else 0 if a >= SHARPER * b else 2
    return index, (f"top Hessian eigenvalue {a:.3g} at batch {small['batch_size']:,} against "
                   f"{b:.3g} at batch {large['batch_size']:,}")


def settled(trace: list[list[float]]) -> float | None:
    """The median traced sharpness over the second half of a run's steps."""
    if not trace:
        return None
    half = trace[-1][0] / 2
    late = sorted(v for s, v in trace if s >= half)
    return late[len(late) // 2] if len(late) % 2 else (late[len(late) // 2 - 1]
                                                      + late[len(late) // 2]) / 2


def barrier(cut: dict[str, list[float]]) -> tuple[float, float, float]:
    """From a loss slice: (the highest training loss between the two solutions above the
    higher end, the loss at t = -0.5 past the first, at t = 1.5 past the second)."""
    t, loss = cut["t"], cut["train_loss"]
    inside = [v for s, v in zip(t, loss, strict=True) if 0 <= s <= 1]
    ends = max(loss[t.index(0.0)] if 0.0 in t else inside[0], inside[-1])
    return max(inside) - ends, loss[0], loss[-1]


def sharpness_verdict(result: dict[str, Any] | None) -> str | None:
    """The closing text of a finished study (Markdown), or None before it ends."""
    pair = _pair(result or {})
    if pair is None:
        return None
    small, large = pair
    samples = result.get("train_samples")
    s_name, l_name = _name(small), _name(large, samples)
    target = result["target_loss"]
    parts = ["**What your runs show.**"]
    missed = [r for r in pair if r["reached_at"] is None]
    if missed:
        parts += [f"{_name(r, samples).capitalize()} did not reach the training loss {target:g} "
                  f"({_ending(r)})." for r in missed]
        parts.append("The two are not compared at the same training loss: raise the step cap "
                     "or the target.")
        if any(not _ok(r) for r in pair):
            return " ".join(parts)
    else:
        parts.append(f"Both runs trained to a training loss of {target:g}: {s_name} in "
                     f"{small['reached_at']:,} steps, {l_name} in {large['reached_at']:,}.")
    a, b = small["top_hessian_eigenvalue"], large["top_hessian_eigenvalue"]
    ra, rb = small["neighbourhood_rise"], large["neighbourhood_rise"]
    if b >= SHARPER * a:
        parts.append(f"**{l_name.capitalize()} found the sharper minimum:** its top Hessian "
                     f"eigenvalue is {b:.3g} against {a:.3g} ({b / a:.1f}×), and a random step "
                     f"of {result.get('radius', 0.05):.0%} of each weight row's norm raises its "
                     f"training loss by {rb:.2g} against {ra:.2g}.")
    elif a >= SHARPER * b:
        parts.append(f"Here {s_name} found the sharper minimum: top Hessian eigenvalue {a:.3g} "
                     f"against {b:.3g} — the opposite of the usual finding.")
    else:
        parts.append(f"The two minima are about as sharp: top Hessian eigenvalue {a:.3g} and "
                     f"{b:.3g}.")
    late_s, late_l = settled(small["trace"]), settled(large["trace"])
    if late_s is not None and late_l is not None:
        parts.append(f"Over the second half of training {l_name}'s sharpness, traced on "
                     f"{result.get('trace_samples', 512):,} samples, was {late_l:.3g} (median) "
                     f"against 2/lr = {large['two_over_lr']:.3g}, and {s_name}'s {late_s:.3g}: "
                     "plain gradient descent cannot stay stable along a direction sharper than "
                     "2/lr, and a small batch's noise throws it out of valleys narrower than the "
                     "noise. (A Hessian over fewer samples has a larger top eigenvalue, so the "
                     "trace runs above the values at the solutions.)")
    gap_s, gap_l = small["loss_gap"], large["loss_gap"]
    acc_s, acc_l = 100 * small["test_accuracy"], 100 * large["test_accuracy"]
    close = abs(large["test_loss"] - small["test_loss"]) <= SAME_LOSS * small["test_loss"]
    if close:
        gap = (f"They generalised about equally: test loss {small['test_loss']:.3g} against "
               f"{large['test_loss']:.3g}")
    else:
        better = s_name if small["test_loss"] < large["test_loss"] else l_name
        gap = (f"In this run {better} generalised better: test loss "
               f"{small['test_loss']:.3g} against {large['test_loss']:.3g} (test minus train "
               f"{gap_s:.3g} against {gap_l:.3g})")
    acc = ("the same test accuracy" if abs(acc_s - acc_l) < SAME_POINTS else
           f"test accuracy {acc_s:.1f}% against {acc_l:.1f}%")
    parts.append(f"{gap}, and {acc}. Next to the difference in sharpness, any difference in "
                 "generalisation is small here; in the literature it shrinks or vanishes once "
                 "the large batch's lr is scaled up with a warm-up and it trains longer (Goyal "
                 "et al. 2017; Hoffer et al. 2017) — the remedy switches try exactly that.")
    cut = result.get("slice")
    if cut:
        rise, before, after = barrier(cut)
        parts.append("On the line between the two solutions the training loss "
                     + (f"rises by {rise:.3g} between them (a barrier); " if rise > 0.01 * target
                        else "stays as low as at its ends (no barrier); ")
                     + f"half that distance past {s_name}'s end it is {before:.3g}, past "
                     f"{l_name}'s {after:.3g}.")
    remedies = [remedy_text(run) for run in result["runs"] if run["remedy"] is not None]
    text = " ".join(parts)
    if remedies:
        text += (f"\n\n**What each remedy did to the large batch** (without one: test loss "
                 f"{large['test_loss']:.3g}, test minus train {gap_l:.3g}, top eigenvalue "
                 f"{large['top_hessian_eigenvalue']:.3g}):\n" + "\n".join(f"- {r}" for r in remedies))
    return text


def remedy_text(run: dict[str, Any]) -> str:
    """What one remedy's run ended with (a Markdown list item's text)."""
    name = f"**{REMEDY_NAMES[run['remedy']].capitalize()}** (lr {run['lr']:.3g}"
    if run["status"] == "diverged":
        return (f"{name}): diverged — its sharpness at the start was already above 2/lr = "
                f"{run['two_over_lr']:.3g}.")
    if run["reached_at"] is None:
        return f"{name}): did not reach the target in {run['steps']:,} steps."
    return (f"{name}, {run['steps']:,} steps): test loss {run['test_loss']:.3g}, test minus "
            f"train {run['loss_gap']:.3g}, top eigenvalue {run['top_hessian_eigenvalue']:.3g}.")
