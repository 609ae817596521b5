"""Each job kind's cost bound: the largest micro- and effective batch, the steps in all, the
wall time and the memory predicted at its largest batch — what the scheduler holds to the
limits before a job is queued. Pure Python."""

from __future__ import annotations

import dataclasses
import math

from bsdemo import footprint
from bsdemo.architectures import (
    run_config,
)
from bsdemo.config import (
    CheckedRunConfig,
)
from bsdemo.jobkinds.kind import (
    FIT_TECHNIQUES,
    Cost,
    accumulation_config,
    critical_steps,
    norms_configs,
    sweep_config,
    sweep_point_steps,
)
from bsdemo.tunables import (
    ACCUM_MEASURE_STEPS,
    CRITICAL_DRAWS,
    FIND_MAX_PROBES,
    FIND_STEPS_PER_PROBE,
    FIND_THROUGHPUT_SIZES,
    FIND_THROUGHPUT_STEPS,
    FIT_BUDGET_STEPS,
    FIT_PROBES,
    FIT_TIMED_STEPS,
    LONGER_FACTOR,
    NOISE_CHUNK,
    PROFILE_CUT_BLOCKS,
    PROFILE_CUT_STEPS,
    PROFILE_PLAIN_STEPS,
    PROFILE_WARMUP,
    SWEEP_ROUNDS,
    SWEEP_WARMUP_STEPS,
)


# ----- what each kind costs at most -----
def _train_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    return Cost(
        min(cfg.batch_size, cfg.train_samples),
        min(cfg.effective_batch_size, cfg.train_samples),
        cfg.planned_steps,
        wall_s,
        footprint.predict(cfg).device,
    )


def _sweep_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    sizes, rounds = options["batch_sizes"], options["rounds"]
    timed = max(1, -(-options["timed_steps"] // rounds))  # per round, as the engine shares it
    # the first round's warm-up, then up to twice `rounds` rounds of one warm-up step and a block
    per_point = options["warmup_steps"] + 2 * rounds * (
        1 + sweep_point_steps(timed, options["min_timed_s"] / rounds, rounds)
    )
    largest = sweep_config(cfg, sizes)
    largest = dataclasses.replace(
        largest, batch_size=min(max(sizes), largest.train_samples), accumulation_steps=1
    )
    return Cost(max(sizes), max(sizes), per_point * len(sizes), wall_s, footprint.predict(largest).device)


def _profile_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    sizes = options["batch_sizes"]
    # per size: two unprofiled blocks and the profiled one (each warm-up + steps + 1), then the
    # cut's warm-up (both models), its first (compiling) step and its alternating blocks
    lab = 2 * (PROFILE_WARMUP + PROFILE_PLAIN_STEPS + 1) + PROFILE_WARMUP + options["steps"] + 1
    cut = 1 + 2 * PROFILE_WARMUP + 2 * PROFILE_CUT_BLOCKS * PROFILE_CUT_STEPS if options["cut"] else 0
    largest = sweep_config(cfg, sizes)
    largest = dataclasses.replace(
        largest, batch_size=min(max(sizes), largest.train_samples), accumulation_steps=1
    )
    return Cost(max(sizes), max(sizes), (lab + cut) * len(sizes), wall_s, footprint.predict(largest).device)


def _find_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    largest = options["max_batch"]
    grown = sweep_config(cfg, [largest]) if largest > cfg.train_samples else cfg
    micro = min(largest, grown.train_samples)
    target = options["target_effective_batch"] or micro
    rounds = SWEEP_ROUNDS  # the throughput's rounds: up to twice as many for a noisy size
    throughput = FIND_THROUGHPUT_SIZES * (
        SWEEP_WARMUP_STEPS + 2 * rounds * (1 + sweep_point_steps(-(-FIND_THROUGHPUT_STEPS // rounds), 0.0))
    )
    return Cost(
        micro,
        max(micro, target),
        FIND_MAX_PROBES * FIND_STEPS_PER_PROBE + throughput,
        wall_s,
        footprint.predict(dataclasses.replace(grown, batch_size=micro, accumulation_steps=1)).device,
    )


def _accum_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    big = options["micro_batch"] * options["accum"]  # one batch of k·b: its own forward pass
    base = dataclasses.replace(
        accumulation_config(cfg, options["variable_length"]), batch_size=big, accumulation_steps=1
    )
    passes = options["steps"] * (1 + options["accum"]) + ACCUM_MEASURE_STEPS * (1 + options["accum"])
    return Cost(big, big, passes, wall_s, footprint.predict(base).device)


def _norms_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    runs = [c.validated()[0] for c in norms_configs(cfg, options)]
    largest = max(runs, key=lambda c: c.batch_size)
    return Cost(
        largest.batch_size,
        largest.batch_size,
        sum(c.planned_steps for c in runs),
        wall_s,
        max(footprint.predict(c).device for c in runs),
    )


def _noise_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    chunk = min(cfg.train_samples, NOISE_CHUNK)
    passes = (
        options["after_steps"] * cfg.accumulation_steps
        + 1
        + options["draws"] * (len(options["batch_sizes"]) + 3)
    )
    big = dataclasses.replace(cfg, batch_size=max(chunk, *options["batch_sizes"]), accumulation_steps=1)
    return Cost(big.batch_size, big.batch_size, passes, wall_s, footprint.predict(big).device)


def _sharpness_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    runs = 2 + len(options["remedies"])
    longer = LONGER_FACTOR - 1 if "longer" in options["remedies"] else 0
    steps = options["max_steps"] * (runs + longer)
    passes = steps * (2 + 2 * ("noise" in options["remedies"]))  # a step, its loss check
    big = dataclasses.replace(
        cfg, batch_size=min(max(options["batch_sizes"]), cfg.train_samples), accumulation_steps=1
    )
    chunk = max(big.batch_size, min(cfg.train_samples, NOISE_CHUNK))
    # a Hessian-vector product keeps the backward graph for a second backward: twice a step's
    return Cost(
        chunk,
        big.batch_size,
        passes,
        wall_s,
        2 * footprint.predict(dataclasses.replace(big, batch_size=chunk)).device,
    )


def _critical_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    sizes = [min(b, cfg.train_samples) for b in options["batch_sizes"]]
    passes = (
        CRITICAL_DRAWS
        + 1
        + 2 * sum(critical_steps(options["max_steps"], b, cfg.train_samples) for b in sizes)
    )
    big = dataclasses.replace(
        cfg, batch_size=max(max(sizes), min(cfg.train_samples, NOISE_CHUNK)), accumulation_steps=1
    )
    return Cost(big.batch_size, max(sizes), passes, wall_s, footprint.predict(big).device)


def _fit_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    techniques = len(options["techniques"] or FIT_TECHNIQUES)
    largest = options["max_batch"]
    verify = max(1, math.ceil(math.log2(largest))) + 1
    passes = techniques * (
        len(FIT_PROBES) + verify + FIT_TIMED_STEPS * options["accumulation"] + FIT_BUDGET_STEPS
    )
    big = dataclasses.replace(cfg, batch_size=min(largest, cfg.train_samples), accumulation_steps=1)
    return Cost(
        largest,
        largest * options["accumulation"],
        passes,
        wall_s,
        min(options["memory_budget_bytes"], footprint.predict(big).device),
    )


def _ddp_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    world = options["processes"]
    single = dataclasses.replace(cfg, batch_size=cfg.batch_size * world, accumulation_steps=1)
    # every member holds a model and its shard's activations; then one process the global batch
    return Cost(
        single.batch_size,
        single.batch_size,
        options["steps"] * (world + 1),
        wall_s,
        max(
            world * footprint.predict(dataclasses.replace(single, batch_size=cfg.batch_size)).device,
            footprint.predict(single).device,
        ),
    )


def _pipeline_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    whole = dataclasses.replace(cfg, accumulation_steps=1)
    # each stage holds half the model, and every micro-batch's activations until the backward
    return Cost(
        cfg.batch_size,
        cfg.batch_size,
        options["steps"] * (options["micro_batches"] + 1),
        wall_s,
        2 * footprint.predict(whole).device,
    )


def _architectures_cost(cfg: CheckedRunConfig, options: dict, wall_s: float) -> Cost:
    runs = [
        run_config(cfg, a, b, options["seconds"]).validated()[0]
        for a in options["architectures"]
        for b in options["batch_sizes"]
    ]
    return Cost(
        max(r.batch_size for r in runs),
        max(r.batch_size for r in runs),
        sum(r.planned_steps for r in runs),
        wall_s,
        max(footprint.predict(r).device for r in runs),
    )
