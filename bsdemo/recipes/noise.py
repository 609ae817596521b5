"""What a gradient-noise measurement shows (lesson 8), from its noise_result. Pure, unit-tested."""

from __future__ import annotations

import itertools
import math
from typing import Any

from bsdemo.recipes.closing import join
from bsdemo.units import fixed, percent, setting, sig

SLOPE_TOLERANCE = 0.1  # a slope within this of −1 counts as "1/B"
AGREE = 0.25  # the two B_simple estimates agree when within this share of the direct one


# what fixes a model's starting parameters and its data: two jobs alike in these start from
# the same initialisation, whatever each then trains with
SAME_START = ("dataset", "model", "norm", "width", "depth", "seed", "samples", "noise")


def shared_b_simple(
    noise_config: dict[str, Any],
    noise_options: dict[str, Any],
    noise_result: dict[str, Any] | None,
    critical_config: dict[str, Any],
) -> float | None:
    """The noise measurement's direct B_simple where it measured the critical study's start
    (the same model, data and seed, nothing trained first), so a page shows one value for the
    one quantity; else None (the critical study's own estimate stands)."""
    if not noise_result or noise_options.get("after_steps"):
        return None
    if any(noise_config.get(k) != critical_config.get(k) for k in SAME_START):
        return None
    return noise_result.get("b_simple")


def noise_prediction(result: dict[str, Any] | None) -> tuple[int, str] | None:
    """What 4× the batch did to the variance, from the fitted slope (answers: about 4×
    smaller, about 2× smaller, about the same), with the numbers."""
    if not result or len(result.get("variances") or []) < 2:
        return None
    slope = round(result["variance_slope"], 2)  # as shown
    factor = 4**-slope
    index = 0 if factor >= 3 else 1 if factor >= 1.5 else 2
    sizes, variances = result["batch_sizes"], result["variances"]
    return index, (
        f"the variance fell from {sig(variances[0])} at batch {sizes[0]} to "
        f"{sig(variances[-1])} at batch {sizes[-1]}: a log-log slope of "
        f"{fixed(slope, 2)}, so 4× the batch divides it by {fixed(factor, 1)}"
    )


def noise_verdict(result: dict[str, Any] | None) -> str | None:
    """The closing text of a finished measurement (Markdown), or None before it ends."""
    if not result:
        return None
    # every reading from the numbers as shown (the slope to two decimals, shares in whole per
    # cent): the words never contradict the figure beside them
    s, sizes = round(result["variance_slope"], 2), result["batch_sizes"]
    n, last = result["train_samples"], sizes[-1]
    one_over_b = abs(s + 1) <= SLOPE_TOLERANCE + 1e-9
    moved = "fell" if s < 0 else "rose" if s > 0 else "did not change"
    lead = (
        f"The gradient's variance fell as 1/B (log-log slope {fixed(s, 2)})"
        if one_over_b
        else f"The gradient's variance {moved} with a log-log slope of {fixed(s, 2)}, not 1/B's −1"
    ) + f"; the noise scale B_simple is about {result['b_simple']:.0f}."
    parts = []
    if one_over_b:
        parts.append(
            f"The gradient's variance fell as 1/B: a log-log slope of {fixed(s, 2)} from "
            f"batch {sizes[0]} to {last} (−1 is 1/B)."
        )
    else:
        parts.append(
            f"The gradient's variance {moved} with a log-log slope of {fixed(s, 2)} from batch "
            f"{sizes[0]} to {last}, not the −1 of 1/B: with {result['draws']} draws per "
            "size the estimate is itself noisy; more draws narrow it."
        )
    shrink = (n - last) / (n - 1)
    if shrink < 0.9:
        parts.append(
            f"Batches are drawn without replacement from N = {n:,} samples, so at batch "
            f"{last} the variance is only {percent(shrink, 0)} of tr(Σ)/B: the factor "
            "(N − B)/(N − 1), which reaches zero at the full batch."
        )
    direct, two = result["b_simple"], result["b_simple_two_batch"]
    lo, hi = result["b_simple_range"]
    lo2, hi2 = result["b_simple_two_batch_range"]
    small, big = result["two_batch_sizes"]
    if math.isfinite(two) and two > 0:
        apart = round(abs(two - direct) / direct, 2)
        agree = (
            f"within {percent(apart, 0)} of each other"
            if apart <= AGREE + 1e-9
            else f"{percent(apart, 0)} apart: the two-batch estimate needs more draws"
        )
        parts.append(
            f"The simple noise scale B_simple = tr(Σ)/|G|² is {direct:.0f} measured "
            f"directly (its likely range, about ±1 standard error, from the draws "
            f"resampled: {lo:.0f}–{hi:.0f}) and "
            f"{two:.0f} from batches {small} and {big} alone ({lo2:.0f}–{hi2:.0f}), "
            f"{agree}."
        )
    else:
        parts.append(
            f"The simple noise scale B_simple = tr(Σ)/|G|² is {direct:.0f} measured "
            f"directly (its likely range, about ±1 standard error, from the draws "
            f"resampled: {lo:.0f}–{hi:.0f}); the "
            "two-batch estimate came out "
            "negative here, as it can with few draws when the noise dwarfs the signal."
        )
    first, final = (round(c, 2) for c in (result["cosines"][0], result["cosines"][-1]))
    if final == first:
        parts.append(
            f"A mini-batch gradient's cosine to the full gradient stayed at "
            f"{fixed(first, 2)} from batch {sizes[0]} to batch {last}."
        )
    else:
        parts.append(
            f"A mini-batch gradient's cosine to the full gradient "
            f"{'rose' if final > first else 'fell'} from {fixed(first, 2)} at batch "
            f"{sizes[0]} to {fixed(final, 2)} at batch {last}."
        )
    parts.append(
        f"*Predicted* (McCandlish et al. 2018): well below B ≈ {direct:.0f} doubling the "
        "batch nearly halves the steps a target loss takes; well above it, a step is "
        "mostly signal already and more batch buys few steps."
    )
    return join(lead, " ".join(parts))


def paths_verdict(rows: list[dict[str, Any]], steps: int) -> str:
    """What the 2-D paths showed: distance walked and final loss, smallest batch against the
    full batch (rows: charts.paths_chart's table, smallest batch first)."""
    small, full = rows[0], rows[-1]
    ratio = small["distance walked"] / full["distance walked"] if full["distance walked"] else 0
    return join(
        f"In the same {steps} steps {small['path']} walked {fixed(ratio, 1)}× as far as the "
        f"{full['path']}, ending at loss {setting(small['final loss'])} against "
        f"{setting(full['final loss'])}.",
        f"It walked {setting(small['distance walked'])} through (w, b), the {full['path']} "
        f"{setting(full['distance walked'])}. Each step's direction is the full gradient plus "
        "noise: the noise zig-zags the small batch across the valley; the full batch "
        "follows the gradient itself.",
    )


PERFECT = 0.7  # steps falling by at least this share of the batch's growth count as "perfect"
FLAT = 1.25  # steps falling by less than this for 4× the batch or more count as "no gain"


def critical_verdict(result: dict[str, Any] | None) -> str | None:
    """What steps-to-target against the batch shows: the regimes, the critical batch, and how
    it compares with B_simple (Markdown), or None before the study ends."""
    if not result:
        return None
    sizes, steps = result["batch_sizes"], result["steps"]
    cap = f", at most {setting(result['lr_cap'])}" if result.get("lr_cap") else ""
    parts = []
    failed = [
        f"batch {b:,} {status} (lr {setting(lr, 3)})"
        for b, s, status, lr in zip(sizes, steps, result["statuses"], result["lrs"], strict=True)
        if not s
    ]
    arrived = [(b, s) for b, s in zip(sizes, steps, strict=True) if s]
    if len(arrived) < 2:
        return join(
            f"Fewer than two batch sizes reached the training loss "
            f"{setting(result['target_loss'])}, so no critical batch can be read.",
            (f"Never reached: {'; '.join(failed)}. " if failed else "")
            + "Raise the step cap, lower the lr, or choose an easier target.",
        )
    parts.append(
        f"With the lr by the {result['rule']} rule from batch "
        f"{result['reference_batch']} at {setting(result['reference_lr'])}{cap}, the steps "
        f"to a training loss of {setting(result['target_loss'])} went from "
        f"{arrived[0][1]:,} at batch {arrived[0][0]:,} to {arrived[-1][1]:,} at batch "
        f"{arrived[-1][0]:,}, fewest ({fixed(result['s_min'], 0)}) at batch "
        f"{min(arrived, key=lambda p: p[1])[0]:,}."
    )
    regimes = []
    for (b0, s0), (b1, s1) in itertools.pairwise(arrived):
        # judged from the figures as shown: the batch's growth (two decimals), the steps' fall (one)
        grow, fall = round(b1 / b0, 2), round(s0 / s1, 1)
        kind = (
            "perfect scaling or better"
            if fall >= grow
            else "near-perfect scaling"
            if fall >= PERFECT * grow
            else "no gain"
            if fall < FLAT
            else "diminishing returns"
        )
        regimes.append(
            f"{b0:,}→{b1:,}: {setting(grow, 3)}× the batch, {fixed(fall, 1)}× fewer steps ({kind})"
            if fall >= 1
            else f"{b0:,}→{b1:,}: {setting(grow, 3)}× the batch, {fixed(s1 / s0, 1)}× more steps (no gain)"
        )
    parts.append("Batch by batch — " + "; ".join(regimes) + ".")
    if failed:
        parts.append("Never reached the target: " + "; ".join(failed) + ".")
    b_crit, b_simple = result["b_crit"], result["b_simple"]
    lead = (
        f"The critical batch is about {b_crit:.0f}: past it, doubling the batch saves few "
        f"steps (B_simple at the start: {b_simple:.0f})."
        if b_crit
        else f"Steps to loss {setting(result['target_loss'])} went from {arrived[0][1]:,} at batch "
        f"{arrived[0][0]:,} to {arrived[-1][1]:,} at batch {arrived[-1][0]:,}; no critical "
        "batch could be read."
    )
    if b_crit:
        parts.append(
            f"The steps are twice the fewest at batch ≈ {b_crit:.0f}: the **critical "
            f"batch**. Below it a bigger batch still saves many steps; above it each "
            f"doubling saves few, and mostly spends compute. B_simple measured at initialisation is "
            f"{b_simple:.0f}, {fixed(round(b_simple) / round(b_crit), 1)}× the critical batch."
        )
        parts.append(
            "McCandlish et al. (2018) predict the two agree in order of magnitude, "
            "not exactly: B_simple here is measured at the start, while the noise "
            "scale grows as the loss falls, and each lr here follows a rule rather "
            "than being tuned per batch."
        )
    else:
        parts.append(
            f"No critical batch could be read off: the steps never fell from over "
            f"twice the fewest to under it between two measured batches. B_simple at "
            f"initialisation is {b_simple:.0f}."
        )
    return join(lead, " ".join(parts))
