"""The commands, run once their flags are checked: each imports torch (the engine) itself,
prints a table or JSON lines, and returns the process's exit code."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from bsdemo.cli.output import (
    fmt,
    print_find_result,
    print_summary,
    print_sweep_end,
    print_sweep_table,
    single,
    stream,
)
from bsdemo.config import RunConfig
from bsdemo.recipes import regime_configs, simulated_device
from bsdemo.recipes.measurements import FINDER_DEVICE_MARGIN
from bsdemo.runs import collect
from bsdemo.units import fixed, format_bytes, percent, setting, sig, signed

EXIT_STATUS = {"completed": 0, "cancelled": 130}


def train(cfg: RunConfig, notices: list[str], as_json: bool) -> int:
    from tqdm import tqdm

    from bsdemo.engine.train import train  # imports torch: only once the flags are known good

    for notice in notices:
        print(f"note: {notice}", file=sys.stderr)
    stop = {"requested": False}
    events = train(cfg, should_stop=lambda: stop["requested"])
    # on a terminal only: a pipe or --json gets no bar
    bar = tqdm(unit="step", file=sys.stderr, mininterval=0.1, dynamic_ncols=True, leave=True,
               disable=as_json or not sys.stderr.isatty())
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
            print(f"Training {cfg.model} on {cfg.dataset} ({event.train_samples} samples) on "
                  f"{event.device.get('name')}: batch {cfg.batch_size} × {cfg.accumulation_steps} "
                  f"= {event.effective_batch_size} per step, {event.updates_per_epoch} steps per "
                  f"epoch, {event.planned_steps} planned.", file=sys.stderr)
            bar.reset(total=event.planned_steps)
        elif event.kind == "step":
            bar.set_postfix_str(f"loss {fixed(event.loss, 4)}, {fixed(event.samples_per_sec, 0)} samples/s",
                                refresh=False)
            bar.update(event.step - bar.n)
        if event.kind == "end":
            end = event
    bar.close()
    if not as_json and end is not None:
        print_summary(end)
    return EXIT_STATUS.get(end.status, 1) if end else 1


def sweep(cfg: RunConfig, args: argparse.Namespace, sizes: list[int], budget: int | None,
          warmup: int, timed: int, min_time: float, rounds: int) -> int:
    from bsdemo.engine.sweep import sweep  # imports torch: only once the flags are known good

    events = sweep(cfg, sizes, warmup_steps=warmup, timed_steps=timed, min_timed_s=min_time,
                   rounds=rounds, memory_budget_bytes=budget,
                   continue_after_oom=args.continue_after_oom)
    points: dict[int, dict] = {}
    for event in events:  # the first event comes after the budget check: no half table
        if args.json:
            if event["kind"] != "sweep_start":
                print(json.dumps(event), flush=True)
        elif event["kind"] == "sweep_point":  # the table waits for every round
            points[event["batch_size"]] = event
            if not event.get("replaces"):
                print(f"batch {event['batch_size']}: {event['status']} (round 1)",
                      file=sys.stderr, flush=True)
        elif event["kind"] == "sweep_end":
            print_sweep_table([points[b] for b in sizes])
            print_sweep_end(event)
    return 0


def profile(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.profile import profile_steps  # imports torch
    from bsdemo.recipes.profile import profile_lines

    for event in profile_steps(cfg, **options):
        if args.json:
            if event["kind"] != "profile_start":
                print(json.dumps({k: v for k, v in event.items() if k != "trace_gz_b64"}),
                      flush=True)
            continue
        for line in profile_lines(event):
            print(line, flush=True)
    if options.get("trace_dir") and not args.json:
        print(f"traces: {options['trace_dir']}/trace_batch<B>.json (open them in "
              "ui.perfetto.dev or chrome://tracing)")
    return 0


def find(cfg: RunConfig, args: argparse.Namespace, budget: int | None, margin: float,
          target: int | None, reference: int, max_batch: int | None) -> int:
    from bsdemo.engine.finder import find_batch_size  # imports torch
    from bsdemo.engine.measure import resolve_device

    if budget is None and resolve_device(cfg.device).type == "cpu":
        # as the page: nothing limits a CPU's memory, so the default is a simulated device
        budget, about = simulated_device(cfg, FINDER_DEVICE_MARGIN)
        print(f"note: no --memory-budget on a CPU: a simulated device of {format_bytes(budget)} "
              f"(this model's predicted need at batch {about}, with a "
              f"{percent(FINDER_DEVICE_MARGIN, 0)} margin), as the lab's page uses; --memory-budget "
              "device searches this machine's own memory", file=sys.stderr)
    elif budget == "device":
        budget = None
    for event in find_batch_size(cfg, memory_budget_bytes=budget, margin=margin,
                                 target_effective_batch=target, reference_batch=reference,
                                 reference_lr=cfg.lr, max_batch=max_batch):
        if args.json:
            print(json.dumps(event), flush=True)
        elif event["kind"] == "find_probe":
            peak = fmt(event["peak_memory_bytes"], format_bytes)
            rate = fmt(event["samples_per_sec"], lambda v: f"{fixed(v, 0)} samples/s")
            sim = " (simulated)" if event["simulated"] else ""
            print(f"probe {event['probe']}: batch {event['batch_size']:>6} {event['status']:>4}"
                  f"{sim}  peak {peak:>10}  {rate:>18}  ({event['reason']})", flush=True)
        else:
            print_find_result(event)
    return 0 if event["batch_size"] is not None else 1


def accum_check(cfg: RunConfig, args: argparse.Namespace, micro: int, k: int, steps: int) -> int:
    from bsdemo.engine.accumulation import accumulation_check  # imports torch

    r = accumulation_check(cfg, micro, k, steps, unscaled_loss=args.unscaled_loss,
                           variable_length=args.variable_length)
    if args.json:
        print(json.dumps(r))
        return 0
    print(f"one batch of {micro * k} vs {k} micro-batches of {micro}, {steps} optimizer steps"
          + (" — loss NOT divided by k" if r["unscaled_loss"] else "")
          + (" — BatchNorm model" if r["norm"] == "batch" else "")
          + (" — variable-length sequences, per-token mean per micro-batch"
             if r["variable_length"] else ""))
    print(f"  {'layer':<28} {'max |Δgrad| (step 1)':>21}")
    for layer in r["per_layer"]:
        print(f"  {layer['layer']:<28} {sig(layer['max_abs_grad_diff'], 3):>21}")
    print(f"  relative gradient difference {sig(r['rel_grad_diff'])}; max |Δparameter| after "
          f"{steps} steps {sig(r['max_abs_param_diff'])} -> "
          + ("equivalent (float32 rounding)" if r["equivalent"] else "NOT equivalent"))
    print(f"  peak memory: one batch {format_bytes(r['big_peak_memory_bytes'])}, accumulated "
          f"{format_bytes(r['accumulated_peak_memory_bytes'])} ({r['memory_source']})")
    print(f"  samples/s: one batch {fixed(r['big_samples_per_sec'], 0)}, accumulated "
          f"{fixed(r['accumulated_samples_per_sec'], 0)}")
    return 0


def regimes(cfg: RunConfig, args: argparse.Namespace, epochs: int, mini: int,
             limit: float | None) -> int:
    from bsdemo.engine.regimes import run_regime  # imports torch

    if not args.json:
        print(f"{'regime':<22} {'batch':>6} {'updates':>8} {'wall s':>8} {'samples/s':>11} "
              f"{'peak memory':>12} {'train acc':>10} {'test acc':>9}")
    for name, rcfg in regime_configs(cfg, epochs, mini, limit):
        result = run_regime(name, rcfg, emit=(lambda e: print(json.dumps(e))) if args.json
                            else None)
        if args.json:
            print(json.dumps(result), flush=True)
        else:
            capped = " (time cap)" if result["time_capped"] else ""
            print(f"{name:<22} {result['batch_size']:>6} {result['weight_updates']:>8} "
                  f"{fixed(result['wall_time_s'], 2):>8} "
                  f"{fmt(result['samples_per_sec'], lambda v: fixed(v, 0)):>11} "
                  f"{fmt(result['peak_memory_bytes'], format_bytes):>12} "
                  f"{fmt(result['final_train_accuracy'], percent):>10} "
                  f"{fmt(result['test_accuracy'], percent):>9}{capped}", flush=True)
    return 0


def norms(cfg: RunConfig, args: argparse.Namespace, batch_sizes: list[int],
          norms: list[str]) -> int:
    from bsdemo.engine.norms import norms_grid  # imports torch

    stream(norms_grid(cfg, batch_sizes, norms), args.json,
           f"{'norm':<6} {'batch':>6} {'train acc':>10} {'test acc':>9} "
           f"{'test, batch stats':>18} {'changed by batch-mates':>23}",
           {"norms_result": lambda c: (
               f"{c['norm']:<6} {c['batch_size']:>6} {fmt(c['train_accuracy'], percent):>10} "
               f"{fmt(c['test_accuracy'], percent):>9} {percent(c['train_mode_test_accuracy']):>18} "
               f"{percent(c['partner_changed']):>23}")},
           json_kinds=("norms_result",))
    return 0


def noise(cfg: RunConfig, args: argparse.Namespace, batch_sizes: list[int], draws: int,
          after_steps: int) -> int:
    from bsdemo.engine.noise import noise_measure  # imports torch

    def result(e: dict) -> str:
        (low, high), (low2, high2) = e["b_simple_range"], e["b_simple_two_batch_range"]
        return (f"variance slope (log-log) {fixed(e['variance_slope'], 2)}; B_simple "
                f"{e['b_simple']:.0f} (direct, {low:.0f}–{high:.0f}), "
                f"{e['b_simple_two_batch']:.0f} (two-batch "
                f"{'/'.join(map(str, e['two_batch_sizes']))}, {low2:.0f}–{high2:.0f})")

    stream(noise_measure(cfg, batch_sizes, draws, after_steps), args.json,
           f"{'batch':>7} {'E|g_B - G|²':>14} {'cos(g_B, G)':>12}",
           {"noise_point": lambda e: f"{e['batch_size']:>7} {sig(e['variance'], 4):>14} "
                                     f"{fixed(e['cosine'], 3):>12}",
            "noise_result": result})
    return 0


def ddp_check(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.ddp import ddp_check as check  # imports torch

    single(check(cfg, **options), args.json, lambda r: [
        r["message"],
        f"equivalent to one process: {'yes' if r['equivalent'] else 'NO'} (max |Δparam| "
        f"{sig(r['max_abs_param_diff'], 2)}); samples/s {fixed(r['samples_per_sec'], 0)} with "
        f"{r['processes']} processes, {fixed(r['single_process_samples_per_sec'], 0)} in one; "
        f"scaling efficiency {percent(r['scaling_efficiency'], 0)}"])
    return 0


def architectures(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.architectures import architecture_sweep  # imports torch

    def point(e: dict) -> str:
        quality = ("–" if e["quality"] is None else f"FD {sig(e['quality'])}"
                   if e["architecture"] == "gan" else f"acc {percent(e['quality'])}")
        return (f"{e['architecture']:<14} {e['batch_size']:>6} {fmt(e['steps'], '{:,}'):>7} "
                f"{fmt(e['samples_per_sec'], lambda v: fixed(v, 0)):>10} "
                f"{fmt(e['peak_memory_bytes'], format_bytes):>12} {quality:>16}")

    def summary(e: dict) -> str | None:
        if not e.get("range"):
            return None
        lo, hi = e["range"]
        span = str(lo) if lo == hi else f"{lo}–{hi}"
        return (f"  {e['label']}: measured {span} against the rule's {e['rule_text']} "
                f"({e['agreement']}). {e['why']}")

    stream(architecture_sweep(cfg, **options), args.json,
           f"{'architecture':<14} {'batch':>6} {'steps':>7} {'samples/s':>10} "
           f"{'peak memory':>12} {'quality':>16}",
           {"architecture_point": point, "architecture_summary": summary})
    return 0


def pipeline_check(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.pipeline import pipeline_check as check  # imports torch

    single(check(cfg, **options), args.json, lambda r: [r["message"]] + [
        f"stage {s}: parameters {format_bytes(r['stage_parameter_bytes'][s])}, activations "
        f"held {format_bytes(r['stage_activation_bytes'][s])}; per micro-batch forward "
        f"{fixed(r['stage_forward_s'][s] * 1e3, 2)} ms, backward "
        f"{fixed(r['stage_backward_s'][s] * 1e3, 2)} ms"
        for s in range(r["stages"])] + [
        f"one process: parameters {format_bytes(r['single_parameter_bytes'])}, activations held "
        f"{format_bytes(r['single_activation_bytes'])}; transfer of one micro-batch's "
        f"activations ({format_bytes(r['transfer_bytes'])}) {fixed(r['transfer_s'] * 1e3, 3)} ms; "
        f"step {fixed(r['step_s'] * 1e3, 1)} ms in the pipeline, "
        f"{fixed(r['single_process_step_s'] * 1e3, 1)} ms in one process; "
        f"bubble {percent(r['bubble'], 0)} (GPipe's ideal {percent(r['ideal_bubble'], 0)})"])
    return 0


def fit_batch(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.fitbatch import fit_batch  # imports torch

    # the header after the first record: a budget too small raises before any
    stream(fit_batch(cfg, **options), args.json,
           f"{'technique':<20} {'largest batch':>14} {'effective':>10} {'samples/s':>11} "
           f"{'peak memory':>12} {'loss after':>11} {'vs fp32':>9}",
           {"fit_batch_result": lambda e: (
               f"{e['technique']:<20} {e['max_batch_size']:>14,} {e['effective_batch_size']:>10,} "
               f"{fmt(e['samples_per_sec'], lambda v: fixed(v, 0)):>11} "
               f"{fmt(e['peak_memory_bytes'], format_bytes):>12} {fixed(e['loss_after'], 4):>11} "
               f"{signed(e['loss_vs_fp32'], 4):>9}")},
           header_first=False)
    return 0


def critical(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.critical import critical_batch  # imports torch

    def point(e: dict) -> str:
        steps = (f"{e['reached_at']:,}" if e["reached_at"] else f"{e['status']} at {e['steps']:,}")
        return f"{e['batch_size']:>7} {setting(e['lr'], 4):>8} {steps:>16} {fmt(e['samples'], '{:,}'):>10}"

    stream(critical_batch(cfg, **options), args.json,
           f"{'batch':>7} {'lr':>8} {'steps to target':>16} {'samples':>10}",
           {"critical_point": point})
    return 0


def sharpness(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.sharpness import sharpness_study  # imports torch

    stream(sharpness_study(cfg, **options), args.json,
           f"{'run':<18} {'batch':>6} {'lr':>7} {'steps':>6} {'train loss':>11} "
           f"{'test loss':>10} {'test acc':>9} {'top eigenvalue':>15} {'2/lr':>7}",
           {"sharpness_progress": lambda e: None,  # the table has a line per finished run
            "sharpness_run": lambda e: (
                f"{e['label']:<18} {e['batch_size']:>6} {setting(e['lr'], 3):>7} {e['steps']:>6} "
                f"{fixed(e['train_loss'], 4):>11} {fixed(e['test_loss'], 4):>10} "
                f"{percent(e['test_accuracy']):>9} "
                f"{sig(e['top_hessian_eigenvalue'], 3):>15} {sig(e['two_over_lr'], 3):>7}"
                + ("" if e["status"] == "completed" else f"  ({e['status']})"))})
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
        print(f"bsdemo warm: the run store at {store.where} could not be used — {store.problem}; "
              "nothing was trained", file=sys.stderr)
        return 1
    if store.notice:  # opened, after a salvage
        print(f"note: {store.notice}", file=sys.stderr)
    from bsdemo.engine.train import train  # imports torch

    for title, cfg in runs:
        run = collect(event.to_dict() for event in train(cfg))  # as the scheduler files them
        if run.end["status"] == "completed":
            store.put(vars(cfg), run.start["device"], run.start, run.steps.columns,
                      run.evals.columns, run.end)
        print(f"{title}: {run.end['status']} — {run.end['message']}")
    print(f"run store {store.where}: {store.count()} runs")
    return 0


# the measuring commands, each called as (cfg, args, **its checked flags); bsdemo train, warm and
# datasets take other arguments
MEASURING = {"sweep": sweep, "profile": profile, "find": find, "accum-check": accum_check,
             "regimes": regimes, "noise": noise, "ddp-check": ddp_check,
             "architectures": architectures, "pipeline-check": pipeline_check,
             "fit-batch": fit_batch, "critical-batch": critical, "sharpness": sharpness,
             "norms": norms}
