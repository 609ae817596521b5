"""Command-line companion: run one training job in this terminal and watch the device meanwhile.

    python -m bsdemo train --batch-size 256 --lr 0.1 [--json]

Bad flags exit with code 2 and one line (at most ERROR_CHARS) naming the flag, the value (cut
short) and what is allowed, with no traceback: every flag of every command is checked before
torch is imported, so a typo is answered at once even on a loaded machine.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

from bsdemo.config import (
    DATASETS,
    DEVICES,
    MAX_BATCH_SIZE,
    MODELS,
    NORMS,
    OPTIMIZERS,
    ConfigError,
    RunConfig,
    clip,
    sized,
)
from bsdemo.jobkinds import MAX_TIMED_STEPS
from bsdemo.limits import default_threads
from bsdemo.presets import PRESETS
from bsdemo.recipes import regime_configs
from bsdemo.runs import collect
from bsdemo.units import format_bytes, parse_batch_sizes, parse_bytes, real_number, whole_number

FLAGS = {  # CLI flag -> RunConfig field; the flag names are the ones a student types
    "dataset": "dataset", "model": "model", "norm": "norm", "width": "width", "depth": "depth",
    "batch_size": "batch_size", "lr": "lr", "accum": "accumulation_steps",
    "optimizer": "optimizer", "warmup": "warmup_steps", "epochs": "epochs", "steps": "max_steps",
    "seed": "seed", "device": "device", "eval_interval": "eval_interval", "samples": "samples",
    "noise": "noise",
}
FIELD_FLAGS = {v: "--" + k.replace("_", "-") for k, v in FLAGS.items()} | {
    "memory_budget": "--memory-budget", "size": "--size", "micro_batch": "--micro-batch"}
EXIT_STATUS = {"completed": 0, "cancelled": 130}
ERROR_CHARS = 200  # an error is one line of at most this many characters


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # "--lr -inf" is a (bad) value, not an unknown flag: none of our flags starts with a
        # digit, '.', 'inf' or 'nan', so such a word after a flag is always its value
        self._negative_number_matcher = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)

    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        self.exit(2, _one_line(f"{self.prog}: error: {message}") + "\n")


def _one_line(text: str) -> str:
    return clip(" ".join(str(text).split()), ERROR_CHARS)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bsdemo", description="Batch Size Lab on the command line.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    train = sub.add_parser("train", help="train one run and print its progress and summary",
                           description="Train one run; --json prints one JSON event per line.")
    d = RunConfig()
    train.add_argument("--dataset", help=f"one of {', '.join(DATASETS)} (default {d.dataset})")
    train.add_argument("--model", help=f"one of {', '.join(MODELS)} (default {d.model})")
    train.add_argument("--norm", help=f"one of {', '.join(NORMS)} (default {d.norm})")
    train.add_argument("--width", help=f"MLP units / CNN channels (default {d.width})")
    train.add_argument("--depth", help=f"hidden layers / conv blocks (default {d.depth})")
    train.add_argument("--batch-size", help=f"micro-batch size (default {d.batch_size})")
    train.add_argument("--lr", help=f"learning rate (default {d.lr})")
    train.add_argument("--accum", help="gradient-accumulation steps per optimizer step (default 1)")
    train.add_argument("--optimizer", help=f"one of {', '.join(OPTIMIZERS)} (default {d.optimizer})")
    train.add_argument("--warmup", help="linear lr warm-up, in optimizer steps (default 0)")
    budget = train.add_mutually_exclusive_group()
    budget.add_argument("--epochs", help=f"epoch budget (default {d.epochs})")
    budget.add_argument("--steps", help="optimizer-step budget instead of epochs")
    train.add_argument("--seed", help="model init and shuffling seed (default 0)")
    train.add_argument("--device", help=f"one of {', '.join(DEVICES)} (default auto)")
    train.add_argument("--eval-interval", help="optimizer steps between evaluations (0 = per epoch)")
    train.add_argument("--samples", help=f"size of generated datasets (default {d.samples})")
    train.add_argument("--noise", help=f"input noise of the 2-D sets (default {d.noise})")
    train.add_argument("--size", help="workload size preset S, M, L or XL (sets width and depth)")
    train.add_argument("--json", action="store_true", help="one JSON object per event per line")

    sweep = sub.add_parser("sweep", help="time full training steps over a list of batch sizes",
                           description="Per batch size: warm-up, then timed full training steps; "
                                       "a table, or --json lines (sweep_point ..., sweep_end).")
    sweep.add_argument("--batch-sizes", default="1,2,4,8,16,32,64,128,256,512,1024",
                       help="comma-separated, increasing (default powers of two 1…1024)")
    sweep.add_argument("--memory-budget", help="pretend the device has this much memory, e.g. "
                                               "512MiB, 8GiB, 0.5GB (on the CPU: simulated)")
    sweep.add_argument("--warmup-steps", default="3", help="untimed steps per batch size")
    sweep.add_argument("--timed-steps", default="8",
                       help="at least this many timed steps per batch size (their median counts)")
    sweep.add_argument("--min-time", default="0.1",
                       help="... lasting at least this many seconds in all (0: exactly "
                            "--timed-steps)")
    sweep.add_argument("--continue-after-oom", action="store_true",
                       help="try the larger batch sizes after the first out-of-memory")
    _workload_flags(sweep, train)
    sweep.add_argument("--json", action="store_true", help="one JSON object per line")

    find = sub.add_parser("find", help="find the largest batch that fits, measured",
                          description="Probe, fit memory, predict the largest batch under the "
                                      "budget minus a margin, verify it with a real step.")
    find.add_argument("--memory-budget", help="pretend the device has this much memory")
    find.add_argument("--margin", default="0.1", help="share of the budget kept free (default 0.1)")
    find.add_argument("--target-effective-batch",
                      help="an effective batch to reach with micro-batch × accumulation steps")
    find.add_argument("--reference-batch", default="32",
                      help="the batch your --lr was tuned for (default 32), for lr scaling")
    find.add_argument("--max-batch", help="the largest batch to consider (default: the whole "
                                          "training set)")
    _workload_flags(find, train)
    find.add_argument("--json", action="store_true", help="one JSON object per line")

    accum = sub.add_parser("accum-check", help="one batch of k·b vs k accumulated micro-batches",
                           description="Same seed, same samples: compare gradients and "
                                       "parameters of one big batch against accumulation.")
    accum.add_argument("--micro-batch", default="32", help="micro-batch size b (default 32)")
    accum.add_argument("--accum", default="4", help="accumulation steps k (default 4)")
    accum.add_argument("--steps", default="5", help="optimizer steps compared (default 5)")
    accum.add_argument("--unscaled-loss", action="store_true",
                       help="forget to divide the micro-batch losses by k (the classic bug)")
    accum.add_argument("--variable-length", action="store_true",
                       help="per-token loss over sequences of unequal length, averaged per "
                            "micro-batch (switches to the arithmetic task)")
    _workload_flags(accum, train, size=False)
    accum.add_argument("--json", action="store_true", help="the result as one JSON object")

    regimes = sub.add_parser("regimes", help="SGD (batch 1) vs full batch vs mini-batch",
                             description="Train the three regimes on the same model, data, seed "
                                         "and epoch budget.")
    regimes.add_argument("--epochs", default="5", help="epoch budget of each regime (default 5)")
    regimes.add_argument("--mini-batch", default="32", help="the mini-batch size (default 32)")
    regimes.add_argument("--time-limit", help="seconds each regime may train (default none)")
    _workload_flags(regimes, train, size=False)
    regimes.add_argument("--json", action="store_true", help="events and results as JSON lines")

    data = sub.add_parser("datasets", help="list or fetch the downloadable datasets",
                          description="MNIST, Fashion-MNIST and CIFAR-10 from their published "
                                      "files, checked against their published MD5s.")
    data.add_argument("action", choices=["list", "fetch"])
    data.add_argument("names", nargs="*", help="default: all of them")
    data.add_argument("--cache", help="the cache folder (default $BSDEMO_DATA_DIR/datasets)")

    warm = sub.add_parser("warm", help="pre-compute a lecture preset into the run store",
                          description="Train a preset's runs now and store them, so the lab "
                                      "serves them at once (labelled as stored results).")
    warm.add_argument("--preset", required=True, help=f"one of {', '.join(PRESETS)}")
    warm.add_argument("--batch-sizes", default="32", help="comma-separated (default 32)")
    warm.add_argument("--data-dir", help="the run store's folder (default $BSDEMO_DATA_DIR)")
    return parser


WORKLOAD_FLAGS = ("dataset", "model", "norm", "width", "depth", "lr", "optimizer", "seed",
                  "device", "samples")


def _workload_flags(parser: argparse.ArgumentParser, train: argparse.ArgumentParser,
                    size: bool = True) -> None:
    """The workload flags of `train`, with its help, for a measuring command."""
    for flag in WORKLOAD_FLAGS + (("size",) if size else ()):
        parser.add_argument(f"--{flag}", help=train._option_string_actions[f"--{flag}"].help)


def config_from_args(args: argparse.Namespace) -> tuple[RunConfig, list[str]]:
    """Flags -> validated RunConfig; a ConfigError names the *flag*, not the field."""
    given = {FLAGS[k]: v for k, v in vars(args).items() if k in FLAGS and v is not None}
    try:
        for name, value in given.items():
            _given(value, name)  # "--steps=" is a mistake, not "no step budget"
        if getattr(args, "size", None) is not None and (given.keys() & {"width", "depth"}):
            raise ConfigError("size", args.size, "either --size or --width/--depth, not both")
        cfg = RunConfig.from_params(given)
        if getattr(args, "size", None) is not None:
            cfg = sized(cfg, args.size)
        return cfg.validated()
    except ConfigError as exc:
        raise ConfigError(FIELD_FLAGS.get(exc.field, exc.field), exc.value, exc.allowed) from None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_usage(sys.stderr)
        return 2
    try:  # every flag, and the thread setting, before torch is imported
        cfg, notices = config_from_args(args)
        checked = CHECKS[args.command](args)
        threads = default_threads(1) if args.command != "datasets" else None
    except ConfigError as exc:
        return _fail(args.command, exc)
    try:
        if threads is not None:
            from bsdemo.engine.measure import set_threads  # imports torch

            set_threads(threads)
        if args.command == "sweep":
            return _sweep(cfg, args, **checked)
        if args.command == "find":
            return _find(cfg, args, **checked)
        if args.command == "accum-check":
            return _accum_check(cfg, args, **checked)
        if args.command == "regimes":
            return _regimes(cfg, args, **checked)
        if args.command == "warm":
            return _warm(**checked)
        if args.command == "datasets":
            return _datasets(args, **checked)
        return _train(cfg, notices, args.json)
    except ConfigError as exc:  # e.g. --device cuda on a machine without one
        return _fail(args.command, exc)


def _fail(command: str, exc: ConfigError) -> int:
    flag = FIELD_FLAGS.get(exc.field, exc.field)
    print(_one_line(f"bsdemo {command}: error: {flag}: got {clip(repr(exc.value))}; allowed: "
                    f"{exc.allowed}"), file=sys.stderr)
    return 2


# ----- each command's own flags, checked (before torch) -----
_count = functools.partial(whole_number, exact=False)  # (flag, its text, low, high)
_real = functools.partial(real_number, exact=False)


def _given(raw: str | None, flag: str) -> str | None:
    """An optional flag's text: None when absent; an empty value is an error, not 'absent'."""
    if raw is not None and not raw.strip():
        raise ConfigError(flag, raw, "a value (the flag was given empty)")
    return raw


def _check_sweep(args: argparse.Namespace) -> dict:
    budget = _given(args.memory_budget, "--memory-budget")
    return {"sizes": parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE),
            "budget": parse_bytes(budget, "--memory-budget") if budget is not None else None,
            "warmup": _count("--warmup-steps", args.warmup_steps, 0, 100),
            "timed": _count("--timed-steps", args.timed_steps, 1, MAX_TIMED_STEPS),
            "min_time": _real("--min-time", args.min_time, 0.0, 60.0)}


def _check_find(args: argparse.Namespace) -> dict:
    budget = _given(args.memory_budget, "--memory-budget")
    target = _given(args.target_effective_batch, "--target-effective-batch")
    largest = _given(args.max_batch, "--max-batch")
    return {"budget": parse_bytes(budget, "--memory-budget") if budget is not None else None,
            "margin": _real("--margin", args.margin, 0.0, 0.9),
            "target": _count("--target-effective-batch", target, 1, 10**6)
            if target is not None else None,
            "reference": _count("--reference-batch", args.reference_batch, 1, 10**6),
            "max_batch": _count("--max-batch", largest, 1, MAX_BATCH_SIZE)
            if largest is not None else None}


def _check_accum(args: argparse.Namespace) -> dict:
    return {"micro": _count("--micro-batch", args.micro_batch, 1, MAX_BATCH_SIZE),
            "k": _count("--accum", args.accum, 1, 1024),
            "steps": _count("--steps", args.steps, 1, 1000)}


def _check_regimes(args: argparse.Namespace) -> dict:
    limit = _given(args.time_limit, "--time-limit")
    return {"epochs": _count("--epochs", args.epochs, 1, 1000),
            "mini": _count("--mini-batch", args.mini_batch, 1, MAX_BATCH_SIZE),
            "limit": None if limit is None else _real("--time-limit", limit, 0.0, 86_400,
                                              low_open=True)}


def _check_warm(args: argparse.Namespace) -> dict:
    if args.preset not in PRESETS:
        raise ConfigError("--preset", args.preset, "one of " + ", ".join(PRESETS))
    sizes = parse_batch_sizes(args.batch_sizes, "--batch-sizes", MAX_BATCH_SIZE)
    folder = _given(args.data_dir, "--data-dir") or os.environ.get("BSDEMO_DATA_DIR")
    if not folder:
        raise ConfigError("--data-dir", None, "a folder (or set BSDEMO_DATA_DIR)")
    return {"preset": args.preset, "sizes": sizes, "folder": _writable_folder(folder, "--data-dir")}


def _check_datasets(args: argparse.Namespace) -> dict:
    from bsdemo import datasets

    for name in args.names:
        if name not in datasets.SOURCES:
            raise ConfigError("names", name, "one of " + ", ".join(datasets.SOURCES))
    cache = _given(args.cache, "--cache")
    return {"cache": _writable_folder(cache, "--cache") / "datasets" if cache is not None
            else None}


def _writable_folder(raw: str, flag: str) -> Path:
    """raw as a folder this user can create and write in, or ConfigError."""
    folder = Path(raw)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        ok = os.access(folder, os.W_OK | os.X_OK)
    except (OSError, ValueError):  # ValueError: an embedded NUL byte
        ok = False
    if not ok:
        raise ConfigError(flag, raw, "a folder this user can create and write in")
    return folder


CHECKS = {"train": lambda args: {}, "sweep": _check_sweep, "find": _check_find,
          "accum-check": _check_accum, "regimes": _check_regimes, "warm": _check_warm,
          "datasets": _check_datasets}


def _train(cfg: RunConfig, notices: list[str], as_json: bool) -> int:
    from bsdemo.engine.train import train  # imports torch: only once the flags are known good

    for notice in notices:
        print(f"note: {notice}", file=sys.stderr)
    stop = {"requested": False}
    events = train(cfg, should_stop=lambda: stop["requested"])
    bar = _Progress(enabled=not as_json and sys.stderr.isatty())
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
            bar.total = event.planned_steps
        elif event.kind == "step":
            bar.update(event.step, event.loss, event.samples_per_sec)
        if event.kind == "end":
            end = event
    bar.close()
    if not as_json and end is not None:
        _print_summary(end)
    return EXIT_STATUS.get(end.status, 1) if end else 1


def _sweep(cfg: RunConfig, args: argparse.Namespace, sizes: list[int], budget: int | None,
           warmup: int, timed: int, min_time: float) -> int:
    from bsdemo.engine.sweep import sweep  # imports torch: only once the flags are known good

    events = sweep(cfg, sizes, warmup_steps=warmup, timed_steps=timed, min_timed_s=min_time,
                   memory_budget_bytes=budget, continue_after_oom=args.continue_after_oom)
    for event in events:  # the first event comes after the budget check: no half table
        if args.json:
            if event["kind"] != "sweep_start":
                print(json.dumps(event), flush=True)
        elif event["kind"] == "sweep_start":
            print(f"{'batch':>7} {'status':>9} {'samples/s':>12} {'step time':>11} "
                  f"{'peak memory':>12}  source")
        elif event["kind"] == "sweep_point":
            sim = " (simulated)" if event["simulated"] else ""
            print(f"{event['batch_size']:>7} {event['status']:>9} "
                  f"{_fmt(event['samples_per_sec'], '{:,.0f}'):>12} "
                  f"{_fmt(event['step_time_s'], '{:.3g} s'):>11} "
                  f"{_fmt(event['peak_memory_bytes'], format_bytes):>12}  "
                  f"{event['memory_source'] or ''}{sim}", flush=True)
        elif event["kind"] == "sweep_end":
            _print_sweep_end(event)
    return 0


def _find(cfg: RunConfig, args: argparse.Namespace, budget: int | None, margin: float,
          target: int | None, reference: int, max_batch: int | None) -> int:
    from bsdemo.engine.finder import find_batch_size  # imports torch

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


def _accum_check(cfg: RunConfig, args: argparse.Namespace, micro: int, k: int, steps: int) -> int:
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


def _regimes(cfg: RunConfig, args: argparse.Namespace, epochs: int, mini: int,
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


def _datasets(args: argparse.Namespace, cache: Path | None) -> int:
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


def _warm(preset: str, sizes: list[int], folder: Path) -> int:
    from bsdemo.engine.train import train  # imports torch
    from bsdemo.store import RunStore

    store = RunStore(folder / "runs.sqlite3")
    if store.notice:
        print(f"note: {store.notice}", file=sys.stderr)
    for b in sizes:
        cfg = RunConfig(**(PRESETS[preset].settings | {"batch_size": b})).validated()[0]
        run = collect(event.to_dict() for event in train(cfg))  # as the scheduler files them
        if run.end["status"] == "completed":
            store.put(vars(cfg), run.start["device"], run.start, run.steps.columns,
                      run.evals.columns, run.end)
        print(f"{preset} batch {b}: {run.end['status']} — {run.end['message']}")
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


def _print_sweep_end(end: dict) -> None:
    fit = end["fit"]
    if fit["t0_s"] is not None:
        print(f"step time  t(B) = {fit['t0_s'] * 1e3:.3g} ms + {fit['t1_s_per_sample'] * 1e6:.3g} "
              f"µs × B   (R² {fit['r2_time']:.3f}); overhead = per-sample work at B ≈ "
              f"{_fmt(end['crossover_batch_size'], '{:.0f}')}")
    if fit["m0_bytes"] is not None:
        print(f"memory     M(B) = {format_bytes(fit['m0_bytes'])} + "
              f"{format_bytes(fit['m_bytes_per_sample'])} × B   (R² {fit['r2_memory']:.3f})")
    print(f"largest batch that ran: {_fmt(end['max_batch_size_fits'], '{}')}; predicted largest "
          f"under {_fmt(end['capacity_bytes'], format_bytes)}: "
          f"{_fmt(end['predicted_max_batch_size'], '{} (predicted)')}; throughput knee: "
          f"{_fmt(end['knee_batch_size'], '{}')}")



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
    for name, value in rows:
        print(f"  {name:<20} {value}")


def _fmt(value, pattern) -> str:
    if value is None:
        return "–"
    return pattern(value) if callable(pattern) else pattern.format(value)


class _Progress:
    """A one-line progress bar on stderr (only on a terminal), redrawn at most 10 times/s."""

    def __init__(self, enabled: bool):
        self.enabled, self.total, self._last = enabled, 0, 0.0

    def update(self, step: int, loss: float, rate: float) -> None:
        import time

        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.1 and step != self.total):
            return
        self._last = now
        frac = step / self.total if self.total else 0.0
        filled = int(frac * 30)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {step}/{self.total} "
                         f"loss {loss:.4f} {rate:,.0f} samples/s ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
