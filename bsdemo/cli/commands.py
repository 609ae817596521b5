"""The commands, run once their flags are checked: each imports torch (the engine) itself,
prints a table or JSON lines, and returns the process's exit code. The studies' and checks'
commands are in bsdemo.cli.studies; `MEASURING` maps every measuring command to its function."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from bsdemo.cli import studies
from bsdemo.cli.output import (
    fmt,
    print_find_result,
    print_summary,
    print_sweep_end,
    print_sweep_table,
)
from bsdemo.config import RunConfig
from bsdemo.recipes import regime_configs, simulated_device
from bsdemo.recipes.measurements import FINDER_DEVICE_MARGIN
from bsdemo.runs import collect
from bsdemo.units import fixed, format_bytes, percent, sig

EXIT_STATUS = {"completed": 0, "cancelled": 130}


def train(cfg: RunConfig, notices: list[str], as_json: bool) -> int:
    from tqdm import tqdm

    from bsdemo.engine.train import train  # imports torch: only once the flags are known good

    for notice in notices:
        print(f"note: {notice}", file=sys.stderr)
    stop = {"requested": False}
    events = train(cfg, should_stop=lambda: stop["requested"])
    # on a terminal only: a pipe or --json gets no bar
    bar = tqdm(
        unit="step",
        file=sys.stderr,
        mininterval=0.1,
        dynamic_ncols=True,
        leave=True,
        disable=as_json or not sys.stderr.isatty(),
    )
    end = None
    while True:
        try:
            event = next(events)
        except StopIteration:
            break
        except KeyboardInterrupt:
            stop["requested"] = True  # the loop ends at the next step with a "cancelled" event
            continue
        if as_json:
            print(json.dumps(event.to_dict()), flush=event.kind != "step")
        elif event.kind == "start":
            print(
                f"Training {cfg.model} on {cfg.dataset} ({event.train_samples} samples) on "
                f"{event.device.get('name')}: batch {cfg.batch_size} × {cfg.accumulation_steps} "
                f"= {event.effective_batch_size} per step, {event.updates_per_epoch} steps per "
                f"epoch, {event.planned_steps} planned.",
                file=sys.stderr,
            )
            bar.reset(total=event.planned_steps)
        elif event.kind == "step":
            bar.set_postfix_str(
                f"loss {fixed(event.loss, 4)}, {fixed(event.samples_per_sec, 0)} samples/s", refresh=False
            )
            bar.update(event.step - bar.n)
        if event.kind == "end":
            end = event
    bar.close()
    if not as_json and end is not None:
        print_summary(end)
    return EXIT_STATUS.get(end.status, 1) if end else 1


def sweep(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.sweep import sweep  # imports torch: only once the flags are known good

    events = sweep(cfg, **options)
    points: dict[int, dict] = {}
    for event in events:  # the first event comes after the budget check: no half table
        if args.json:
            if event["kind"] != "sweep_start":
                print(json.dumps(event), flush=True)
        elif event["kind"] == "sweep_point":  # the table waits for every round
            points[event["batch_size"]] = event
            if not event.get("replaces"):
                print(
                    f"batch {event['batch_size']}: {event['status']} (round 1)", file=sys.stderr, flush=True
                )
        elif event["kind"] == "sweep_end":
            print_sweep_table([points[b] for b in options["batch_sizes"]])
            print_sweep_end(event)
    return 0


def profile(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.profile import profile_steps  # imports torch
    from bsdemo.recipes.profile import profile_lines

    for event in profile_steps(cfg, **options):
        if args.json:
            if event["kind"] != "profile_start":
                print(json.dumps({k: v for k, v in event.items() if k != "trace_gz_b64"}), flush=True)
            continue
        for line in profile_lines(event):
            print(line, flush=True)
    if options.get("trace_dir") and not args.json:
        print(
            f"traces: {options['trace_dir']}/trace_batch<B>.json (open them in "
            "ui.perfetto.dev or chrome://tracing)"
        )
    return 0


def find(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.finder import find_batch_size  # imports torch
    from bsdemo.engine.measure import resolve_device

    budget = options["memory_budget_bytes"]
    if budget is None and resolve_device(cfg.device).type == "cpu":
        # as the page: nothing limits a CPU's memory, so the default is a simulated device
        budget, about = simulated_device(cfg, FINDER_DEVICE_MARGIN)
        print(
            f"note: no --memory-budget on a CPU: a simulated device of {format_bytes(budget)} "
            f"(this model's predicted need at batch {about}, with a "
            f"{percent(FINDER_DEVICE_MARGIN, 0)} margin), as the lab's page uses; --memory-budget "
            "device searches this machine's own memory",
            file=sys.stderr,
        )
    elif budget == "device":
        budget = None
    options |= {"memory_budget_bytes": budget, "reference_lr": cfg.lr}
    for event in find_batch_size(cfg, **options):
        if args.json:
            print(json.dumps(event), flush=True)
        elif event["kind"] == "find_probe":
            peak = fmt(event["peak_memory_bytes"], format_bytes)
            rate = fmt(event["samples_per_sec"], lambda v: f"{fixed(v, 0)} samples/s")
            sim = " (simulated)" if event["simulated"] else ""
            print(
                f"probe {event['probe']}: batch {event['batch_size']:>6} {event['status']:>4}"
                f"{sim}  peak {peak:>10}  {rate:>18}  ({event['reason']})",
                flush=True,
            )
        else:
            print_find_result(event)
    return 0 if event["batch_size"] is not None else 1


def accum_check(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.accumulation import accumulation_check  # imports torch

    r = accumulation_check(cfg, **options)
    micro, k, steps = options["micro_batch"], options["accum"], options["steps"]
    if args.json:
        print(json.dumps(r))
        return 0
    print(
        f"one batch of {micro * k} vs {k} micro-batches of {micro}, {steps} optimizer steps"
        + (" — loss NOT divided by k" if r["unscaled_loss"] else "")
        + (" — BatchNorm model" if r["norm"] == "batch" else "")
        + (" — variable-length sequences, per-token mean per micro-batch" if r["variable_length"] else "")
    )
    print(f"  {'layer':<28} {'max |Δgrad| (step 1)':>21}")
    for layer in r["per_layer"]:
        print(f"  {layer['layer']:<28} {sig(layer['max_abs_grad_diff'], 3):>21}")
    print(
        f"  relative gradient difference {sig(r['rel_grad_diff'])}; max |Δparameter| after "
        f"{steps} steps {sig(r['max_abs_param_diff'])} -> "
        + ("equivalent (float32 rounding)" if r["equivalent"] else "NOT equivalent")
    )
    print(
        f"  peak memory: one batch {format_bytes(r['big_peak_memory_bytes'])}, accumulated "
        f"{format_bytes(r['accumulated_peak_memory_bytes'])} ({r['memory_source']})"
    )
    print(
        f"  samples/s: one batch {fixed(r['big_samples_per_sec'], 0)}, accumulated "
        f"{fixed(r['accumulated_samples_per_sec'], 0)}"
    )
    return 0


def regimes(cfg: RunConfig, args: argparse.Namespace, epochs: int, mini: int, limit: float | None) -> int:
    from bsdemo.engine.regimes import run_regime  # imports torch

    if not args.json:
        print(
            f"{'regime':<22} {'batch':>6} {'updates':>8} {'wall s':>8} {'samples/s':>11} "
            f"{'peak memory':>12} {'train acc':>10} {'test acc':>9}"
        )
    for name, rcfg in regime_configs(cfg, epochs, mini, limit):
        result = run_regime(name, rcfg, emit=(lambda e: print(json.dumps(e))) if args.json else None)
        if args.json:
            print(json.dumps(result), flush=True)
        else:
            capped = " (time cap)" if result["time_capped"] else ""
            print(
                f"{name:<22} {result['batch_size']:>6} {result['weight_updates']:>8} "
                f"{fixed(result['wall_time_s'], 2):>8} "
                f"{fmt(result['samples_per_sec'], lambda v: fixed(v, 0)):>11} "
                f"{fmt(result['peak_memory_bytes'], format_bytes):>12} "
                f"{fmt(result['final_train_accuracy'], percent):>10} "
                f"{fmt(result['test_accuracy'], percent):>9}{capped}",
                flush=True,
            )
    return 0


def datasets(args: argparse.Namespace, cache: Path | None) -> int:
    from bsdemo import datasets

    names = args.names or list(datasets.SOURCES)
    for name in names:
        if args.action == "fetch":
            folder = datasets.fetch(name, cache)
            print(f"{name}: ready in {folder} (checksums verified)")
        else:
            state = "cached" if datasets.is_cached(name, cache) else "not fetched"
            print(f"{name:<8} {state:<12} {datasets.SOURCES[name].base_url}")
    return 0


def warm(runs: list[tuple[str, RunConfig]], folder: Path | None, url: str | None) -> int:
    """Train each (title, config) now and keep the completed ones in the run store (SQLite in
    folder, else PostgreSQL at url)."""
    from bsdemo.store import open_store

    logging.getLogger("bsdemo.store").setLevel(logging.ERROR)  # its trouble is said once, here
    store = open_store(folder, url)
    if not store.available:  # nowhere to keep them: training them would be wasted
        print(
            f"bsdemo warm: the run store at {store.where} could not be used — {store.problem}; "
            "nothing was trained",
            file=sys.stderr,
        )
        return 1
    if store.notice:  # opened, after a salvage
        print(f"note: {store.notice}", file=sys.stderr)
    from bsdemo.engine.train import train  # imports torch

    for title, cfg in runs:
        run = collect(event.to_dict() for event in train(cfg))  # as the scheduler files them
        if run.end["status"] == "completed":
            store.put(
                vars(cfg), run.start["device"], run.start, run.steps.columns, run.evals.columns, run.end
            )
        print(f"{title}: {run.end['status']} — {run.end['message']}")
    print(f"run store {store.where}: {store.count()} runs")
    return 0


# the measuring commands, each called as (cfg, args, **its checked flags); bsdemo train, warm and
# datasets take other arguments
MEASURING = {
    "sweep": sweep,
    "profile": profile,
    "find": find,
    "accum-check": accum_check,
    "regimes": regimes,
    "noise": studies.noise,
    "ddp-check": studies.ddp_check,
    "architectures": studies.architectures,
    "pipeline-check": studies.pipeline_check,
    "fit-batch": studies.fit_batch,
    "critical-batch": studies.critical,
    "sharpness": studies.sharpness,
    "norms": studies.norms,
}
