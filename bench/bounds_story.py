"""Do lesson 10's timed checks keep their bounds and their story on a busy machine? The page's
default data-parallel check and pipeline, quiet and with CPU hogs running, in turn (quiet, busy,
quiet, busy, …), each a fresh `python -m bsdemo … --json` process.

Per run: the data-parallel group's speed-up over one worker (bound: ≤ the processes), its
scaling efficiency and all-reduce share, whether it was re-measured or shown "too noisy"; the
pipeline's bubble and its step against one process. Targets (issue 23): no bound broken, nothing
"too noisy", and the same verdict (efficiency band, bubble band) in every busy run.

    .venv/bin/python bench/bounds_story.py [--reruns 3] [--hogs 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

HOG = "while True: pass"
DDP = ["ddp-check", "--processes", "2", "--steps", "5", "--batch-size", "64", "--json"]
PIPE = ["pipeline-check", "--micro-batches", "4", "--batch-size", "128", "--json"]


def check(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "bsdemo", *args], capture_output=True, text=True,
                         timeout=600)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def band(value: float, edges: tuple[float, ...]) -> str:
    """The verdict's band of a share: which of the edges it passed."""
    below = [e for e in edges if value >= e]
    return f"≥{max(below):.0%}" if below else f"<{min(edges):.0%}"


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--reruns", type=int, default=3)
    args.add_argument("--hogs", type=int, default=2)
    opts = args.parse_args()
    rows = []
    for rerun in range(opts.reruns):
        for busy in (False, True):
            hogs = [subprocess.Popen([sys.executable, "-c", HOG])
                    for _ in range(opts.hogs if busy else 0)]
            try:
                d, p = check(DDP), check(PIPE)
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
            speedup = d["single_process_step_s"] / d["step_s"]
            rows.append((rerun, "busy" if busy else "quiet", d, p, speedup))
            print(f"{rerun} {'busy' if busy else 'quiet'} done", file=sys.stderr, flush=True)
    print("run    load   | ddp speed-up (≤2) | efficiency | band | all-reduce | remeasured | "
          "too noisy | clock           | pipe bubble | pipe ÷ one | too noisy")
    for rerun, load, d, p, speedup in rows:
        print(f"{rerun:<6} {load:<6} | {speedup:>17.2f} | {d['scaling_efficiency']:>10.0%} | "
              f"{band(d['scaling_efficiency'], (0.5, 0.9)):>4} | "
              f"{d['allreduce_s'] / d['step_s']:>10.0%} | {str(d['remeasured']):>10} | "
              f"{str(bool(d['too_noisy'])):>9} | {d.get('clock', '?'):<15} | "
              f"{p['bubble']:>11.0%} | {p['step_s'] / p['single_process_step_s']:>10.2f} | "
              f"{bool(p['too_noisy'])}")
    broken = [r for r in rows if r[4] > 2 * 1.1 or r[2]["too_noisy"] or r[3]["too_noisy"]]
    bands = {band(r[2]["scaling_efficiency"], (0.5, 0.9)) for r in rows if r[1] == "busy"}
    print(f"\nbounds broken or too noisy: {len(broken)} of {len(rows)} runs; busy runs' "
          f"efficiency bands: {sorted(bands)}")


if __name__ == "__main__":
    main()
