"""What a sharpness study shows (lesson 7), from its sharpness_result: which solution is sharper,
which generalised better in this run, what the loss slice and the trace against 2/lr show, and
what each remedy did. Pure functions, unit-tested on built results."""

from __future__ import annotations

import math
from typing import Any

from bsdemo.recipes.closing import join
from bsdemo.units import fixed, percent, setting, sig

SHARPER = 1.2  # a top eigenvalue this many times the other's counts as sharper
SAME_LOSS = 0.1  # test losses within this share of each other count as the same
SAME_POINTS = 0.5  # test accuracies within this many points count as the same
EDGE = 0.9  # a full-batch run whose late sharpness reaches this share of 2/lr is at the edge
REMEDY_NAMES = {
    "scale_lr": "the lr scaled by √k",
    "warmup": "that lr after a warm-up",
    "longer": "training longer",
    "noise": "added small-batch noise",
}


def _name(run: dict[str, Any], samples: int | None = None) -> str:
    if samples is not None and run["batch_size"] >= samples and run["remedy"] is None:
        return f"the full batch ({run['batch_size']:,})"
    return f"batch {run['batch_size']:,}"


def _ending(run: dict[str, Any]) -> str:
    if run["status"] == "diverged":
        return f"it diverged at lr {setting(run['lr'], 3)}"
    return f"it stopped at {run['steps']:,} steps with loss {sig(run['train_loss'])}"


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
    return index, (
        f"top Hessian eigenvalue {sig(a)} at batch {small['batch_size']:,} against "
        f"{sig(b)} at batch {large['batch_size']:,}"
    )


def settled(trace: list[list[float]]) -> float | None:
    """The median traced sharpness over the second half of a run's steps."""
    if not trace:
        return None
    half = trace[-1][0] / 2
    late = sorted(v for s, v in trace if s >= half)
    return late[len(late) // 2] if len(late) % 2 else (late[len(late) // 2 - 1] + late[len(late) // 2]) / 2


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
    parts = []
    missed = [r for r in pair if r["reached_at"] is None]
    lead = (
        f"{' and '.join(_name(r, samples) for r in missed).capitalize()} did not reach the "
        f"training loss {setting(target)}, so the two minima are not compared."
        if missed
        else _sharp_lead(small, large, s_name, l_name)
    )
    if missed:
        parts += [
            f"{_name(r, samples).capitalize()} did not reach the training loss {setting(target)} "
            f"({_ending(r)})."
            for r in missed
        ]
        parts.append("Raise the step cap or the target to compare them at the same loss.")
        if any(not _ok(r) for r in pair):
            return join(lead, " ".join(parts))
    else:
        parts.append(
            f"Both runs trained to a training loss of {setting(target)}: {s_name} in "
            f"{small['reached_at']:,} steps, {l_name} in {large['reached_at']:,}."
        )
    parts.append(_neighbourhood(small, large, s_name, l_name, result.get("radius", 0.05)))
    late_s, late_l = settled(small["trace"]), settled(large["trace"])
    if late_s is not None and late_l is not None:
        edge = large["two_over_lr"]
        share = round(late_l / edge, 2)  # as shown: "rose to that edge" is read off this figure
        reached = share >= EDGE
        parts.append(
            f"Over the second half of training {l_name}'s sharpness, traced on "
            f"{result.get('trace_samples', 512):,} samples, was {sig(late_l)} (median), "
            f"{percent(share, 0)} of 2/lr = {sig(edge)}, and {s_name}'s {sig(late_s)}. "
            "Plain gradient descent cannot stay stable along a direction sharper than "
            "2/lr: "
            + (
                "the full-batch run rose to that edge and stayed there, as Cohen et al. (2021) describe."
                if reached
                else "in this run it stopped short of that edge (Cohen et al. 2021 see full-"
                "batch runs climb to it when they train long enough at one lr)."
            )
            + " (A Hessian over fewer samples has a larger top eigenvalue, so the "
            "trace runs above the values at the solutions.)"
        )
    parts.append(_generalisation(small, large, s_name, l_name))
    cut = result.get("slice")
    if cut:
        rise, before, after = barrier(cut)
        parts.append(
            "On the line between the two solutions the training loss "
            + (
                f"rises by {sig(rise)} between them (a barrier); "
                if rise > 0.01 * target
                else "stays as low as at its ends (no barrier); "
            )
            + f"half that distance past {s_name}'s end it is {sig(before)}, past "
            f"{l_name}'s {sig(after)}."
        )
    remedies = [remedy_text(run) for run in result["runs"] if run["remedy"] is not None]
    text = join(lead, " ".join(parts))
    if remedies:
        text += (
            f"\n\n**What each remedy did to the large batch** (without one: test loss "
            f"{sig(large['test_loss'])}, test minus train {sig(large['loss_gap'])}, top eigenvalue "
            f"{sig(large['top_hessian_eigenvalue'])}):\n" + "\n".join(f"- {r}" for r in remedies)
        )
    return text


def _sharp_lead(small: dict[str, Any], large: dict[str, Any], s_name: str, l_name: str) -> str:
    """The study's takeaway: which minimum is sharper by the top Hessian eigenvalue, or neither."""
    a, b = small["top_hessian_eigenvalue"], large["top_hessian_eigenvalue"]
    if b >= SHARPER * a or a >= SHARPER * b:
        sharp, hi, lo = (l_name, b, a) if b > a else (s_name, a, b)
        return (
            f"{sharp.capitalize()} found the sharper minimum"
            if b > a
            else f"{sharp.capitalize()} found the sharper minimum, the opposite of the usual finding"
        ) + f": top Hessian eigenvalue {sig(hi)} against {sig(lo)} ({fixed(hi / lo, 1)}×)."
    return f"The two minima are about as sharp: top Hessian eigenvalue {sig(a)} and {sig(b)}."


def _neighbourhood(
    small: dict[str, Any], large: dict[str, Any], s_name: str, l_name: str, radius: float
) -> str:
    """The random-neighbourhood rise beside the takeaway's eigenvalues: cited as support only
    where it points the same way, else named as disagreeing; nothing where neither is sharper
    or it was not measured."""
    a, b = small["top_hessian_eigenvalue"], large["top_hessian_eigenvalue"]
    ra, rb = small["neighbourhood_rise"], large["neighbourhood_rise"]
    if not (b >= SHARPER * a or a >= SHARPER * b) or not (math.isfinite(ra) and math.isfinite(rb)):
        return ""
    (sharp, flat), (r_sharp, r_flat) = ((l_name, s_name), (rb, ra)) if b > a else ((s_name, l_name), (ra, rb))
    step = f"a random step of {percent(radius, 0)} of each weight row's norm"
    if r_sharp >= SHARPER * r_flat:
        return (
            f"The random-neighbourhood measure agrees ({step} raises "
            f"{sharp}'s training loss by {sig(r_sharp, 2)} against {sig(r_flat, 2)})."
        )
    return (
        f"The random-neighbourhood measure does not agree: {step} raises {sharp}'s training "
        f"loss by {sig(r_sharp, 2)} and {flat}'s by {sig(r_flat, 2)} — the top eigenvalue is one "
        "direction; most random directions miss it."
    )


def _generalisation(small: dict[str, Any], large: dict[str, Any], s_name: str, l_name: str) -> str:
    """Which run generalised better — said only when test loss and test accuracy agree; where
    they disagree, both numbers and that they disagree."""
    loss_s, loss_l = small["test_loss"], large["test_loss"]
    acc_s, acc_l = 100 * small["test_accuracy"], 100 * large["test_accuracy"]
    by_loss = 0 if abs(loss_l - loss_s) <= SAME_LOSS * loss_s else (1 if loss_s < loss_l else -1)
    by_acc = 0 if abs(acc_s - acc_l) < SAME_POINTS else (1 if acc_s > acc_l else -1)
    numbers = (
        f"test loss {sig(loss_s)} against {sig(loss_l)} (test minus train "
        f"{sig(small['loss_gap'])} against {sig(large['loss_gap'])}), test accuracy "
        f"{fixed(acc_s, 1)}% against {fixed(acc_l, 1)}%"
    )
    if by_loss == by_acc == 0:
        head = f"They generalised about equally: {numbers}."
    elif by_loss * by_acc < 0:
        head = (
            f"Test loss and test accuracy disagree on which generalised better: {numbers} "
            f"— the loss favours {s_name if by_loss > 0 else l_name}, the accuracy "
            f"{s_name if by_acc > 0 else l_name}."
        )
    else:
        better = s_name if (by_loss or by_acc) > 0 else l_name
        also = (
            "" if by_loss and by_acc else " (one of the two measures differs by less than it takes to count)"
        )
        head = f"In this run {better} generalised better: {numbers}{also}."
    return (
        head + " Next to the difference in sharpness, any difference in generalisation is "
        "small here; in the literature it shrinks or vanishes once the large batch's lr is "
        "scaled up with a warm-up and it trains longer (Goyal et al. 2017; Hoffer et al. "
        "2017) — the remedy switches try exactly that."
    )


def remedy_text(run: dict[str, Any]) -> str:
    """What one remedy's run ended with (a Markdown list item's text)."""
    name = f"**{REMEDY_NAMES[run['remedy']].capitalize()}** (lr {setting(run['lr'], 3)}"
    if run["status"] == "diverged":
        return (
            f"{name}): diverged — its sharpness at the start was already above 2/lr = "
            f"{sig(run['two_over_lr'])}."
        )
    if run["reached_at"] is None:
        return f"{name}): did not reach the target in {run['steps']:,} steps."
    return (
        f"{name}, {run['steps']:,} steps): test loss {sig(run['test_loss'])}, test minus "
        f"train {sig(run['loss_gap'])}, top eigenvalue {sig(run['top_hessian_eigenvalue'])}."
    )
