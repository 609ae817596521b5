"""The commands of the lessons' studies and checks (bsdemo norms, noise, critical-batch,
sharpness, fit-batch, architectures, ddp-check, pipeline-check): each imports its engine function
(torch) itself, runs it with the checked options of its job kind and prints a table or JSON
lines."""

from __future__ import annotations

import argparse

from bsdemo.cli.output import fmt, single, stream
from bsdemo.config import RunConfig
from bsdemo.units import fixed, format_bytes, percent, setting, sig, signed


def norms(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.norms import norms_grid  # imports torch

    stream(
        norms_grid(cfg, **options),
        args.json,
        f"{'norm':<6} {'batch':>6} {'train acc':>10} {'test acc':>9} "
        f"{'test, batch stats':>18} {'changed by batch-mates':>23}",
        {
            "norms_result": lambda c: (
                f"{c['norm']:<6} {c['batch_size']:>6} {fmt(c['train_accuracy'], percent):>10} "
                f"{fmt(c['test_accuracy'], percent):>9} {percent(c['train_mode_test_accuracy']):>18} "
                f"{percent(c['partner_changed']):>23}"
            )
        },
        json_kinds=("norms_result",),
    )
    return 0


def noise(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.noise import noise_measure  # imports torch

    def result(e: dict) -> str:
        (low, high), (low2, high2) = e["b_simple_range"], e["b_simple_two_batch_range"]
        return (
            f"variance slope (log-log) {fixed(e['variance_slope'], 2)}; B_simple "
            f"{e['b_simple']:.0f} (direct, {low:.0f}–{high:.0f}), "
            f"{e['b_simple_two_batch']:.0f} (two-batch "
            f"{'/'.join(map(str, e['two_batch_sizes']))}, {low2:.0f}–{high2:.0f})"
        )

    stream(
        noise_measure(cfg, **options),
        args.json,
        f"{'batch':>7} {'E|g_B - G|²':>14} {'cos(g_B, G)':>12}",
        {
            "noise_point": lambda e: (
                f"{e['batch_size']:>7} {sig(e['variance'], 4):>14} {fixed(e['cosine'], 3):>12}"
            ),
            "noise_result": result,
        },
    )
    return 0


def ddp_check(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.ddp import ddp_check as check  # imports torch

    single(
        check(cfg, **options),
        args.json,
        lambda r: [
            r["message"],
            f"equivalent to one process: {'yes' if r['equivalent'] else 'NO'} (max |Δparam| "
            f"{sig(r['max_abs_param_diff'], 2)}); samples/s {fixed(r['samples_per_sec'], 0)} with "
            f"{r['processes']} processes, {fixed(r['single_process_samples_per_sec'], 0)} in one; "
            f"scaling efficiency {percent(r['scaling_efficiency'], 0)}",
        ],
    )
    return 0


def architectures(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.architectures import architecture_sweep  # imports torch

    def point(e: dict) -> str:
        quality = (
            "–"
            if e["quality"] is None
            else f"FD {sig(e['quality'])}"
            if e["architecture"] == "gan"
            else f"acc {percent(e['quality'])}"
        )
        return (
            f"{e['architecture']:<14} {e['batch_size']:>6} {fmt(e['steps'], '{:,}'):>7} "
            f"{fmt(e['samples_per_sec'], lambda v: fixed(v, 0)):>10} "
            f"{fmt(e['peak_memory_bytes'], format_bytes):>12} {quality:>16}"
        )

    def summary(e: dict) -> str | None:
        if not e.get("range"):
            return None
        lo, hi = e["range"]
        span = str(lo) if lo == hi else f"{lo}–{hi}"
        return (
            f"  {e['label']}: measured {span} against the rule's {e['rule_text']} "
            f"({e['agreement']}). {e['why']}"
        )

    stream(
        architecture_sweep(cfg, **options),
        args.json,
        f"{'architecture':<14} {'batch':>6} {'steps':>7} {'samples/s':>10} "
        f"{'peak memory':>12} {'quality':>16}",
        {"architecture_point": point, "architecture_summary": summary},
    )
    return 0


def pipeline_check(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.pipeline import pipeline_check as check  # imports torch

    single(
        check(cfg, **options),
        args.json,
        lambda r: (
            [r["message"]]
            + [
                f"stage {s}: parameters {format_bytes(r['stage_parameter_bytes'][s])}, activations "
                f"held {format_bytes(r['stage_activation_bytes'][s])}; per micro-batch forward "
                f"{fixed(r['stage_forward_s'][s] * 1e3, 2)} ms, backward "
                f"{fixed(r['stage_backward_s'][s] * 1e3, 2)} ms"
                for s in range(r["stages"])
            ]
            + [
                f"one process: parameters {format_bytes(r['single_parameter_bytes'])}, activations held "
                f"{format_bytes(r['single_activation_bytes'])}; transfer of one micro-batch's "
                f"activations ({format_bytes(r['transfer_bytes'])}) {fixed(r['transfer_s'] * 1e3, 3)} ms; "
                f"step {fixed(r['step_s'] * 1e3, 1)} ms in the pipeline, "
                f"{fixed(r['single_process_step_s'] * 1e3, 1)} ms in one process; "
                f"bubble {percent(r['bubble'], 0)} (GPipe's ideal {percent(r['ideal_bubble'], 0)})"
            ]
        ),
    )
    return 0


def fit_batch(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.fitbatch import fit_batch  # imports torch

    # the header after the first record: a budget too small raises before any
    stream(
        fit_batch(cfg, **options),
        args.json,
        f"{'technique':<20} {'largest batch':>14} {'effective':>10} {'samples/s':>11} "
        f"{'peak memory':>12} {'loss after':>11} {'vs fp32':>9}",
        {
            "fit_batch_result": lambda e: (
                f"{e['technique']:<20} {e['max_batch_size']:>14,} {e['effective_batch_size']:>10,} "
                f"{fmt(e['samples_per_sec'], lambda v: fixed(v, 0)):>11} "
                f"{fmt(e['peak_memory_bytes'], format_bytes):>12} {fixed(e['loss_after'], 4):>11} "
                f"{signed(e['loss_vs_fp32'], 4):>9}"
            )
        },
        header_first=False,
    )
    return 0


def critical(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.critical import critical_batch  # imports torch

    def point(e: dict) -> str:
        steps = f"{e['reached_at']:,}" if e["reached_at"] else f"{e['status']} at {e['steps']:,}"
        return f"{e['batch_size']:>7} {setting(e['lr'], 4):>8} {steps:>16} {fmt(e['samples'], '{:,}'):>10}"

    stream(
        critical_batch(cfg, **options),
        args.json,
        f"{'batch':>7} {'lr':>8} {'steps to target':>16} {'samples':>10}",
        {"critical_point": point},
    )
    return 0


def sharpness(cfg: RunConfig, args: argparse.Namespace, **options) -> int:
    from bsdemo.engine.sharpness import sharpness_study  # imports torch

    stream(
        sharpness_study(cfg, **options),
        args.json,
        f"{'run':<18} {'batch':>6} {'lr':>7} {'steps':>6} {'train loss':>11} "
        f"{'test loss':>10} {'test acc':>9} {'top eigenvalue':>15} {'2/lr':>7}",
        {
            "sharpness_progress": lambda e: None,  # the table has a line per finished run
            "sharpness_run": lambda e: (
                f"{e['label']:<18} {e['batch_size']:>6} {setting(e['lr'], 3):>7} {e['steps']:>6} "
                f"{fixed(e['train_loss'], 4):>11} {fixed(e['test_loss'], 4):>10} "
                f"{percent(e['test_accuracy']):>9} "
                f"{sig(e['top_hessian_eigenvalue'], 3):>15} {sig(e['two_over_lr'], 3):>7}"
                + ("" if e["status"] == "completed" else f"  ({e['status']})")
            ),
        },
    )
    return 0
