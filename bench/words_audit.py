"""Audit: every number a page's closing text quotes, traced to its record and to its chart.

Runs lessons' default experiments in this process over several seeds (the engine, with the
pages' defaults, as bench/lessons_bench.py does), composes each page's closing text (its
takeaway and "More") and its main chart with the recipes and charts the pages use, and for
every number the text quotes asks:

- **record**: is it one of the record's numbers, or one derived from two of them (a ratio, a
  difference in points, a share), in a unit the page uses (%, ms, MiB, KiB, GiB), the same
  within the text's own rounding? A number that is none of these is a number the text made up.
- **chart**: quantities the text quotes with a unit (%, ms, MiB, KiB, GiB, samples/s) that are
  among the chart's data (its traces' values, texts and table), the same within rounding.

Prints a table per lesson: seeds, numbers quoted, traced to the record, quantities also on the
chart, and every number not traced (with its sentence). Exit status 1 if any number was not
traced to its record.

    .venv/bin/python bench/words_audit.py [--seeds 10] [--only regimes,lr_scaling]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lesson_runs import lr_runs, run
from bench.number_trace import audit
from bsdemo import charts, recipes
from bsdemo.config import RunConfig


def regimes(seed: int):
    from bsdemo.runs import JobSnapshot

    runs = recipes.regime_configs(RunConfig(seed=seed), 5, 32, 20.0)
    snaps = [
        (
            name,
            JobSnapshot(
                id=i,
                owner="audit",
                status=r["status"],
                steps={},
                evals={},
                config=vars(cfg),
                end={"summary": r},
            ),
        )
        for i, (name, cfg) in enumerate(runs)
        for r in [run(cfg)]
    ]
    rows = charts.comparison_table(snaps)
    return recipes.regimes_verdict(rows), [rows, [s.config for _, s in snaps]], None


def lr_scaling(seed: int):
    from bsdemo.runs import JobSnapshot

    results = lr_runs(seed, "Linear rule (momentum SGD, k = 8)")
    p = recipes.LR_PRESETS["Linear rule (momentum SGD, k = 8)"]
    base = RunConfig(seed=seed, epochs=p["epochs"], optimizer=p["optimizer"])
    variants = recipes.lr_variants(base, p["ref_batch"], p["ref_lr"], p["k"], p["warmup"])
    snaps = [
        (
            name,
            JobSnapshot(
                id=i,
                owner="audit",
                status=r["status"],
                steps={},
                evals={},
                config=vars(cfg),
                end={"summary": r},
            ),
        )
        for i, ((name, cfg), r) in enumerate(zip(variants, results, strict=True))
    ]
    rows = charts.comparison_table(snaps)
    # the presets too: the text names the warm-up one to try next
    return recipes.lr_verdict(rows), [rows, [s.config for _, s in snaps], recipes.LR_PRESETS], None


def fit_batch(seed: int):
    from bsdemo.engine.fitbatch import fit_batch as fit_batch_run

    cfg = RunConfig(seed=seed)
    budget, _ = recipes.simulated_device(cfg, 0.0)
    records = [r for r in fit_batch_run(cfg, budget, accumulation=4) if r["kind"] == "fit_batch_result"]
    return (recipes.fit_verdict(records, budget, "cpu"), [records, budget], charts.fit_chart(records, budget))


def norms(seed: int):
    from bsdemo.engine.norms import norms_grid

    cells = [
        c
        for c in norms_grid(RunConfig(seed=seed, epochs=2), [2, 4, 8, 32, 128])
        if c["kind"] == "norms_result"
    ]
    return recipes.norms_verdict(cells), cells, charts.norms_chart(cells)


def training_lab(seed: int):
    """The Lab's prediction pair: its default run (batch 32), then batch 256, as two snapshots."""
    from bsdemo.runs import JobSnapshot

    snaps = [
        JobSnapshot(
            id=i + 1,
            owner="audit",
            status=r["status"],
            steps={},
            evals={},
            config=vars(cfg),
            end={"summary": r},
        )
        for i, cfg in enumerate([RunConfig(seed=seed), RunConfig(seed=seed, batch_size=256)])
        for r in [run(cfg)]
    ]
    # updates an epoch: steps / epochs, as the text divides them
    record = [s.summary | {"updates_per_epoch": s.summary["steps"] / s.summary["epochs"]} for s in snaps] + [
        s.config for s in snaps
    ]
    return recipes.lab_verdict(snaps), record, None


def _sweep(cfg: RunConfig, batches: list[int], **options) -> tuple[list[dict], dict]:
    """A sweep's points as the page holds them (each batch's latest round) and its end."""
    from bsdemo.engine.sweep import sweep

    events = list(sweep(cfg, batches, **options))
    points = {e["batch_size"]: e for e in events if e["kind"] == "sweep_point"}
    return [points[b] for b in sorted(points)], events[-1]


def throughput(seed: int):
    from bsdemo.units import powers_of_two

    points, end = _sweep(RunConfig(seed=seed), powers_of_two(1024))
    text = recipes.throughput_verdict(end, points, end.get("peak_source"))
    return (
        text,
        [points, end],
        [
            charts.sweep_throughput_chart(points),
            charts.sweep_step_time_chart(points, end["fit"], end.get("crossover_batch_size")),
        ],
    )


def memory(seed: int):
    from bsdemo.units import MIB, powers_of_two

    points, end = _sweep(
        RunConfig(seed=seed),
        powers_of_two(4096),
        memory_budget_bytes=4 * MIB,
        warmup_steps=1,
        timed_steps=2,
        min_timed_s=0,
        rounds=1,
    )
    chart = charts.memory_breakdown_chart(points, end["fit"], 4 * MIB, end["predicted_max_batch_size"])
    return recipes.memory_verdict(end, points), [points, end, 4 * MIB], chart


def accumulation(seed: int):
    from bsdemo.engine.accumulation import accumulation_check

    r = accumulation_check(RunConfig(seed=seed), 32, 4, 5)
    text = recipes.accumulation_verdict(r)[1] + "\n\n" + recipes.accumulation_why(r)
    # what the text compares across two fields: the accumulated run's samples/s over one batch's
    read = {"speed_ratio": r["accumulated_samples_per_sec"] / r["big_samples_per_sec"]}
    return text, [r, read], charts.accumulation_chart(r)


def finder(seed: int):
    from bsdemo.engine.finder import find_batch_size
    from bsdemo.lessons import load

    cfg = RunConfig(seed=seed)
    budget, _ = recipes.simulated_device(cfg, 0.10)
    events = list(
        find_batch_size(
            cfg,
            memory_budget_bytes=budget,
            margin=0.10,
            target_effective_batch=None,
            reference_batch=32,
            reference_lr=cfg.lr,
        )
    )
    r, probes = events[-1], [e for e in events if e["kind"] == "find_probe"]
    accum = f" × {r['accumulation_steps']} accumulation steps" if r["accumulation_steps"] > 1 else ""
    text = load(Path(recipes.__file__).parents[1] / "content" / "finder.toml").text(
        "use",
        batch=r["batch_size"],
        accum=accum,
        message=r["message"],
        probes=r["probes"],
        tested=", ".join(map(str, r["tested_batch_sizes"])),
        doubling=recipes.doubling_trials(r["max_batch_size"] or 1),
    )
    return text, [r, probes, budget, 0.10], charts.finder_chart(probes, r)


def noise(seed: int):
    from bsdemo.engine.noise import noise_measure

    sizes = [1, 4, 16, 64, 256]
    r = list(noise_measure(RunConfig(seed=seed), sizes, draws=32))[-1]
    # what the text works out: sampling without replacement, (N − B)/(N − 1) at the largest batch
    n = r["train_samples"]
    read = {"without_replacement": (n - sizes[-1]) / (n - 1)}
    return recipes.noise_verdict(r), [r, read], charts.noise_charts(r)[0]


def critical(seed: int):
    from bsdemo.engine.critical import critical_batch

    r = list(critical_batch(RunConfig(seed=seed, lr=0.2)))[-1]
    # what the text compares across two fields: B_simple over the critical batch, as both show
    read = {"b_simple_over_b_crit": round(r["b_simple"]) / round(r["b_crit"]) if r["b_crit"] else []}
    return recipes.critical_verdict(r), [r, read], charts.critical_chart(r)


def sharpness(seed: int):
    from bench.lessons_bench import SHARPNESS_PAGE
    from bsdemo.engine.sharpness import sharpness_study
    from bsdemo.recipes.sharpness import barrier, settled

    r = list(sharpness_study(RunConfig(seed=seed, **SHARPNESS_PAGE)))[-1]
    # what the text reads off the series: each run's late sharpness (the median of its
    # trace's second half) and the loss slice's barrier
    read = {
        "late_sharpness": [settled(run["trace"]) for run in r["runs"]],
        "late_over_edge": [
            settled(run["trace"]) / run["two_over_lr"]
            for run in r["runs"]
            if settled(run["trace"]) is not None
        ],
        "barrier": list(barrier(r["slice"])) if r.get("slice") else [],
    }
    return recipes.sharpness_verdict(r), [r, read], list(charts.sharpness_charts(r))


def ddp(seed: int):
    from bsdemo.engine.ddp import ddp_check

    # the page's defaults: 2 processes × batch 64, 5 steps compared
    r = ddp_check(RunConfig(seed=seed, batch_size=64), processes=2, steps=5)
    # what the text works out from two fields: the all-reduce's share of a step, the speed-up
    read = {
        "allreduce_share": r["allreduce_s"] / r["step_s"],
        "speedup": r["samples_per_sec"] / r["single_process_samples_per_sec"],
    }
    return recipes.ddp_verdict(r), [r, read], charts.ddp_chart(r)


def pipeline(seed: int):
    from bsdemo.engine.pipeline import pipeline_check

    # the page's defaults: batch 128 in 4 micro-batches, 5 steps
    r = pipeline_check(RunConfig(seed=seed, batch_size=128), micro_batches=4, steps=5)
    # what the text works out: the fullest stage (parameters + activations) against one process
    most = max(p + a for p, a in zip(r["stage_parameter_bytes"], r["stage_activation_bytes"], strict=True))
    whole = r["single_parameter_bytes"] + r["single_activation_bytes"]
    read = {"stage_bytes": [most, whole], "stage_share": most / whole}
    return recipes.pipeline_verdict(r), [r, read], charts.pipeline_chart(r)


def architectures(seed: int):
    from bsdemo.architectures import ARCHITECTURES, DEFAULT_BATCHES, DEFAULT_SECONDS
    from bsdemo.engine.architectures import architecture_sweep

    records = list(architecture_sweep(RunConfig(seed=seed), list(ARCHITECTURES), DEFAULT_BATCHES))
    points = [r for r in records if r["kind"] == "architecture_point"]
    summaries = [r for r in records if r["kind"] == "architecture_summary"]
    text = recipes.architecture_verdict(summaries, DEFAULT_SECONDS, points)
    return text, [points, summaries, DEFAULT_SECONDS], None


def profile(seed: int):
    from bsdemo.engine.profile import profile_steps

    cfg = RunConfig(seed=seed)
    events = list(profile_steps(cfg, [8, 512]))
    points = [e for e in events if e["kind"] == "profile_point"]
    cuts = [e for e in events if e["kind"] == "cut_point"]
    _, sweep_end = _sweep(cfg, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
    text = recipes.profile_verdict(points, cuts, events[-1], sweep_end["fit"])
    record = [
        [{k: v for k, v in p.items() if k != "trace_gz_b64"} for p in points],
        cuts,
        events[-1],
        sweep_end["fit"],
    ]
    return text, record, charts.cut_chart(cuts)


LESSONS: dict[str, Callable[[int], tuple]] = {
    "training_lab": training_lab,
    "throughput": throughput,
    "memory": memory,
    "regimes": regimes,
    "lr_scaling": lr_scaling,
    "accumulation": accumulation,
    "finder": finder,
    "architectures": architectures,
    "fit_batch": fit_batch,
    "norms": norms,
    "noise": noise,
    "critical": critical,
    "sharpness": sharpness,
    "profile": profile,
    "ddp": ddp,
    "pipeline": pipeline,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--only", default=",".join(LESSONS))
    args = ap.parse_args()
    failed = False
    print(
        "| lesson | seeds | numbers quoted | traced to the record | control: precise "
        "numbers ×1.37 traced | quantities on the chart |"
    )
    print("|---|---|---|---|---|---|")
    notes = []
    for name in args.only.split(","):
        totals = {"quoted": 0, "untraced": 0, "quantities": 0, "on_chart": 0, "control": 0, "precise": 0}
        for seed in range(args.seeds):
            text, record, chart = LESSONS[name](seed)
            result = audit(text or "", record, chart)
            for k in totals:
                totals[k] += result[k]
            notes += [f"{name} seed {seed}: {m}" for m in result["missing"]]
        failed |= bool(totals["untraced"])
        chart = f"{totals['on_chart']} of {totals['quantities']}" if totals["quantities"] else "–"
        print(
            f"| {name} | {args.seeds} | {totals['quoted']} | "
            f"{totals['quoted'] - totals['untraced']} of {totals['quoted']} | "
            f"{totals['control']} of {totals['precise']} | {chart} |",
            flush=True,
        )
    for note in notes:
        print("not traced:", note)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
