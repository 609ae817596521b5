"""GPU check: the CUDA-only paths, exercised and timed on a real CUDA device in < 5 minutes.

1. a sweep without a budget (the device's own memory), and one with a budget
   (torch.cuda.set_per_process_memory_fraction: a real allocator OOM);
2. ten forced OOMs in a row: after each, allocated memory must return to its baseline and the
   next run must be normal;
3. the finder under the budget: predicted vs measured peak at the batch it returns;
4. NVML: utilisation samples during a sweep (or "not available");
5. engine vs bare loop at batch 1 and 512 on the GPU (bench/engine_overhead.py's functions);
6. memory admission's inputs: the closed-form footprint (bsdemo.footprint) against the CUDA
   allocator's peak over whole runs, and what a CUDA context holds outside torch's counters
   (admission assumes bsdemo.scheduler.CUDA_CONTEXT_BYTES per worker);
7. the scheduler's worker on this device: no address-space ceiling on CUDA (the driver reserves
   more than it uses; on the CPU there is one), a sweep ended by the whole job's time cap, a
   Stop of an accumulation check between steps, and a normal run after both;
8. lessons 7-9's engines, and lessons 10-11's: every fit-a-bigger-batch technique (fp16 with a
   gradient scaler on CUDA only), the LSTM and GAN, the architecture study, and the gloo
   process groups (data parallel, pipeline) on the host's CPU;
9. the profile (issue 28): the lab's step under torch.profiler with CUDA activity at batch 8 and
   512 (kernels per step, the GPU's busy share, the trace's split), and CUDA graphs
   (make_graphed_callables) against eager: samples/s and t0 before and after;
10. the user's own model (bsdemo.api): the example ResNet's finder with real OOMs under an
   allocator cap, the example GPT's sweep by CUDA events and fit-batch with fp16's scaler;
11. a room (issue 40): 100 sessions (20 in a dry run) pressing Run within 5 s through the
   scheduler's own API, with four workers sharing the card (memory admission places them): a
   third on the Training Lab's defaults (they ride one run), the others on a batch size drawn
   from the slider's powers of two; first point and completion p50/p95, every run completed.
   The pages' side of a room (the web process) is bench/room_bench.py's, on any server.
12. the test suite's CUDA tests (`pytest -m gpu tests/gpu`, skipped on a machine without CUDA):
   every one must pass here, none skipped.
Prints a short table per part; exits 1 if a check fails. Record its output in bench/RESULTS.md.

    python bench/gpu_check.py [--budget 8GiB] [--model mlp --size XL]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from bsdemo.config import RunConfig, sized
from bsdemo.engine.finder import find_batch_size
from bsdemo.engine.sweep import sweep
from bsdemo.engine.train import train
from bsdemo.units import format_bytes, parse_bytes, powers_of_two

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_parts import (
    FAILURES,
    check,
    footprint_part,
    lessons_part,
    own_model_part,
    profile_part,
    room_part,
    scheduler_part,
    systems_part,
    tests_part,
)


def run_sweep(cfg: RunConfig, sizes: list[int], budget: int | None) -> dict:
    t = time.perf_counter()
    events = list(sweep(cfg, sizes, warmup_steps=2, timed_steps=5, memory_budget_bytes=budget))
    points = list({p["batch_size"]: p for p in events[1:-1]}.values())  # each size's last round
    elapsed = time.perf_counter() - t
    print(f"\nsweep, budget {format_bytes(budget) if budget else 'none'} ({elapsed:.1f} s):")
    print(
        f"{'batch':>7} {'status':>9} {'samples/s':>12} {'step ms':>9} {'peak':>11} "
        f"{'%peak FLOP/s':>12} {'NVML %':>7}"
    )
    for p in points:
        print(
            f"{p['batch_size']:>7} {p['status']:>9} {p['samples_per_sec'] or 0:>12,.0f} "
            f"{(p['step_time_s'] or 0) * 1e3:>9.3f} "
            f"{format_bytes(p['peak_memory_bytes']) if p['peak_memory_bytes'] else '-':>11} "
            f"{(p['share_of_peak'] or 0) * 100:>11.1f}% {p['utilization_pct'] or 0:>7.0f}"
        )
    end = events[-1] | {"points": points}
    fit = end["fit"]
    print(
        f"fit: t0 {fit['t0_s'] or 0:.3g} s, t1 {fit['t1_s_per_sample'] or 0:.3g} s/sample; "
        f"M0 {format_bytes(fit['m0_bytes'] or 0)}, m {format_bytes(fit['m_bytes_per_sample'] or 0)}"
        f"/sample, R² {fit['r2_memory'] or 0:.4f}; largest that ran {end['max_batch_size_fits']}, "
        f"predicted {end['predicted_max_batch_size']}, first OOM {end['first_oom_batch_size']}; "
        f"peak source: {end['peak_source']}"
    )
    return end


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="8GiB")
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--size", default="XL")
    ap.add_argument(
        "--cpu-dry-run",
        action="store_true",
        help="run the script's code paths on the CPU, small (no CUDA checks)",
    )
    args = ap.parse_args()
    dry = args.cpu_dry_run
    if not dry and not torch.cuda.is_available():
        print("no CUDA device: this check needs one (or --cpu-dry-run)")
        return 2
    device = "cpu" if dry else "cuda"
    if not dry:
        props = torch.cuda.get_device_properties(0)
        print(
            f"device: {props.name}, {format_bytes(props.total_memory)}, torch "
            f"{torch.__version__}, CUDA {torch.version.cuda}"
        )
    budget = parse_bytes("3MiB" if dry else args.budget)
    dataset = {"mlp": "synthetic", "cnn": "synthetic", "transformer": "arithmetic"}[args.model]
    cfg = RunConfig(dataset="digits" if dry else dataset, model=args.model, device=device, samples=40_000)
    cfg = cfg if dry else sized(cfg, args.size)
    sizes = powers_of_two(1024 if dry else 32768)
    allocated = (lambda: 0) if dry else torch.cuda.memory_allocated

    plain = run_sweep(cfg, sizes, None)
    # CUDA events time each step on the GPU's timeline: never longer than the synchronised
    # wall-clock step around them (a 5 % allowance for the two clocks' own resolution)
    print(
        f"sweep timed by {plain['clock']}: "
        f"{check(plain['clock'] == 'CUDA event time' or dry, 'device clock')}"
    )
    own = [p for p in plain["points"] if p["status"] == "ok"]
    print(
        "CUDA event step <= wall step at every batch: "
        + check(
            all(
                p["timing"]["step_time_s"]["median"] <= 1.05 * p["timing"]["wall_step_time_s"]["median"]
                for p in own
            ),
            "event time within the wall clock",
        )
    )
    budgeted = run_sweep(cfg, sizes, budget)
    print(
        f"budgeted sweep reached a real OOM: "
        f"{check(budgeted['first_oom_batch_size'] is not None, 'budget OOM')}"
    )

    # ten forced OOMs: memory back to baseline each time, then a normal run
    over = budgeted["first_oom_batch_size"] or sizes[-1]
    if not dry:
        torch.cuda.synchronize()
    baseline = allocated()
    print(
        f"\nten forced OOMs at batch {over} under {format_bytes(budget)} "
        f"(baseline allocated {format_bytes(baseline)}):"
    )
    t = time.perf_counter()
    for i in range(10):
        end = list(
            train(
                RunConfig(**{**vars(cfg), "batch_size": over, "epochs": None, "max_steps": 1}),
                evaluations=False,
                memory_budget_bytes=budget,
            )
        )[-1]
        back = allocated()
        print(
            f"  {i + 1:>2}: status {end.status}, simulated {end.summary.get('simulated')}, "
            f"allocated after {format_bytes(back)} "
            f"{check(end.status == 'oom' and back <= baseline + 2**20, f'oom {i}')}"
        )
    after = list(
        train(
            RunConfig(**{**vars(cfg), "batch_size": 64, "epochs": None, "max_steps": 20}), evaluations=False
        )
    )[-1]
    print(
        f"  then a normal run: {after.status}, {after.summary['samples_per_sec']:,.0f} samples/s "
        f"{check(after.status == 'completed', 'run after OOMs')} "
        f"({time.perf_counter() - t:.1f} s)"
    )

    # finder: predicted vs measured
    t = time.perf_counter()
    events = list(find_batch_size(cfg, memory_budget_bytes=budget))
    result = events[-1]
    probes = {p["batch_size"]: p for p in events[:-1]}
    chosen = probes.get(result["max_batch_size"])
    # the advice (the throughput knee, or the largest that fits) comes from the probes or from
    # the throughput measured in rounds after them
    measured = {t["batch_size"] for t in result.get("throughput") or ()}
    print(
        f"\nfinder under {format_bytes(budget)} ({time.perf_counter() - t:.1f} s): batch "
        f"{result['batch_size']}, largest {result['max_batch_size']}, predicted "
        f"{result['predicted_max']}, {result['probes']} probes {result['tested_batch_sizes']}"
    )
    if chosen and chosen["peak_memory_bytes"]:
        print(
            f"  measured peak at {result['max_batch_size']}: "
            f"{format_bytes(chosen['peak_memory_bytes'])} of {format_bytes(budget)} "
            f"{check(chosen['peak_memory_bytes'] <= 0.9 * budget, 'finder margin')}"
        )
    print(
        f"  returned a tested size: "
        f"{check(result['batch_size'] in probes.keys() | measured, 'finder returned untested size')}"
    )

    # engine overhead on the GPU
    import engine_overhead as eo

    print("\nengine vs bare loop on the GPU (samples/s, median of 3):")
    for b in (1, 512):
        small = RunConfig(dataset="digits", model="mlp", batch_size=b, device=device)
        bare = sorted(eo.bare_loop(small, 300) for _ in range(3))[1]
        eng = sorted(eo.engine_loop(small, 300) for _ in range(3))[1]
        print(f"  mlp/digits batch {b:>4}: bare {bare:>12,.0f}  engine {eng:>12,.0f}  ratio {eng / bare:.3f}")

    profile_part(device)
    own_model_part(device, dry)
    lessons_part(device)
    systems_part(device)
    footprint_part(device, dry)
    scheduler_part(device)
    room_part(device, dry)
    tests_part(dry)

    print(f"\n{'all checks passed' if not FAILURES else 'FAILED: ' + ', '.join(FAILURES)}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    raise SystemExit(main())
