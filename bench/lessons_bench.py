"""Each lesson's default experiment over several seeds: does what the page says hold in every one?

Runs the engine directly, in this process, with the pages' defaults (and the recipes the pages
use), and prints a table: lesson, whether the page states the claim ("page") or the bench only
reports it ("report": a number the page gives per run, never promises), the seeds it held in,
and the numbers. A page claim that does not hold in every seed must not be made by its page; the
page then says what the run showed.

    .venv/bin/python bench/lessons_bench.py [--seeds 5 | --seed-list 3,8,13] [--only lr_scaling]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.lesson_runs import REPORT, Claim, lr_runs, run
from bench.study_claims import architectures, critical, fit_batch, noise, norms, sharpness
from bsdemo import recipes
from bsdemo.config import RunConfig
from bsdemo.engine.accumulation import accumulation_check
from bsdemo.engine.finder import find_batch_size
from bsdemo.engine.sweep import sweep
from bsdemo.units import powers_of_two


def training_lab(seed: int) -> list[Claim]:
    """Predict first: batch x8 -> updates per epoch, samples/s and memory."""
    small = run(RunConfig(seed=seed))
    big = run(RunConfig(seed=seed, batch_size=256))
    n = RunConfig().train_samples
    return [
        (
            "updates per epoch = ceil(N / B)",
            small["steps"] == 10 * math.ceil(n / 32) and big["steps"] == 10 * math.ceil(n / 256),
            f"{small['steps']} / {big['steps']}",
        ),
        (
            "batch 256 processes more samples/s than batch 32",
            big["samples_per_sec"] > small["samples_per_sec"],
            f"{small['samples_per_sec']:,.0f} -> {big['samples_per_sec']:,.0f}",
        ),
        (
            "batch 256 needs more (accounted) memory",
            big["peak_memory_bytes"] > small["peak_memory_bytes"],
            f"{small['peak_memory_bytes'] / 2**20:.2f} -> {big['peak_memory_bytes'] / 2**20:.2f} MiB",
        ),
    ]


def throughput(seed: int) -> list[Claim]:
    events = list(sweep(RunConfig(seed=seed), powers_of_two(1024)))
    points = [e for e in events if e["kind"] == "sweep_point" and e["status"] == "ok"]
    end = events[-1]
    rates = {p["batch_size"]: p["samples_per_sec"] for p in points}
    best = max(rates.values())
    return [
        (
            "samples/s rise with the batch (the best at least 5x batch 1's)",
            best > 5 * rates[1],
            f"best/batch-1 {best / rates[1]:.0f}x",
        ),
        # the page's knee sentence follows the reading: a knee, the span the rounds leave it
        # in, or "still rising at the largest batch"
        (
            REPORT + "the knee (or its span) lies below the largest batch",
            (end["knee_batch_size"] or (end["knee_range"] or [1024])[0]) < 1024,
            f"knee {end['knee_batch_size'] or end['knee_range']}",
        ),
        (
            "no share of peak FLOP/s above 100%",
            all(p["share_of_peak"] <= 1.0 for p in points),
            f"max {max(p['share_of_peak'] for p in points):.0%}",
        ),
        (
            "fixed overhead t0 >= 0",
            end["fit"]["t0_s"] >= 0,
            f"t0 {end['fit']['t0_s'] * 1e3:.3g} ms, R² {end['fit']['r2_time']:.2f}"
            + (" (held at 0)" if end["fit"]["t0_constrained"] else ""),
        ),
    ]


def memory(seed: int) -> list[Claim]:
    events = list(sweep(RunConfig(seed=seed), powers_of_two(1024)))
    r2 = events[-1]["fit"]["r2_memory"]
    return [
        (
            "memory grows linearly with the batch (R² >= 0.99; on the CPU by construction: "
            "accounted memory is a sum of per-sample terms)",
            r2 >= 0.99,
            f"R² {r2:.4f}",
        )
    ]


def regimes(seed: int) -> list[Claim]:
    runs = recipes.regime_configs(RunConfig(seed=seed), 5, 32, 20.0)
    results = [(name, cfg, run(cfg)) for name, cfg in runs]
    n = RunConfig().train_samples
    (_, _, sgd), (_, _, full), (_, _, mini) = results
    finished = all(r["status"] == "completed" for _, _, r in results)
    return [
        (
            "weight updates = ceil(N / B) x epochs",
            [r["steps"] for _, _, r in results] == [5 * math.ceil(n / c.batch_size) for _, c, _ in results]
            or not finished,
            " / ".join(str(r["steps"]) for _, _, r in results),
        ),
        (
            "all three finish within their cap",
            finished,
            " / ".join(r["status"] + (" (cap)" if r.get("time_capped") else "") for _, _, r in results),
        ),
        (
            "the full batch's 5 updates leave it far behind the mini-batch",
            full["test_accuracy"] < mini["test_accuracy"] - 0.2,
            f"{full['test_accuracy']:.1%} vs {mini['test_accuracy']:.1%}",
        ),
        (
            "SGD (batch 1) takes the longest",
            sgd["wall_time_s"] > max(full["wall_time_s"], mini["wall_time_s"]),
            f"{sgd['wall_time_s']:.1f} s",
        ),
    ]


def _acc(r: dict) -> float:
    return r["test_accuracy"] if r["status"] == "completed" else 0.0


def lr_scaling(seed: int) -> list[Claim]:
    """The page's default preset: the linear rule recovers what keeping the lr loses."""
    ref, same, linear, sqrt_rule, warm = lr_runs(seed, "Linear rule (momentum SGD, k = 8)")
    return [
        (
            "k=8: the same lr trains worse per epoch (> 1 point below the reference)",
            _acc(same) < _acc(ref) - 0.01,
            f"{_acc(same):.1%} vs {_acc(ref):.1%}",
        ),
        (
            "k=8: the linear rule wins most of it back (within 2 points)",
            _acc(linear) >= _acc(ref) - 0.02,
            f"{_acc(linear):.1%} ({linear['status']})",
        ),
        (
            REPORT + "k=8: the square-root rule recovers it (within 1 point)",
            _acc(sqrt_rule) >= _acc(ref) - 0.01,
            f"{_acc(sqrt_rule):.1%}",
        ),
        (
            REPORT + "k=8: warm-up has a blow-up or spike to prevent",
            linear["status"] == "diverged"
            or linear["peak_step_loss"] >= recipes.SPIKE * linear["first_step_loss"],
            f"{linear['status']}, peak loss {linear['peak_step_loss']:.3g}",
        ),
    ]


def lr_warmup(seed: int) -> list[Claim]:
    """The Warm-up preset: without the ramp the loss spikes and the run ends far behind."""
    ref, same, linear, sqrt_rule, warm = lr_runs(seed, "Warm-up (Adam, k = 32)")
    spike = linear["peak_step_loss"] / linear["first_step_loss"]
    held = warm["peak_step_loss"] / warm["first_step_loss"]
    return [
        (
            f"k=32: without warm-up the loss spikes (peak >= {recipes.SPIKE:g}x its first step's)",
            linear["status"] == "diverged" or spike >= recipes.SPIKE,
            f"{linear['status']}, peak {spike:.0f}x",
        ),
        (
            "k=32: warm-up lowers the peak (the page says 'prevents' only under "
            f"{recipes.SPIKE:g}x, else 'still a spike')",
            warm["status"] != "diverged" and held < spike,
            f"peak {spike:.0f}x -> {held:.1f}x",
        ),
        (
            REPORT + f"k=32: warm-up holds the peak under {recipes.SPIKE:g}x",
            warm["status"] != "diverged" and held < recipes.SPIKE,
            f"peak {held:.1f}x",
        ),
        (
            "k=32: and the warm-up run ends >= 10 points more accurate",
            _acc(warm) >= _acc(linear) + 0.10,
            f"{_acc(linear):.1%} -> {_acc(warm):.1%}",
        ),
        (
            REPORT + "k=32: the warm-up run ends within 2 points of the reference",
            _acc(warm) >= _acc(ref) - 0.02,
            f"{_acc(warm):.1%} vs {_acc(ref):.1%}",
        ),
        (
            REPORT + "k=32: the square-root rule (no warm-up) ends ahead of the warm-up run",
            _acc(sqrt_rule) > _acc(warm),
            f"{_acc(sqrt_rule):.1%} vs {_acc(warm):.1%}",
        ),
    ]


def lr_grid(seed: int) -> list[Claim]:
    """The lr page's grid at its defaults (digits MLP, the page's optimizer, 3 epochs a cell,
    batches 8 to 512, lr 0.01 to 1). The page describes the best lr per batch as it is."""
    from bsdemo.lessonlinks import default_optimizer

    cells = []
    base = RunConfig(seed=seed, optimizer=default_optimizer("lr", "digits-mlp"))
    for _, cfg in recipes.lr_grid(base, 3):
        r = run(cfg)
        cells.append(
            {
                "batch": cfg.batch_size,
                "lr": cfg.lr,
                "diverged": r["status"] == "diverged",
                "accuracy": r["test_accuracy"] if r["status"] == "completed" else None,
            }
        )
    best = recipes.best_lr_per_batch(cells)
    text = recipes.best_lr_verdict(best, recipes.GRID_LRS) or ""
    path = " ".join(f"{best[b]:g}" for b in sorted(best))
    closest = text.split("closest to ")[1].split(".")[0] if "closest to " in text else "?"
    rises = [
        a <= b
        for a, b in zip([best[b] for b in sorted(best)], [best[b] for b in sorted(best)][1:], strict=False)
    ]
    return [
        (
            "the verdict says 'rises with the batch' nowhere (it describes the path)",
            "rises with the batch" not in text and "tolerates" not in text,
            path,
        ),
        (REPORT + "the best lr never falls as the batch grows", all(rises), path),
        (REPORT + "the best lr is closest to the linear rule", closest == "the linear rule", closest),
    ]


def accumulation(seed: int) -> list[Claim]:
    ok = accumulation_check(RunConfig(seed=seed), 32, 4, 5)
    unscaled = accumulation_check(RunConfig(seed=seed), 32, 4, 5, unscaled_loss=True)
    bn = accumulation_check(RunConfig(seed=seed, norm="batch"), 32, 4, 5)
    return [
        (
            "4 x 32 accumulated equals one batch of 128 (gradients and parameters)",
            ok["equivalent"] and not ok["drift_grew"],
            f"rel grad {ok['rel_grad_diff']:.1e}, param {ok['max_abs_param_diff']:.1e}",
        ),
        (
            "forgetting 1/k: not equivalent",
            not unscaled["equivalent"],
            f"rel grad {unscaled['rel_grad_diff']:.2f}",
        ),
        ("BatchNorm: not equivalent", not bn["equivalent"], f"rel grad {bn['rel_grad_diff']:.2f}"),
    ]


def finder(seed: int) -> list[Claim]:
    cfg = RunConfig(seed=seed)
    budget, about = recipes.simulated_device(cfg, 0.10)
    events = list(find_batch_size(cfg, memory_budget_bytes=budget, margin=0.10))
    result = events[-1]
    tested = {e["batch_size"]: e for e in events if e["kind"] == "find_probe"}
    best = result["max_batch_size"]
    return [
        (
            "the answer is a batch it ran, below the full batch",
            best in tested and best < cfg.train_samples,
            f"batch {best} (device sized for ~{about}), {result['probes']} probes",
        ),
        (
            "its measured peak fits the budget less the margin",
            tested[best]["peak_memory_bytes"] <= budget * 0.9,
            f"{tested[best]['peak_memory_bytes'] / 2**20:.2f} of {budget * 0.9 / 2**20:.2f} MiB",
        ),
    ]


LESSONS: dict[str, Callable[[int], list[Claim]]] = {
    "training_lab": training_lab,
    "throughput": throughput,
    "memory": memory,
    "regimes": regimes,
    "lr_scaling": lr_scaling,
    "lr_scaling (warm-up)": lr_warmup,
    "lr_grid": lr_grid,
    "accumulation": accumulation,
    "finder": finder,
    "fit_batch": fit_batch,
    "norms": norms,
    "noise": noise,
    "critical": critical,
    "sharpness": sharpness,
    "architectures": architectures,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0 to N-1")
    ap.add_argument("--seed-list", help="comma-separated seeds (instead of --seeds)")
    ap.add_argument("--only", help="comma-separated lesson names")
    ap.add_argument(
        "--threads", type=int, default=None, help="torch threads (1: accuracies the same on a busy machine)"
    )
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seed_list.split(",")] if args.seed_list else list(range(args.seeds))
    names = args.only.split(",") if args.only else list(LESSONS)
    print(
        f"seeds {','.join(map(str, seeds))}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, " + ("CPU" if not torch.cuda.is_available() else "CUDA")
    )
    print(f"{'lesson':<20} {'kind':<6} {'held':>5}  claim — numbers per seed")
    for name in names:
        t = time.perf_counter()
        per_seed = [LESSONS[name](seed) for seed in seeds]
        for i, (claim, _, _) in enumerate(per_seed[0]):
            held = sum(seed_claims[i][1] for seed_claims in per_seed)
            numbers = "; ".join(seed_claims[i][2] for seed_claims in per_seed)
            kind, text = ("report", claim[len(REPORT) :]) if claim.startswith(REPORT) else ("page", claim)
            print(f"{name:<20} {kind:<6} {held}/{len(seeds):<3}  {text} — {numbers}", flush=True)
        print(f"{'':<20} ({time.perf_counter() - t:.0f} s)")


if __name__ == "__main__":
    main()
