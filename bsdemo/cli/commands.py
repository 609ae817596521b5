"""The commands, run once their flags are checked: each imports torch (the engine) itself,
prints a table or JSON lines, and returns the process's exit code."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bsdemo.config import RunConfig
from bsdemo.recipes import regime_configs, simulated_device
from bsdemo.recipes.measurements import FINDER_DEVICE_MARGIN
from bsdemo.runs import collect
from bsdemo.units import format_bytes

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
            bar.set_postfix_str(f"loss {event.loss:.4f}, {event.samples_per_sec:,.0f} samples/s",
                                refresh=False)
            bar.update(event.step - bar.n)
        if event.kind == "end":
            end = event
    bar.close()
    if not as_json and end is not None:
        _print_summary(end)
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
            _print_sweep_table([points[b] for b in sizes])
            _print_sweep_end(event)
    return 0


def _print_sweep_table(points: list[dict]) -> None:
    print(f"{'batch':>7} {'status':>9} {'samples/s':>12} {'middle half':>19} {'step time':>11} "
          f"{'rounds':>6} {'peak memory':>12}  source")
    for p in points:
        timing = p.get("timing") or {}
        rate = timing.get("samples_per_sec")
        middle = f"{rate['q1']:,.0f}–{rate['q3']:,.0f}" if rate else ""
        sim = " (simulated)" if p["simulated"] else ""
        print(f"{p['batch_size']:>7} {p['status']:>9} {_fmt(p['samples_per_sec'], '{:,.0f}'):>12} "
              f"{middle:>19} {_fmt(p['step_time_s'], '{:.3g} s'):>11} "
              f"{timing.get('rounds', ''):>6} {_fmt(p['peak_memory_bytes'], format_bytes):>12}  "
              f"{p['memory_source'] or ''}{sim}")
    clocks = {(p.get("timing") or {}).get("clock") for p in points} - {None}
    if clocks:
        print(f"timed by {', '.join(sorted(clocks))}; middle half: the quartiles of the timed steps")


def find(cfg: RunConfig, args: argparse.Namespace, budget: int | None, margin: float,
          target: int | None, reference: int, max_batch: int | None) -> int:
    from bsdemo.engine.finder import find_batch_size  # imports torch
    from bsdemo.engine.measure import resolve_device

    if budget is None and resolve_device(cfg.device).type == "cpu":
        # as the page: nothing limits a CPU's memory, so the default is a simulated device
        budget, about = simulated_device(cfg, FINDER_DEVICE_MARGIN)
        print(f"note: no --memory-budget on a CPU: a simulated device of {format_bytes(budget)} "
              f"(this model's predicted need at batch {about}, with a "
              f"{FINDER_DEVICE_MARGIN:.0%} margin), as the lab's page uses; --memory-budget "
              "device searches this machine's own memory", file=sys.stderr)
    elif budget == "device":
        budget = None
    for event in find_batch_size(cfg, memory_budget_bytes=budget, margin=margin,
                                 target_effective_batch=target, reference_batch=reference,
                                 reference_lr=cfg.lr, max_batch=max_batch):
        if args.json:
            print(json.dumps(event), flush=True)
        elif event["kind"] == "find_probe":
            peak = _fmt(event["peak_memory_bytes"], format_bytes)
            rate = _fmt(event["samples_per_sec"], "{:,.0f} samples/s")
            sim = " (simulated)" if event["simulated"] else ""
            print(f"probe {event['probe']}: batch {event['batch_size']:>6} {event['status']:>4}"
                  f"{sim}  peak {peak:>10}  {rate:>18}  ({event['reason']})", flush=True)
        else:
            _print_find_result(event)
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
        print(f"  {layer['layer']:<28} {layer['max_abs_grad_diff']:>21.3g}")
    print(f"  relative gradient difference {r['rel_grad_diff']:.3g}; max |Δparameter| after "
          f"{steps} steps {r['max_abs_param_diff']:.3g} -> "
          + ("equivalent (float32 rounding)" if r["equivalent"] else "NOT equivalent"))
    print(f"  peak memory: one batch {format_bytes(r['big_peak_memory_bytes'])}, accumulated "
          f"{format_bytes(r['accumulated_peak_memory_bytes'])} ({r['memory_source']})")
    print(f"  samples/s: one batch {r['big_samples_per_sec']:,.0f}, accumulated "
          f"{r['accumulated_samples_per_sec']:,.0f}")
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
                  f"{result['wall_time_s']:>8.2f} {_fmt(result['samples_per_sec'], '{:,.0f}'):>11} "
                  f"{_fmt(result['peak_memory_bytes'], format_bytes):>12} "
                  f"{_fmt(result['final_train_accuracy'], '{:.1%}'):>10} "
                  f"{_fmt(result['test_accuracy'], '{:.1%}'):>9}{capped}", flush=True)
    return 0


def norms(cfg: RunConfig, args: argparse.Namespace, batch_sizes: list[int],
          norms: list[str]) -> int:
    from bsdemo.engine.norms import norms_grid  # imports torch

    if not args.json:
        print(f"{'norm':<6} {'batch':>6} {'train acc':>10} {'test acc':>9} "
              f"{'test, batch stats':>18} {'changed by batch-mates':>23}")
    for cell in norms_grid(cfg, batch_sizes, norms):
        if args.json:
            if cell["kind"] == "norms_result":
                print(json.dumps(cell), flush=True)
        elif cell["kind"] == "norms_result":
            print(f"{cell['norm']:<6} {cell['batch_size']:>6} "
                  f"{_fmt(cell['train_accuracy'], '{:.1%}'):>10} "
                  f"{_fmt(cell['test_accuracy'], '{:.1%}'):>9} "
                  f"{cell['train_mode_test_accuracy']:>18.1%} "
                  f"{cell['partner_changed']:>23.1%}", flush=True)
        else:
            print(cell["message"])
    return 0


def noise(cfg: RunConfig, args: argparse.Namespace, batch_sizes: list[int], draws: int,
          after_steps: int) -> int:
    from bsdemo.engine.noise import noise_measure  # imports torch

    if not args.json:
        print(f"{'batch':>7} {'E|g_B - G|²':>14} {'cos(g_B, G)':>12}")
    for event in noise_measure(cfg, batch_sizes, draws, after_steps):
        if args.json:
            print(json.dumps(event), flush=True)
        elif event["kind"] == "noise_point":
            print(f"{event['batch_size']:>7} {event['variance']:>14.4g} {event['cosine']:>12.3f}",
                  flush=True)
        else:
            low, high = event["b_simple_range"]
            low2, high2 = event["b_simple_two_batch_range"]
            print(f"variance slope (log-log) {event['variance_slope']:.2f}; B_simple "
                  f"{event['b_simple']:.0f} (direct, {low:.0f}–{high:.0f}), "
                  f"{event['b_simple_two_batch']:.0f} (two-batch "
                  f"{'/'.join(map(str, event['two_batch_sizes']))}, {low2:.0f}–{high2:.0f})")
    return 0


def ddp_check(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.ddp import ddp_check as check  # imports torch

    r = check(cfg, **options)
    if args.json:
        print(json.dumps(r))
        return 0
    print(r["message"])
    print(f"equivalent to one process: {'yes' if r['equivalent'] else 'NO'} (max |Δparam| "
          f"{r['max_abs_param_diff']:.2g}); samples/s {r['samples_per_sec']:,.0f} with "
          f"{r['processes']} processes, {r['single_process_samples_per_sec']:,.0f} in one; "
          f"scaling efficiency {r['scaling_efficiency']:.0%}")
    if r.get("too_noisy"):
        print(f"too noisy to read: {r['too_noisy']}")
    return 0


def architectures(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.architectures import architecture_sweep  # imports torch

    if not args.json:
        print(f"{'architecture':<14} {'batch':>6} {'steps':>7} {'samples/s':>10} {'peak memory':>12} "
              f"{'quality':>16}")
    for event in architecture_sweep(cfg, **options):
        if args.json:
            print(json.dumps(event), flush=True)
        elif event["kind"] == "architecture_point":
            quality = ("–" if event["quality"] is None else f"FD {event['quality']:.3g}"
                       if event["architecture"] == "gan" else f"acc {event['quality']:.1%}")
            print(f"{event['architecture']:<14} {event['batch_size']:>6} "
                  f"{_fmt(event['steps'], '{:,}'):>7} {_fmt(event['samples_per_sec'], '{:,.0f}'):>10} "
                  f"{_fmt(event['peak_memory_bytes'], format_bytes):>12} {quality:>16}", flush=True)
        elif event["kind"] == "architecture_summary" and event.get("range"):
            lo, hi = event["range"]
            span = str(lo) if lo == hi else f"{lo}–{hi}"
            print(f"  {event['label']}: measured {span} against the rule's {event['rule_text']} "
                  f"({event['agreement']}). {event['why']}", flush=True)
        elif event["kind"] == "architectures_end":
            print(event["message"])
    return 0


def pipeline_check(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.pipeline import pipeline_check as check  # imports torch

    r = check(cfg, **options)
    if args.json:
        print(json.dumps(r))
        return 0
    print(r["message"])
    for s in range(r["stages"]):
        print(f"stage {s}: parameters {format_bytes(r['stage_parameter_bytes'][s])}, activations "
              f"held {format_bytes(r['stage_activation_bytes'][s])}; per micro-batch forward "
              f"{r['stage_forward_s'][s] * 1e3:.2f} ms, backward "
              f"{r['stage_backward_s'][s] * 1e3:.2f} ms")
    print(f"one process: parameters {format_bytes(r['single_parameter_bytes'])}, activations held "
          f"{format_bytes(r['single_activation_bytes'])}; transfer of one micro-batch's "
          f"activations ({format_bytes(r['transfer_bytes'])}) {r['transfer_s'] * 1e3:.3f} ms; "
          f"step {r['step_s'] * 1e3:.1f} ms in the pipeline, {r['single_process_step_s'] * 1e3:.1f} "
          f"ms in one process; bubble {r['bubble']:.0%} (GPipe's ideal {r['ideal_bubble']:.0%})")
    if r.get("too_noisy"):
        print(f"too noisy to read: {r['too_noisy']}")
    return 0


def fit_batch(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.fitbatch import fit_batch  # imports torch

    for i, event in enumerate(fit_batch(cfg, **options)):  # a budget too small raises first
        if i == 0 and not args.json:
            print(f"{'technique':<20} {'largest batch':>14} {'effective':>10} {'samples/s':>11} "
                  f"{'peak memory':>12} {'loss after':>11} {'vs fp32':>9}")
        if args.json:
            print(json.dumps(event), flush=True)
        elif event["kind"] == "fit_batch_result":
            print(f"{event['technique']:<20} {event['max_batch_size']:>14,} "
                  f"{event['effective_batch_size']:>10,} "
                  f"{_fmt(event['samples_per_sec'], '{:,.0f}'):>11} "
                  f"{_fmt(event['peak_memory_bytes'], format_bytes):>12} "
                  f"{event['loss_after']:>11.4f} {event['loss_vs_fp32']:>+9.4f}", flush=True)
        else:
            print(event["message"])
    return 0


def critical(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.critical import critical_batch  # imports torch

    if not args.json:
        print(f"{'batch':>7} {'lr':>8} {'steps to target':>16} {'samples':>10}")
    for event in critical_batch(cfg, **options):
        if args.json:
            print(json.dumps(event), flush=True)
        elif event["kind"] == "critical_point":
            steps = (f"{event['reached_at']:,}" if event["reached_at"] else
                     f"{event['status']} at {event['steps']:,}")
            print(f"{event['batch_size']:>7} {event['lr']:>8.4g} {steps:>16} "
                  f"{_fmt(event['samples'], '{:,}'):>10}", flush=True)
        else:
            print(event["message"])
    return 0


def sharpness(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.sharpness import sharpness_study  # imports torch

    if not args.json:
        print(f"{'run':<18} {'batch':>6} {'lr':>7} {'steps':>6} {'train loss':>11} "
              f"{'test loss':>10} {'test acc':>9} {'top eigenvalue':>15} {'2/lr':>7}")
    for event in sharpness_study(cfg, **options):
        if args.json:
            print(json.dumps(event), flush=True)
        elif event["kind"] == "sharpness_progress":  # the table has a line per finished run
            continue
        elif event["kind"] == "sharpness_run":
            print(f"{event['label']:<18} {event['batch_size']:>6} {event['lr']:>7.3g} "
                  f"{event['steps']:>6} {event['train_loss']:>11.4f} {event['test_loss']:>10.4f} "
                  f"{event['test_accuracy']:>9.1%} {event['top_hessian_eigenvalue']:>15.3g} "
                  f"{event['two_over_lr']:>7.3g}"
                  + ("" if event["status"] == "completed" else f"  ({event['status']})"),
                  flush=True)
        else:
            print(event["message"])
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


def warm(runs: list[tuple[str, RunConfig]], folder: Path) -> int:
    """Train each (title, config) now and keep the completed ones in the run store."""
    from bsdemo.engine.train import train  # imports torch
    from bsdemo.store import RunStore

    store = RunStore(folder / "runs.sqlite3")
    if store.notice:
        print(f"note: {store.notice}", file=sys.stderr)
    for title, cfg in runs:
        run = collect(event.to_dict() for event in train(cfg))  # as the scheduler files them
        if run.end["status"] == "completed":
            store.put(vars(cfg), run.start["device"], run.start, run.steps.columns,
                      run.evals.columns, run.end)
        print(f"{title}: {run.end['status']} — {run.end['message']}")
    print(f"run store {store.path}: {store.count()} runs")
    return 0


def _print_find_result(r: dict) -> None:
    if r["batch_size"] is None:
        print(f"No batch size fits. {r['message']}")
        return
    print(f"Use batch {r['batch_size']}" + (f" × {r['accumulation_steps']} accumulation steps"
                                          if r["accumulation_steps"] > 1 else "")
          + f". {r['message']} Tested: {', '.join(map(str, r['tested_batch_sizes']))} "
          f"({r['probes']} probes); predicted largest: {_fmt(r['predicted_max'], '{}')}.")
    if "lr_linear" in r:
        print(f"Learning rate for effective batch {r['effective_batch_size']}: "
              f"{r['lr_linear']:.4g} (linear rule) or {r['lr_sqrt']:.4g} (square-root rule).")


def _span(values, fmt: str) -> str:
    return f" (68 %: {fmt.format(values[0])}–{fmt.format(values[1])})" if values else ""


def _print_sweep_end(end: dict) -> None:
    fit = end["fit"]
    if fit["t0_s"] is not None:
        t0 = fit.get("t0_range_s")
        print(f"step time  t(B) = {fit['t0_s'] * 1e3:.3g} ms"
              f"{_span(t0 and [v * 1e3 for v in t0], '{:.3g}')} + "
              f"{fit['t1_s_per_sample'] * 1e6:.3g} µs × B   (R² {fit['r2_time']:.3f}); overhead = "
              f"per-sample work at B ≈ {_fmt(end['crossover_batch_size'], '{:.0f}')}"
              f"{_span(end.get('crossover_range'), '{:.0f}')}")
    if fit["m0_bytes"] is not None:
        print(f"memory     M(B) = {format_bytes(fit['m0_bytes'])} + "
              f"{format_bytes(fit['m_bytes_per_sample'])} × B   (R² {fit['r2_memory']:.3f})")
    print(f"largest batch that ran: {_fmt(end['max_batch_size_fits'], '{}')}; predicted largest "
          f"under {_fmt(end['capacity_bytes'], format_bytes)}: "
          f"{_fmt(end['predicted_max_batch_size'], '{} (predicted)')}; throughput knee: "
          f"{_fmt(end['knee_batch_size'], '{}')}{_span(end.get('knee_range'), '{:.0f}')}")
    print("(68 %: the middle 68 % of estimates from the rounds resampled; a figure is named only "
          "where that range spans at most one doubling)")


def _print_summary(end) -> None:
    s = end.summary
    print(end.message)
    rows = [("status", end.status), ("optimizer steps", s.get("steps")),
            ("samples/s (median)", _fmt(s.get("samples_per_sec"), "{:,.0f}")),
            ("step time (median)", _fmt(s.get("step_time_s"), "{:.3g} s")),
            ("peak memory", _fmt(s.get("peak_memory_bytes"), "{:,} B") +
             f" ({s.get('memory_source')})"),
            ("final train loss", _fmt(s.get("final_train_loss"), "{:.4f}")),
            ("test accuracy", _fmt(s.get("test_accuracy"), "{:.2%}")), ("device", s.get("device"))]
    if s.get("frechet_distance") is not None:  # a GAN: its loss and accuracy are the discriminator's
        rows[5:7] = [("discriminator loss", _fmt(s.get("final_train_loss"), "{:.4f}")),
                     ("discriminator right", _fmt(s.get("test_accuracy"), "{:.2%}")),
                     ("Fréchet distance", f"{s['frechet_distance']:.3g} (real images "
                                          f"{_fmt(s.get('frechet_reference'), '{:.2g}')})")]
    for name, value in rows:
        print(f"  {name:<20} {value}")


def _fmt(value, pattern) -> str:
    if value is None:
        return "–"
    return pattern(value) if callable(pattern) else pattern.format(value)
