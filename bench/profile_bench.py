"""Where a small batch's time goes, over seeds and under load: the Throughput page's profile
(batch 8 and 512 of its default workload, the overhead cut) in fresh processes as
`python -m bsdemo profile --json` runs it (one torch thread, as a worker on a 2-core server),
quiet and with CPU hogs running, in turn (quiet, busy, quiet, busy, …).

Per run: the profiler's overhead (unprofiled samples/s ÷ profiled samples/s at each batch: the
page never shows profiled steps as throughput), the fixed share of a step at each batch, the
trace's fixed part against the unprofiled steps' t0 (the ratio the page prints), the overhead
cut's samples/s ratio at each batch and t0 eager/cut (two-point), the compile time (never in a
samples/s), and the page's lead sentence. The story must hold in every run: the fixed share
larger at batch 8 than at 512, the trace's t1 within ±25 % of the steps', its t0 0.75–3× theirs,
the same reading of the cut.

    .venv/bin/python bench/profile_bench.py [--seeds 0,1,2,3,4] [--hogs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bsdemo.profiling import two_point_fit
from bsdemo.recipes.profile import profile_verdict

HOG = "while True: pass"


def run(seed: int) -> dict:
    began = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "profile", "--json", "--seed", str(seed)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "BSDEMO_TORCH_THREADS": "1"},
    )
    records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    points = [r for r in records if r["kind"] == "profile_point"]
    cuts = [r for r in records if r["kind"] == "cut_point"]
    end = next(r for r in records if r["kind"] == "profile_end")
    return {"points": points, "cuts": cuts, "end": end, "wall_s": time.perf_counter() - began}


def row(label: str, result: dict) -> dict:
    points, cuts, end = result["points"], result["cuts"], result["end"]
    by = {p["batch_size"]: p for p in points}
    plain = end["plain_fit"]
    shares = {b: plain["t0_us"] / (plain["t0_us"] + plain["t1_us"] * b) for b in by}
    overhead = {b: p["profiled_own_s"]["median"] / p["plain_own_s"]["median"] for b, p in by.items()}
    good = {c["batch_size"]: c for c in cuts if c["status"] == "ok"}
    speed = {b: c["speedup"] for b, c in good.items()}
    t0 = (
        (
            two_point_fit({b: c["eager_step_s"]["median"] * 1e6 for b, c in good.items()})[0],
            two_point_fit({b: c["cut_step_s"]["median"] * 1e6 for b, c in good.items()})[0],
        )
        if len(good) >= 2
        else (None, None)
    )
    verdict = profile_verdict(points, cuts, end)
    reading = (
        "slower"
        if "slower, not faster" in verdict
        else "largest where"
        if "largest where" in verdict
        else "same"
        if "about the same" in verdict
        else "?"
    )
    return {
        "run": label,
        "share8": shares.get(8),
        "share512": shares.get(512),
        "overhead8": overhead.get(8),
        "overhead512": overhead.get(512),
        "agreement": end.get("t0_agreement"),
        "t1_agreement": end.get("t1_agreement"),
        "t0_us": plain["t0_us"],
        "cut8": speed.get(8),
        "cut512": speed.get(512),
        "t0_eager_us": t0[0],
        "t0_cut_us": t0[1],
        "compile_s": max((c.get("prepare_s") or 0) for c in cuts) if cuts else None,
        "reading": reading,
        "wall_s": result["wall_s"],
        "others": max(p.get("others_cpu_share") or 0 for p in points),
        "lead": verdict.split("\n\n")[0],
    }


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--seeds", default="0,1,2,3,4")
    args.add_argument("--hogs", type=int, default=2)
    opts = args.parse_args()
    seeds = [int(s) for s in opts.seeds.split(",")]
    rows = []
    for seed in seeds:
        for busy in (False, True) if opts.hogs else (False,):
            hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(opts.hogs if busy else 0)]
            try:
                rows.append(row(f"seed {seed} {'busy' if busy else 'quiet'}", run(seed)))
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(
        f"{os.cpu_count()} cores, 1 torch thread, {opts.hogs} hog(s) in the busy runs; "
        "default workload (digits MLP), batch 8 and 512\n"
    )
    head = (
        f"{'run':<14} {'fixed@8':>8} {'fixed@512':>9} {'prof.@8':>8} {'prof.@512':>9} "
        f"{'t0':>6} {'trace/t0':>8} {'trace/t1':>8} {'cut@8':>6} {'cut@512':>7} "
        f"{'t0 eager':>9} {'t0 cut':>7} "
        f"{'compile':>8} {'others':>6} {'wall':>6}  reading"
    )
    print(head)
    for r in rows:
        print(
            f"{r['run']:<14} {r['share8']:>8.0%} {r['share512']:>9.0%} {r['overhead8']:>7.2f}× "
            f"{r['overhead512']:>8.2f}× {r['t0_us']:>4.0f}µs {r['agreement']:>8.2f} "
            f"{r['t1_agreement']:>8.2f} {r['cut8']:>5.2f}× "
            f"{r['cut512']:>6.2f}× {r['t0_eager_us']:>7.0f}µs {r['t0_cut_us']:>5.0f}µs "
            f"{r['compile_s']:>7.1f}s {r['others']:>6.0%} {r['wall_s']:>5.1f}s  {r['reading']}"
        )
    ok_share = all(r["share8"] > r["share512"] for r in rows)
    ok_grow = all(abs(r["t1_agreement"] - 1) <= 0.25 for r in rows)
    ok_fixed = all(0.75 <= r["agreement"] <= 3.0 for r in rows)
    readings = {r["reading"] for r in rows}
    print(f"\nfixed share larger at 8 than at 512 in every run: {ok_share}")
    for kind in ("quiet", "busy"):
        some = [r["t1_agreement"] for r in rows if r["run"].endswith(kind)]
        if some:
            print(
                f"trace's growing part ÷ the unprofiled t1, {kind} runs: "
                f"{min(some):.2f}–{max(some):.2f} (a trace is timed by the wall clock)"
            )
    print(f"... within ±25 % in every run: {ok_grow}")
    print(
        f"trace's fixed part 0.75–3× the unprofiled t0 in every run: {ok_fixed} "
        f"(range {min(r['agreement'] for r in rows):.2f}–{max(r['agreement'] for r in rows):.2f})"
    )
    print(
        f"unprofiled t0: {min(r['t0_us'] for r in rows):.0f}–{max(r['t0_us'] for r in rows):.0f} µs; "
        f"fixed share at 8: {min(r['share8'] for r in rows):.0%}–{max(r['share8'] for r in rows):.0%}, "
        f"at 512: {min(r['share512'] for r in rows):.0%}–{max(r['share512'] for r in rows):.0%}"
    )
    print(f"one reading of the overhead cut in every run: {len(readings) == 1} ({', '.join(readings)})")
    print(
        f"profiler overhead, median: {statistics.median(r['overhead8'] for r in rows):.2f}× at 8, "
        f"{statistics.median(r['overhead512'] for r in rows):.2f}× at 512"
    )
    print("leads:")
    for r in rows:
        print(f"  {r['run']}: {r['lead']}")


if __name__ == "__main__":
    main()
