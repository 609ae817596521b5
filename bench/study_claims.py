"""Lessons 7-12's claims at their defaults (normalisation, gradient noise, the critical batch,
sharpness, fitting a bigger batch, the architecture study), for bench/lessons_bench.py."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from bench.lesson_runs import REPORT, Claim
from bsdemo import recipes
from bsdemo.config import RunConfig
from bsdemo.engine.critical import critical_batch
from bsdemo.engine.fitbatch import fit_batch as fit_batch_run
from bsdemo.engine.noise import noise_measure
from bsdemo.engine.norms import norms_grid
from bsdemo.engine.sharpness import sharpness_study


def fit_batch(seed: int) -> list[Claim]:
    """The fit-a-bigger-batch page's default on the CPU: the digits MLP under the simulated device
    (what fp32 needs at about batch 256), every technique, 4 micro-batches. The page calls a
    saving real only where the allocator's peak is REAL_SAVING under fp32's."""
    from bsdemo.recipes.fitbatch import NAMES, REAL_SAVING

    cfg = RunConfig(seed=seed)
    budget, _ = recipes.simulated_device(cfg, 0.0)
    records = [r for r in fit_batch_run(cfg, budget, accumulation=4) if r["kind"] == "fit_batch_result"]
    by = {r["technique"]: r for r in records}
    text = recipes.fit_verdict(records, budget, "cpu") or ""
    lines = {
        name: next((line for line in text.splitlines() if line.startswith(f"- {label} ")), "")
        for name, label in NAMES.items()
        if name in by
    }
    base = by["fp32"]["real_peak_bytes"]

    def real_saving(name: str) -> bool:
        return by[name]["real_peak_bytes"] <= (1 - REAL_SAVING) * base

    def share(name: str) -> str:
        return f"{by[name]['real_peak_bytes'] / base - 1:+.0%}"

    said_right = all(
        ("a real saving" in lines[n]) == real_saving(n)
        and ("not in real memory" in lines[n]) == (not real_saving(n))
        for n in lines
    )
    speed = {n: by[n]["samples_per_sec"] / by["fp32"]["samples_per_sec"] for n in by}
    return [
        (
            "a saving is called real exactly where the allocator's peak is >= 10% under fp32's",
            said_right,
            ", ".join(f"{n} {share(n)}" for n in lines),
        ),
        (REPORT + "bf16's real saving exists", real_saving("bf16"), share("bf16")),
        (REPORT + "checkpointing's real saving exists", real_saving("checkpointing"), share("checkpointing")),
        (REPORT + "bf16 runs faster than fp32 here", speed["bf16"] > 1, f"{speed['bf16']:.2f}x"),
        (
            REPORT + "checkpointing runs slower than fp32",
            speed["checkpointing"] < 1,
            f"{speed['checkpointing']:.2f}x",
        ),
        (
            REPORT + "no technique changed the training loss by >= 0.01",
            all(abs(r["loss_vs_fp32"]) < 0.01 for r in records if r["technique"] != "fp32"),
            ", ".join(
                f"{r['technique']} {r['loss_vs_fp32']:+.4f}" for r in records if r["technique"] != "fp32"
            ),
        ),
    ]


def norms(seed: int) -> list[Claim]:
    """The page's default grid: the digits MLP, 2 epochs, batches 2, 4, 8, 32, 128."""
    t = time.perf_counter()
    cells = [
        c
        for c in norms_grid(RunConfig(seed=seed, epochs=2), [2, 4, 8, 32, 128])
        if c["kind"] == "norms_result"
    ]
    wall = time.perf_counter() - t
    at = {(c["norm"], c["batch_size"]): c for c in cells}
    bn, gn, ln = (100 * at[n, 2]["test_accuracy"] for n in ("batch", "group", "layer"))
    verdict = recipes.norms_verdict(cells) or ""
    return [
        (
            "at batch 2 BatchNorm is >= 10 points below GroupNorm",
            gn - bn >= 10,
            f"BN {bn:.1f}% vs GN {gn:.1f}%, LN {ln:.1f}%",
        ),
        (
            "the verdict says BatchNorm failed at batch 2",
            "points below" in verdict,
            "said" if "points below" in verdict else "not said",
        ),
        (
            "batch-mates change no GroupNorm/LayerNorm/none prediction, some of BatchNorm's",
            all(c["partner_changed"] == 0 for c in cells if c["norm"] != "batch")
            and at["batch", 2]["partner_changed"] > 0,
            f"BN at 2: {at['batch', 2]['partner_changed']:.0%}, at 128: "
            f"{at['batch', 128]['partner_changed']:.0%}",
        ),
        ("the default grid takes <= 30 s on this CPU", wall <= 30, f"{wall:.1f} s"),
    ]


def noise(seed: int) -> list[Claim]:
    """The page's default measurement: the digits MLP at initialisation, 32 draws per batch."""
    t = time.perf_counter()
    r = list(noise_measure(RunConfig(seed=seed), [1, 4, 16, 64, 256], draws=32))[-1]
    wall = time.perf_counter() - t
    direct, two = r["b_simple"], r["b_simple_two_batch"]
    text = recipes.noise_verdict(r) or ""
    return [
        (
            "the variance slope is -1 +- 0.1 (the page then says 1/B)",
            abs(r["variance_slope"] + 1) <= 0.1 and "fell as 1/B" in text,
            f"{r['variance_slope']:.3f}",
        ),
        (
            "B_simple two-batch within 25% of direct (the page then says they agree)",
            abs(two - direct) <= 0.25 * direct and "of each other" in text,
            f"{direct:.0f} vs {two:.0f}",
        ),
        ("the default measurement takes <= 30 s on this CPU", wall <= 30, f"{wall:.1f} s"),
    ]


def critical(seed: int) -> list[Claim]:
    """The noise page's second study at its defaults: sqrt rule from batch 32 at lr 0.2, at most
    0.8, to training loss 0.1, batches 1, 4, 16, 64, 256 and the full set."""
    t = time.perf_counter()
    r = list(critical_batch(RunConfig(seed=seed, lr=0.2)))[-1]
    wall = time.perf_counter() - t
    b_crit, b_simple = r["b_crit"], r["b_simple"]
    return [
        ("every batch reaches training loss 0.1", all(r["steps"]), "/".join(str(s) for s in r["steps"])),
        ("a critical batch is read off the curve", b_crit is not None, f"{b_crit:.0f}" if b_crit else "none"),
        (
            "critical batch / B_simple within 4x either way (same order)",
            b_crit is not None and 0.25 <= b_crit / b_simple <= 4,
            f"{b_crit:.0f}/{b_simple:.0f} = {b_crit / b_simple:.2f}" if b_crit else "–",
        ),
        ("the default study takes <= 30 s on this CPU", wall <= 30, f"{wall:.1f} s"),
    ]


SHARPNESS_PAGE = {"lr": 0.3, "epochs": None}  # pages/sharpness.py's defaults, digits MLP


def sharpness(seed: int) -> list[Claim]:
    """The page's default study: batch 16 against the full batch, lr 0.3, to training loss
    0.01. Sharpness is claimed; the test-loss difference is reported with its sign per seed."""
    t = time.perf_counter()
    r = list(sharpness_study(RunConfig(seed=seed, **SHARPNESS_PAGE)))[-1]
    wall = time.perf_counter() - t
    small, large = r["runs"]
    a, b = small["top_hessian_eigenvalue"], large["top_hessian_eigenvalue"]
    text = recipes.sharpness_verdict(r) or ""
    d_loss = large["test_loss"] - small["test_loss"]
    d_acc = 100 * (small["test_accuracy"] - large["test_accuracy"])
    late_share = (recipes.sharpness.settled(large["trace"]) or 0) / large["two_over_lr"]
    return [
        (
            "both runs reach training loss 0.01",
            small["reached_at"] is not None and large["reached_at"] is not None,
            f"{small['reached_at']}/{large['reached_at']} steps",
        ),
        (
            "the full batch's minimum is >= 1.2x sharper (the page says so)",
            b >= 1.2 * a and "found the sharper minimum" in text,
            f"{a:.2f} vs {b:.2f} ({b / a:.1f}x)",
        ),
        (
            REPORT + "its random-neighbourhood loss rise is >= 1.2x larger",
            large["neighbourhood_rise"] >= 1.2 * small["neighbourhood_rise"],
            f"{small['neighbourhood_rise']:.2g} vs {large['neighbourhood_rise']:.2g}",
        ),
        (
            "the verdict cites the rise only where it agrees, else says it does not",
            ("does not agree" in text) == (large["neighbourhood_rise"] < 1.2 * small["neighbourhood_rise"]),
            "disagreement named" if "does not agree" in text else "rise cited",
        ),
        (
            "'generalised better' only where test loss and accuracy agree",
            "In this run" not in text
            or not (
                abs(d_loss) > 0.1 * small["test_loss"] and abs(d_acc) >= 0.5 and (d_loss > 0) != (d_acc > 0)
            ),
            "said: "
            + ("better" if "In this run" in text else "disagree" if "disagree on" in text else "equal"),
        ),
        (
            REPORT + "the full batch's late sharpness reaches 90% of 2/lr (the edge of stability)",
            "rose to that edge" in text,
            f"{late_share:.0%} of 2/lr",
        ),
        (REPORT + "full batch's test loss higher (+) than batch 16's", d_loss > 0, f"{d_loss:+.4f}"),
        (REPORT + "batch 16's test accuracy higher (+)", d_acc > 0, f"{d_acc:+.1f} pts"),
        ("the default study takes <= 30 s on this CPU", wall <= 30, f"{wall:.1f} s"),
    ]


def architectures(seed: int) -> list[Claim]:
    """The finder page's architecture study at its defaults (4 architectures x batches 8, 32,
    128, 512, DEFAULT_SECONDS of training each). The page reads a range only from runs that
    learned."""
    from bsdemo.architectures import ARCHITECTURES, DEFAULT_BATCHES, DEFAULT_SECONDS, learned_in_budget
    from bsdemo.engine.architectures import architecture_sweep

    records = list(architecture_sweep(RunConfig(seed=seed), list(ARCHITECTURES), DEFAULT_BATCHES))
    points = [r for r in records if r["kind"] == "architecture_point"]
    summaries = {r["architecture"]: r for r in records if r["kind"] == "architecture_summary"}
    text = recipes.architecture_verdict(list(summaries.values()), DEFAULT_SECONDS, points) or ""

    def ranged(name: str) -> str:
        r = summaries[name]
        return f"{r['range'][0]}-{r['range'][1]}" if r.get("range") else "not judged"

    return [
        (
            "every range is read from runs that learned (closed half the gap to perfect)",
            all(
                learned_in_budget(p)
                for p in points
                if any(
                    s.get("range") and p["architecture"] == a and p["batch_size"] in s["good_batches"]
                    for a, s in summaries.items()
                )
            ),
            "; ".join(f"{a} {ranged(a)}" for a in summaries),
        ),
        (
            REPORT + "the verdict's count of architectures meeting their rule",
            "meets the rule" in text,
            text.split("the measured batch range of ")[1].split(" meets")[0]
            if "the measured batch range of " in text
            else "–",
        ),
        (
            REPORT + "the Transformer learns in its budget",
            summaries["transformer"].get("range") is not None,
            f"best {summaries['transformer'].get('best_quality', 0):.1%}",
        ),
    ]
