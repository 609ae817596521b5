"""Engine overhead: samples/s of `bsdemo.engine.train` against a bare hand-written PyTorch loop.

Same model, same device-resident data, same batch, same optimizer; both timed end to end over the
same steps from the consumer's side (the engine's per-step events, memory counters and loss
readback included). Target: engine >= 0.95x the bare loop. "ratio": the median over repeats of
engine / bare, each pair run back to back (alternating which goes first); "range": the lowest
and highest pair.
With --chunk N both loops live in one process and take turns N steps at a time, --repeats
turns each: "range" is then the middle half of the pairs.

    .venv/bin/python bench/engine_overhead.py [--device auto] [--steps 300] [--repeats 3]
    .venv/bin/python bench/engine_overhead.py --clock thread --chunk 100 --repeats 40
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from bsdemo.config import RunConfig
from bsdemo.engine.data import load_dataset
from bsdemo.engine.measure import resolve_device, synchronize
from bsdemo.engine.models import build_model, make_optimizer
from bsdemo.engine.train import train

SKIP = 10  # steps before the timed window (warm-up) in both loops
CLOCK = time.perf_counter  # --clock thread: this thread's CPU time (stable under time-slicing)

WORKLOADS = {
    "mlp/digits": dict(dataset="digits", model="mlp"),
    "cnn/synthetic": dict(dataset="synthetic", model="cnn", width=16, depth=2, samples=8192),
    "transformer": dict(dataset="arithmetic", model="transformer", width=64, depth=2),
}


def bare_loop(cfg: RunConfig, steps: int) -> float:
    """samples/s of the plainest correct loop (bare_steps) over `steps` steps, the first SKIP
    untimed."""
    device = resolve_device(cfg.device)
    loop = bare_steps(cfg)
    for _ in range(SKIP):
        next(loop)
    synchronize(device)
    t0 = CLOCK()
    samples = sum(next(loop) for _ in range(steps - SKIP))
    synchronize(device)
    return samples / (CLOCK() - t0)


def engine_loop(cfg: RunConfig, steps: int) -> float:
    cfg = RunConfig(**{**vars(cfg), "epochs": None, "max_steps": steps, "eval_interval": 10**6})
    t0 = None
    samples = 0
    for event in train(cfg):
        if event.kind != "step":
            continue
        if event.step == SKIP:
            t0, samples = CLOCK(), 0
        elif t0 is not None:
            samples += event.samples_per_sec * event.step_time_s
            t_last = CLOCK()
    return samples / (t_last - t0)


def bare_steps(cfg: RunConfig) -> Iterator[int]:
    """The plainest correct loop, one step per next() (its sample count): randperm slices,
    forward, mean loss, backward, step."""
    device = resolve_device(cfg.device)
    data = load_dataset(cfg, device)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, data.input_shape, data.n_classes).to(device)
    opt = make_optimizer(cfg, model.parameters())
    g = torch.Generator(device=device).manual_seed(cfg.seed)
    n, b = len(data.y_train), cfg.batch_size
    while True:
        for idx in torch.randperm(n, generator=g, device=device).split(b):
            opt.zero_grad(set_to_none=True)
            logits = model(data.x_train[idx])
            y = data.y_train[idx]
            if logits.dim() > 2:
                logits, y = logits.flatten(0, 1), y.flatten()
            F.cross_entropy(logits, y).backward()
            opt.step()
            yield len(idx)


def engine_steps(cfg: RunConfig, steps: int) -> Iterator[int]:
    """The engine's train() as a generator of its steps' sample counts (the events consumed)."""
    cfg = RunConfig(**{**vars(cfg), "epochs": None, "max_steps": steps, "eval_interval": 10**6})
    for event in train(cfg):
        if event.kind == "step":
            yield round(event.samples_per_sec * event.step_time_s)


def interleaved(cfg: RunConfig, chunks: int, chunk: int) -> tuple[float, float, list[float]]:
    """Both loops alive in one process, taking turns a chunk of steps at a time (who goes first
    alternates): load that comes and goes falls on both alike. (bare samples/s, engine
    samples/s, each pair's engine / bare)."""
    loops = {"bare": bare_steps(cfg), "engine": engine_steps(cfg, SKIP + chunks * chunk)}
    for loop in loops.values():
        for _ in range(SKIP):
            next(loop)
    totals = {"bare": [0, 0.0], "engine": [0, 0.0]}
    ratios = []
    for i in range(chunks):
        rate = {}
        for name in ("bare", "engine") if i % 2 == 0 else ("engine", "bare"):
            loop, t = loops[name], CLOCK()
            samples = sum(next(loop) for _ in range(chunk))
            took = CLOCK() - t
            rate[name] = samples / took
            totals[name][0] += samples
            totals[name][1] += took
        ratios.append(rate["engine"] / rate["bare"])
    return (totals["bare"][0] / totals["bare"][1], totals["engine"][0] / totals["engine"][1], sorted(ratios))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-sizes", default="1,8,64,512")
    ap.add_argument(
        "--clock",
        choices=("wall", "thread"),
        default="wall",
        help="wall: seconds waited; thread: this thread's CPU time (one torch "
        "thread each side; what load cannot change)",
    )
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument(
        "--chunk",
        type=int,
        default=0,
        help="> 0: both loops in one process, taking turns this many steps at a "
        "time, --repeats turns each (the figure least moved by load)",
    )
    args = ap.parse_args()
    global CLOCK
    if args.clock == "thread":
        CLOCK = time.thread_time
        torch.set_num_threads(1)  # CPU time of other threads would not be counted
    device = resolve_device(args.device)
    print(
        f"device: {device}  torch {torch.__version__}  threads {torch.get_num_threads()}  "
        f"steps <= {args.steps} (first {SKIP} untimed)  repeats {args.repeats} (median, "
        f"alternating order)"
    )
    print(
        f"{'workload':<15} {'batch':>6} {'steps':>6} {'bare samples/s':>15} {'engine samples/s':>17} "
        f"{'ratio':>6} {'range':>11}"
    )
    print(f"clock: {args.clock}")
    for name, settings in ((n, WORKLOADS[n]) for n in args.workloads.split(",")):
        for b in map(int, args.batch_sizes.split(",")):
            cfg = RunConfig(**settings, batch_size=b, device=args.device)
            steps = min(args.steps, max(60, 30_000 // b))  # large batches: fewer, longer steps
            if args.chunk:
                chunk = max(1, min(args.chunk, steps // 10))
                rb, re, pairs = interleaved(cfg, args.repeats, chunk)
                q = len(pairs) // 4
                print(
                    f"{name:<15} {b:>6} {chunk * args.repeats:>6} {rb:>15,.0f} {re:>17,.0f} "
                    f"{statistics.median(pairs):>6.3f} {pairs[q]:>5.3f}–{pairs[-1 - q]:.3f}"
                )
                continue
            bare, eng = [], []
            for r in range(args.repeats):  # interleaved, alternating who goes first
                if r % 2:
                    eng.append(engine_loop(cfg, steps))
                    bare.append(bare_loop(cfg, steps))
                else:
                    bare.append(bare_loop(cfg, steps))
                    eng.append(engine_loop(cfg, steps))
            rb, re = statistics.median(bare), statistics.median(eng)
            # each repeat's pair ran back to back under the same load: the median of the
            # paired ratios, and their range, say more than a ratio of two medians
            pairs = sorted(e / b_ for e, b_ in zip(eng, bare, strict=True))
            print(
                f"{name:<15} {b:>6} {steps:>6} {rb:>15,.0f} {re:>17,.0f} "
                f"{statistics.median(pairs):>6.3f} {pairs[0]:>5.3f}–{pairs[-1]:.3f}"
            )


if __name__ == "__main__":
    main()
