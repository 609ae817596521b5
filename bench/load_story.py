"""Does the throughput lesson tell the same story on a busy machine? The default sweep, quiet
and with CPU hogs running, in turn (quiet, busy, quiet, busy, …), each in a fresh process as
`python -m bsdemo sweep --json` runs it (the workers' thread rule).

Per run: samples/s per batch normalised to the largest batch's, t0, t1, the knee (and its 68 %
range), the crossover, the "Predict first" verdict, the whole sweep's wall time and its first
point's. Then each busy run against the quiet runs' median curve. Targets (issue 23): the
normalised curve within 20 % of the quiet one at every batch, the knee within one power of two
and the same verdict in every busy run, t0 >= 0 and the fitted line within the points' spread.
The same figures from the wall clock (what the page used before) are printed beside them.

    .venv/bin/python bench/load_story.py [--reruns 3] [--hogs 2] [-- extra sweep flags]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time

from bsdemo.recipes import throughput_prediction

HOG = "while True: pass"


def run_sweep(extra: list[str]) -> dict:
    began = time.perf_counter()
    first = None
    points: dict[int, dict] = {}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bsdemo", "sweep", "--json", *extra], stdout=subprocess.PIPE, text=True
    )
    for line in proc.stdout:
        event = json.loads(line)
        if event["kind"] == "sweep_point":
            first = first or time.perf_counter() - began
            points[event["batch_size"]] = event
        elif event["kind"] == "sweep_end":
            end = event
    proc.wait()
    return {"points": points, "end": end, "wall_s": time.perf_counter() - began, "first_s": first}


def curve(points: dict[int, dict], clock: str) -> dict[int, float]:
    """samples/s per batch over the largest batch's: by the stable clock or the wall clock."""
    rate = {
        b: (p["samples_per_sec"] if clock == "stable" else p["timing"]["wall_samples_per_sec"])
        for b, p in points.items()
        if p["status"] == "ok"
    }
    top = rate[max(rate)]
    return {b: r / top for b, r in rate.items()}


def knee(norm: dict[int, float], within: float = 0.10) -> int:
    best = max(norm.values())
    return min(b for b, r in norm.items() if r >= (1 - within) * best)


def line_in_spread(run: dict) -> float:
    """The share of points whose middle half of step times holds the fitted line."""
    fit = run["end"]["fit"]
    inside = 0
    ok = [p for p in run["points"].values() if p["status"] == "ok"]
    for p in ok:
        t = fit["t0_s"] + fit["t1_s_per_sample"] * p["batch_size"]
        s = p["timing"]["step_time_s"]
        inside += s["q1"] * 0.98 <= t <= s["q3"] * 1.02  # 2 %: the quartiles' own resolution
    return inside / len(ok)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reruns", type=int, default=3)
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("extra", nargs="*", help="flags for bsdemo sweep, after --")
    args = ap.parse_args()
    runs: list[tuple[str, dict]] = []
    for _ in range(args.reruns):
        runs.append(("quiet", run_sweep(args.extra)))
        hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
        try:
            runs.append(("busy", run_sweep(args.extra)))
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    quiet = [r for c, r in runs if c == "quiet"]
    sizes = sorted(quiet[0]["points"])
    reference = {
        clock: {b: statistics.median(curve(r["points"], clock)[b] for r in quiet) for b in sizes}
        for clock in ("stable", "wall")
    }
    ref_knee = {clock: knee(reference[clock]) for clock in reference}
    print(
        f"quiet median curve's knee: {ref_knee['stable']} (stable clock), "
        f"{ref_knee['wall']} (wall clock); clock: {quiet[0]['end']['clock']}"
    )
    print(
        f"{'run':<6} {'others':>6} {'wall s':>6} {'1st s':>5} {'t0 ms':>6} {'t1 µs':>6} "
        f"{'cross':>9} {'knee':>5} {'knee 68%':>10} {'verdict':>7} {'line in':>7} "
        f"{'max dev':>7} {'| wall: max dev':>15} {'knee':>5} {'verdict':>7}"
    )
    for condition, r in runs:
        end, pts = r["end"], list(r["points"].values())
        busy = statistics.fmean(p["others_cpu_share"] or 0 for p in pts if p["status"] == "ok")
        dev = {
            clock: max(abs(curve(r["points"], clock)[b] / reference[clock][b] - 1) for b in sizes)
            for clock in reference
        }
        verdict = throughput_prediction(pts)
        wall_pts = [p | {"step_time_s": p["batch_size"] / p["timing"]["wall_samples_per_sec"]} for p in pts]
        wall_verdict = throughput_prediction(wall_pts)
        fit = end["fit"]
        kr = end.get("knee_range")
        cross = end["crossover_batch_size"]
        print(
            f"{condition:<6} {busy:>6.0%} {r['wall_s']:>6.1f} {r['first_s']:>5.1f} "
            f"{fit['t0_s'] * 1e3:>6.3f} {fit['t1_s_per_sample'] * 1e6:>6.2f} "
            f"{(f'{cross:.0f}' if cross else 'unnamed'):>9} "
            f"{str(end['knee_batch_size'] or '–'):>5} "
            f"{(f'{kr[0]:.0f}–{kr[1]:.0f}' if kr else '–'):>10} "
            f"{verdict[0] if verdict else '–':>7} {line_in_spread(r):>7.0%} "
            f"{dev['stable']:>7.0%} {dev['wall']:>15.0%} "
            f"{knee(curve(r['points'], 'wall')):>5} "
            f"{wall_verdict[0] if wall_verdict else '–':>7}"
        )
    busy_runs = [r for c, r in runs if c == "busy"]
    ok = all(
        max(abs(curve(r["points"], "stable")[b] / reference["stable"][b] - 1) for b in sizes) <= 0.20
        for r in busy_runs
    )
    knees = [r["end"]["knee_batch_size"] or knee(curve(r["points"], "stable")) for r in busy_runs]
    same_knee = all(abs(math.log2(k / ref_knee["stable"])) <= 1 for k in knees)
    verdicts = {throughput_prediction(list(r["points"].values()))[0] for _, r in runs}
    print(
        f"busy curves within 20 % of quiet at every batch: {ok}; busy knees within one power "
        f"of two of quiet's: {same_knee}; one verdict over every run: {len(verdicts) == 1}"
    )


if __name__ == "__main__":
    main()
