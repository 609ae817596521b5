"""bench/gpu_check.py's parts for the lessons' engines on the device: lessons 7-9's (gradient
noise, the critical batch, sharpness, the normalisation grid), lessons 10-11's (fit-a-bigger-batch,
the LSTM and the GAN, the architecture study, process groups) and the profile."""

from __future__ import annotations

import dataclasses
import time

from gpu_failures import check  # bench/'s own: gpu_check.py puts bench/ on sys.path

from bsdemo.config import RunConfig
from bsdemo.engine.train import train
from bsdemo.units import format_bytes


def lessons_part(device: str) -> None:
    """Lessons 7-9's engines on the device: gradient noise, the critical batch, the sharpness
    study's double backward (Hessian-vector products), the normalisation grid."""
    from bsdemo.engine.critical import critical_batch
    from bsdemo.engine.noise import noise_measure
    from bsdemo.engine.norms import norms_grid
    from bsdemo.engine.sharpness import sharpness_study

    small = RunConfig(dataset="digits", model="mlp", width=64, depth=1, device=device)
    print("\nlessons 7-9 on the device:")
    t = time.perf_counter()
    noise = list(noise_measure(small, [1, 16, 256], draws=8))[-1]
    print(
        f"  noise: slope {noise['variance_slope']:.2f}, B_simple {noise['b_simple']:.0f} "
        f"{check(-1.3 < noise['variance_slope'] < -0.7, 'noise slope')} "
        f"({time.perf_counter() - t:.1f} s)"
    )
    t = time.perf_counter()
    crit = list(critical_batch(dataclasses.replace(small, lr=0.2), [16, 256, 4096], target_loss=0.3))[-1]
    print(
        f"  critical batch: steps {crit['steps']}, B_simple {crit['b_simple']:.0f} "
        f"{check(all(crit['steps']), 'critical steps')} ({time.perf_counter() - t:.1f} s)"
    )
    t = time.perf_counter()
    study = list(sharpness_study(dataclasses.replace(small, lr=0.3), target_loss=0.05, remedies=["noise"]))[
        -1
    ]
    tops = [r["top_hessian_eigenvalue"] for r in study["runs"]]
    print(
        f"  sharpness: top eigenvalues {', '.join(f'{v:.3g}' for v in tops)} "
        f"{check(all(v > 0 for v in tops), 'sharpness eigenvalues')} "
        f"({time.perf_counter() - t:.1f} s)"
    )
    t = time.perf_counter()
    cells = [
        c
        for c in norms_grid(dataclasses.replace(small, epochs=1), [2, 32], ["batch", "group"])
        if c["kind"] == "norms_result"
    ]
    print(
        f"  norms: {len(cells)} cells, BatchNorm at 2 changed by batch-mates "
        f"{cells[0]['partner_changed']:.0%} {check(len(cells) == 4, 'norms grid')} "
        f"({time.perf_counter() - t:.1f} s)"
    )


def systems_part(device: str) -> None:
    """Lessons 10-11 on the device: every fit-a-bigger-batch technique (fp16 with a gradient
    scaler is CUDA's only), the LSTM and the GAN training (footprint against the allocator), the
    architecture study, and the CPU process groups (gloo) started from this machine."""
    from bsdemo.engine.architectures import architecture_sweep
    from bsdemo.engine.ddp import ddp_check
    from bsdemo.engine.fitbatch import fit_batch
    from bsdemo.engine.pipeline import pipeline_check
    from bsdemo.footprint import predict

    print("\nlessons 10-11 on the device:")
    t = time.perf_counter()
    cnn = RunConfig(dataset="digits", model="cnn", width=32, depth=3, device=device)
    rows = [
        r
        for r in fit_batch(cnn, memory_budget_bytes=64 * 2**20, max_batch=4096, budget_steps=20)
        if r["kind"] == "fit_batch_result"
    ]
    for r in rows:
        print(
            f"  fit {r['technique']:<19} largest {r['max_batch_size']:>6} "
            f"{r['samples_per_sec'] or 0:>12,.0f} samples/s  loss vs fp32 {r['loss_vs_fp32']:+.4f}"
        )
    names = {r["technique"] for r in rows}
    print(
        f"  techniques {check(('fp16' in names) == (device == 'cuda'), 'fp16 on cuda only')} "
        f"({time.perf_counter() - t:.1f} s)"
    )
    for model, extra in (
        ("lstm", {"optimizer": "adam", "lr": 0.01}),
        ("gan", {"optimizer": "adam", "lr": 0.001}),
    ):
        t = time.perf_counter()
        cfg = RunConfig(
            dataset="digits",
            model=model,
            width=128,
            depth=2,
            batch_size=256,
            epochs=5,
            device=device,
            **extra,
        )
        end = list(train(cfg))[-1]
        s = end.summary
        predicted = predict(cfg).peak
        quality = f"FD {s['frechet_distance']:.3g}" if model == "gan" else f"acc {s['test_accuracy']:.1%}"
        print(
            f"  {model}: {end.status}, {s['samples_per_sec'] or 0:,.0f} samples/s, peak "
            f"{format_bytes(s['peak_memory_bytes'] or 0)} (predicted {format_bytes(predicted)}), "
            f"{quality} {check(end.status == 'completed', model + ' run')} "
            f"({time.perf_counter() - t:.1f} s)"
        )
    t = time.perf_counter()
    records = list(architecture_sweep(RunConfig(device=device), ["cnn", "gan"], [32, 512], seconds=1.0))
    summaries = [r for r in records if r["kind"] == "architecture_summary"]
    print(
        "  architectures: "
        + "; ".join(f"{s['label']} {s['range']} ({s['agreement']})" for s in summaries)
        + f" {check(len(summaries) == 2, 'architecture study')} ({time.perf_counter() - t:.1f} s)"
    )
    t = time.perf_counter()
    small = RunConfig(dataset="digits", model="mlp", width=128, depth=2, batch_size=32)
    ddp = ddp_check(small, processes=2, steps=3)
    pipe = pipeline_check(dataclasses.replace(small, batch_size=64), micro_batches=4, steps=3)
    print(
        f"  gloo groups on this host's CPU: ddp diff {ddp['max_abs_param_diff']:.2g}, pipeline "
        f"diff {pipe['max_abs_param_diff']:.2g}, bubble {pipe['bubble']:.0%} "
        f"{check(ddp['equivalent'] and pipe['equivalent'], 'process groups')} "
        f"({time.perf_counter() - t:.1f} s)"
    )


def profile_part(device: str) -> None:
    """The profile job on this device: kernels counted from the trace, the GPU busy share, and
    the overhead cut (CUDA graphs on CUDA, torch.compile on the CPU)."""
    from bsdemo.engine.profile import profile_steps
    from bsdemo.recipes.profile import cut_line, point_line

    t = time.perf_counter()
    cfg = RunConfig(dataset="digits", model="mlp", device=device)
    records = list(profile_steps(cfg, [8, 512]))
    print(f"\nprofile, batch 8 and 512 ({time.perf_counter() - t:.1f} s):")
    points = [r for r in records if r["kind"] == "profile_point"]
    for r in records:
        if r["kind"] == "profile_point":
            print(f"  {point_line(r)}")
        elif r["kind"] == "cut_point":
            print(f"  {cut_line(r)}")
    end = records[-1]
    ok = [p for p in points if p["status"] == "ok"]
    print(f"  both batches profiled: {check(len(ok) == 2, 'profile points')}")
    if device == "cuda" and len(ok) == 2:
        print(
            f"  kernels counted in the trace: "
            f"{check(all((p['kernels_per_step'] or 0) > 0 for p in ok), 'kernels per step')}"
        )
        busy = [p["gpu_busy_share"] for p in ok]
        print(
            f"  GPU busy share grows with the batch ({busy[0]:.0%} -> {busy[1]:.0%}): "
            f"{check(0 < busy[0] <= busy[1] <= 1.0, 'gpu busy share')}"
        )
    cuts = [r for r in records if r["kind"] == "cut_point"]
    print(
        f"  overhead cut ran at both batches: "
        f"{check(all(c['status'] == 'ok' for c in cuts) and len(cuts) == 2, 'overhead cut')}"
    )
    if end.get("cut_fit"):
        (e0, _), (c0, _) = end["cut_fit"]["eager"], end["cut_fit"]["cut"]
        print(
            f"  t0 eager {e0:.0f} µs, cut {c0:.0f} µs; trace/t0 agreement "
            f"{end.get('t0_agreement') or float('nan'):.2f}"
        )
