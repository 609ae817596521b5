"""The lab's batch-size finder beside its peers, on the same user models and the same budget.

Tools: Lightning's BatchSizeFinder (Tuner.scale_batch_size, modes "power" and "binsearch"),
accelerate's find_executable_batch_size, and the lab's finder (bsdemo.api.find_batch_size).
Models: examples/own_model.py's small ResNet and small GPT, the user's models of the notebook.

Every tool on the same footing:
- the same memory budget and the same out-of-memory rule. On a CPU nothing runs out of memory,
  so a step fails when its accounted memory passes the budget: parameters + gradients + the
  optimizer's state + the activations autograd saves + the largest of them (a workspace), the
  lab's own accounting (bsdemo.engine.memory.SavedActivations). The lab applies it itself; for
  the peers the model is wrapped so that its forward raises the CPU allocator's own error text
  ("DefaultCPUAllocator: can't allocate memory"), which all three tools treat as an OOM;
- the same ceiling (MAX_BATCH: Lightning's max_val, accelerate's starting batch, the lab's
  max_batch) and no safety margin (Lightning's binsearch margin 0, the lab's margin 0), so that
  "found" can be held to the true largest batch;
- the true largest batch under the rule, by bisection over real forward passes;
- trial steps: the optimizer steps each tool ran to answer (Lightning: steps_per_trial=3 per
  trial, its default; accelerate: the user's function, here 3 steps; the lab: 1 warm-up and 3
  timed steps per probe, then a timing of a few sizes for the throughput knee, counted apart);
- whether the returned batch was ever run, and whether a target effective batch (512) is kept:
  the lab splits it into micro-batch × accumulation steps; the peers return a batch size.

The peers install into a virtual environment of their own, bench/.peers (never a dependency of
the lab), with the same torch as this one (TORCH overrides). Run with the lab's environment:

    .venv/bin/python bench/peers_bench.py [--scenarios resnet:48MiB,gpt:32MiB]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "bench" / ".peers"
MAX_BATCH = 2048
STEPS_PER_TRIAL = 3
TARGET = 512  # the effective batch a recipe asks for
SCENARIOS = "resnet:48MiB,resnet:96MiB,gpt:32MiB,gpt:64MiB"
OOM = (
    "DefaultCPUAllocator: can't allocate memory: simulated: a step of batch {b} needs {need} "
    "bytes, over the budget of {budget}"
)


def workload(name: str):
    sys.path.insert(0, str(ROOT / "examples"))
    import own_model

    return getattr(own_model, name)()


class Rule:
    """The out-of-memory rule: the lab's accounting of one training step, against the budget."""

    def __init__(self, params, optimizer_kind: str, budget: int):
        from bsdemo.engine.memory import tensor_bytes
        from bsdemo.footprint import expected_optimizer_state_bytes

        self.params = list(params)
        p = tensor_bytes(self.params)
        self.persistent = 2 * p + expected_optimizer_state_bytes(optimizer_kind, p)
        self.budget = budget
        self.steps: list[tuple[int, bool]] = []  # (batch, within the budget) of every forward

    def loss(self, model, loss_fn, x, y):
        """loss_fn(model(x), y), failing as an allocator would: as soon as the step's accounted
        memory so far (the forward's and the loss's saved tensors, as the lab counts a step)
        passes the budget. It only grows, so this is the lab's check after the forward, reached
        without holding a forward's worth of memory the budget does not have."""
        from bsdemo.engine.memory import SavedActivations

        rule = self

        class Allocator(SavedActivations):
            def _pack(self, t):
                t = super()._pack(t)
                need = rule.persistent + self.bytes + self.largest
                if need > rule.budget:
                    raise RuntimeError(OOM.format(b=len(x), need=need, budget=rule.budget))
                return t

        try:
            with Allocator(self.params):
                out = loss_fn(model(x), y)
        except RuntimeError:
            self.steps.append((len(x), False))
            raise
        self.steps.append((len(x), True))
        return out


def budgeted(work, budget: int):
    """The workload's model wrapped by the rule, (inputs, targets) -> the loss: (module, rule)."""
    import torch

    from bsdemo.engine.own import OwnWorkload

    own = OwnWorkload.checked(work, "cpu")  # the optimizer's kind, as the lab reads it
    inner = own.fresh_model()
    rule = Rule([p for p in inner.parameters() if p.requires_grad], own.kind, budget)

    class Budgeted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, x, y):
            return rule.loss(self.inner, work.loss, x, y)

    return Budgeted(), rule


def true_largest(name: str, budget: int) -> int:
    """The largest batch whose training step passes the rule (bisection, forward passes)."""
    work = workload(name)
    module, rule = budgeted(work, budget)

    def fits(b: int) -> bool:
        x, y = work.batch(b)
        try:
            module(x, y)
            return True
        except RuntimeError as exc:
            if "can't allocate memory" not in str(exc):
                raise
            return False

    lo, hi = 0, MAX_BATCH + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def run_lab(name: str, budget: int, target: int | None) -> dict:
    """The lab's finder (the engine bsdemo.api.find_batch_size runs), each record timed as it
    comes: the wall time to its last probe (the largest batch known), and in all (the knee's
    timing of a few sizes, which the peers do not do, after it)."""
    from bsdemo.engine.finder import find_batch_size
    from bsdemo.engine.own import OwnWorkload, using

    own = OwnWorkload.checked(workload(name), "cpu")
    began, stamps = time.perf_counter(), []
    with using(own):
        for r in find_batch_size(
            own.config(MAX_BATCH, 0, "cpu"),
            memory_budget_bytes=budget,
            margin=0.0,
            max_batch=MAX_BATCH,
            target_effective_batch=target,
        ):
            stamps.append((time.perf_counter() - began, r))
    probes = [r for _, r in stamps if r["kind"] == "find_probe"]
    r = stamps[-1][1]
    # 1 warm-up + 3 timed steps a probe
    return {
        "tool": "bsdemo finder",
        "found": r["batch_size"] if target else r["max_batch_size"],
        "trials": len(probes),
        "steps": 4 * len(probes),
        "ran": [p["batch_size"] for p in probes if p["status"] == "ok"],
        "effective": r["effective_batch_size"] if target else None,
        "accumulation": r["accumulation_steps"],
        "wall_s": max(t for t, rec in stamps if rec["kind"] == "find_probe"),
        "all_s": stamps[-1][0],
    }


def run_lightning(name: str, budget: int, mode: str) -> dict:
    import lightning as L
    import torch
    from lightning.pytorch.tuner import Tuner
    from torch.utils.data import DataLoader, TensorDataset

    work = workload(name)
    module, rule = budgeted(work, budget)
    x, y = work.batch(MAX_BATCH * STEPS_PER_TRIAL)  # room for a trial's steps at the ceiling

    class Lit(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net, self.batch_size = module, 2

        def training_step(self, batch, _):
            return self.net(*batch)

        def configure_optimizers(self):
            return work.optimizer(self.parameters())

        def train_dataloader(self):
            return DataLoader(TensorDataset(x, y), batch_size=self.batch_size, shuffle=True, drop_last=True)

    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(PEERS / "runs"),
    )
    torch.manual_seed(0)
    began = time.perf_counter()
    found = Tuner(trainer).scale_batch_size(
        Lit(),
        mode=mode,
        steps_per_trial=STEPS_PER_TRIAL,
        init_val=2,
        max_trials=25,
        max_val=MAX_BATCH,
        margin=0.0,
    )
    return _peer(f"Lightning {mode}", found, rule, time.perf_counter() - began)


def run_accelerate(name: str, budget: int) -> dict:
    from accelerate.utils import find_executable_batch_size

    work = workload(name)
    module, rule = budgeted(work, budget)
    optimizer = work.optimizer(module.parameters())

    @find_executable_batch_size(starting_batch_size=MAX_BATCH)
    def train(batch_size):
        for _ in range(STEPS_PER_TRIAL):
            x, y = work.batch(batch_size)
            optimizer.zero_grad(set_to_none=True)
            module(x, y).backward()
            optimizer.step()
        return batch_size

    began = time.perf_counter()
    found = train()
    return _peer("accelerate", found, rule, time.perf_counter() - began)


def _peer(tool: str, found: int, rule: Rule, wall: float) -> dict:
    tried = list(dict.fromkeys(b for b, _ in rule.steps))  # each size once, in the order tried
    return {
        "tool": tool,
        "found": found,
        "trials": len(tried),
        "steps": len(rule.steps),
        "ran": sorted({b for b, ok in rule.steps if ok}),
        "effective": found,
        "accumulation": 1,
        "wall_s": wall,
    }


def ensure_peers() -> Path:
    """bench/.peers with torch (this one's version, or TORCH), Lightning and accelerate."""
    import torch

    python = PEERS / "venv" / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEERS / "venv")], check=True)
        torch_req = os.environ.get("TORCH", f"torch=={torch.__version__.split('+')[0]}")
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", torch_req, "lightning", "accelerate"], check=True
        )
    return python


def versions(python: Path) -> str:
    code = (
        "import torch, lightning, accelerate; print(f'torch {torch.__version__}, lightning "
        "{lightning.__version__}, accelerate {accelerate.__version__}')"
    )
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def peer(python: Path, tool: str, name: str, budget: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [str(python), __file__, "--peer", tool, "--model", name, "--budget", str(budget)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise SystemExit(f"{tool} on {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt(total: float | None, found: float) -> str:
    return f"{total - found:.2f}" if total is not None else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=SCENARIOS)
    parser.add_argument("--peer", help=argparse.SUPPRESS)  # inside bench/.peers: one tool
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        import torch

        torch.set_num_threads(1)
        run = {
            "lightning-power": lambda: run_lightning(args.model, args.budget, "power"),
            "lightning-binsearch": lambda: run_lightning(args.model, args.budget, "binsearch"),
            "accelerate": lambda: run_accelerate(args.model, args.budget),
        }[args.peer]
        print(json.dumps(run()))
        return
    import torch

    from bsdemo.units import format_bytes, parse_bytes

    torch.set_num_threads(1)  # as a lab worker on a 2-core server; the peers likewise
    python = ensure_peers()
    print(
        f"# {versions(python)}; ceiling {MAX_BATCH}, {STEPS_PER_TRIAL} steps a trial, "
        "no margin, the same OOM rule"
    )
    print(
        f"{'model':<7} {'budget':>9} {'largest':>7} {'tool':<20} {'found':>6} {'trials':>6} "
        f"{'steps':>6} {'ran it':>6} {'eff. 512':>10} {'wall s':>7} {'+knee s':>7}"
    )
    for scenario in args.scenarios.split(","):
        name, size = scenario.split(":")
        budget = parse_bytes(size)
        largest = true_largest(name, budget)
        rows = [run_lab(name, budget, None)]
        rows += [
            peer(python, tool, name, budget)
            for tool in ("lightning-power", "lightning-binsearch", "accelerate")
        ]
        target = run_lab(name, budget, TARGET)
        for r in rows:
            ran = "yes" if r["found"] in r["ran"] else "NO"
            eff = (
                f"{target['found']}×{target['accumulation']}"
                if r["tool"] == "bsdemo finder"
                else f"{r['found']}×1"
            )
            print(
                f"{name:<7} {format_bytes(budget):>9} {largest:>7} {r['tool']:<20} "
                f"{r['found']:>6} {r['trials']:>6} {r['steps']:>6} {ran:>6} {eff:>10} "
                f"{r['wall_s']:>7.2f} {fmt(r.get('all_s'), r['wall_s']):>7}"
            )


if __name__ == "__main__":
    main()
