"""What lesson 10's runs past one device show (pure, unit-tested): a data-parallel check against
one process, what a cluster would add (predicted from published link bandwidths, labelled so),
and a two-stage pipeline's memory split and bubble."""

from __future__ import annotations

from typing import Any

from bsdemo.bounds import noisy_line
from bsdemo.recipes.closing import join
from bsdemo.timing import THREAD_CLOCK
from bsdemo.units import fixed, format_bytes, percent, sig

# Published peak bandwidth per GPU and direction, bytes/s: what a ring all-reduce can use at most
LINKS = {"NVLink 4 (H100 SXM)": 450e9, "PCIe 4.0 ×16": 32e9, "100 Gb/s Ethernet": 12.5e9}


def ring_allreduce_s(gradient_bytes: int, devices: int, bandwidth: float) -> float:
    """A ring all-reduce sends and receives 2(N−1)/N of the gradient per device: its time at a
    link's peak bandwidth (a lower bound: latency and protocol overhead come on top)."""
    return 2 * (devices - 1) / devices * gradient_bytes / bandwidth


def cluster_prediction(r: dict[str, Any], devices: int = 8) -> list[dict[str, Any]]:
    """Predicted all-reduce time per step of this model's gradient on `devices` GPUs over each
    published link, beside the compute this machine measured per process."""
    return [
        {
            "link (published peak)": name,
            "GPUs": devices,
            "predicted all-reduce ms": ring_allreduce_s(r["gradient_bytes"], devices, bw) * 1e3,
        }
        for name, bw in LINKS.items()
    ]


def ddp_verdict(r: dict[str, Any]) -> str:
    """The closing text (Markdown) of a data-parallel check."""
    same = (
        "the same parameters as one process with the whole batch, up to float32 rounding"
        if r["equivalent"]
        else "parameters that differ from one process's by more than float32 rounding — check the shards"
    )
    share = r["allreduce_s"] / r["step_s"]
    speed = r["samples_per_sec"] / r["single_process_samples_per_sec"]
    lead = (
        f"{r['processes']} processes × batch {r['per_process_batch_size']} = batch "
        f"{r['global_batch_size']}: "
        + (
            "the same parameters as one process, to float32 rounding."
            if r["equivalent"]
            else "parameters unlike one process's — check the shards."
        )
    )
    measured = noisy_line(r) or (
        f"A step took {fixed(r['step_s'] * 1e3, 1)} ms, {percent(share, 0)} of it the all-reduce of "
        f"{format_bytes(r['gradient_bytes'])} of gradients; one process on one member's share of "
        f"the cores ({_threads(r)}) took {fixed(r['single_process_step_s'] * 1e3, 1)} ms for the whole "
        f"batch. So the group ran at {fixed(speed, 2)}× one process's samples/s: a scaling efficiency "
        f"of {percent(r['scaling_efficiency'], 0)}{_clocks(r)}."
    )
    return join(
        lead,
        f"After {r['steps']} steps they hold {same} (largest difference "
        f"{sig(r['max_abs_param_diff'], 2)}): averaging the shards' gradients is the "
        f"gradient of the whole batch. {measured} Here the processes share one "
        "machine's cores and talk through its memory; on separate GPUs each brings its "
        "own compute, and the all-reduce crosses a link instead — the table below "
        "predicts that part.",
    )


def _threads(r: dict[str, Any]) -> str:
    n = r.get("single_process_threads", 1)
    return f"{n} thread" + ("s" if n != 1 else "")


def _clocks(r: dict[str, Any]) -> str:
    """How a data-parallel check's times were taken (older records did not say)."""
    if r.get("clock") == THREAD_CLOCK:
        return (
            " (compute timed by each process's own CPU time, which other programs cannot "
            "lengthen; the all-reduce by the wall clock once both processes reached it)"
        )
    return " (wall clock)" if r.get("clock") else ""


def pipeline_verdict(r: dict[str, Any]) -> str:
    """The closing text (Markdown) of a pipeline check."""
    most = max(p + a for p, a in zip(r["stage_parameter_bytes"], r["stage_activation_bytes"], strict=True))
    whole = r["single_parameter_bytes"] + r["single_activation_bytes"]
    same = (
        "the same parameters as one process, up to float32 rounding"
        if r["equivalent"]
        else "parameters that differ from one process's by more than float32 rounding"
    )
    return join(
        f"Each stage held at most {format_bytes(most)}, {percent(most / whole, 0)} of the "
        f"{format_bytes(whole)} the whole model needs in one process.",
        f"That is why a model too big for one device is cut into stages. The two stages "
        f"reached {same} (largest difference {sig(r['max_abs_param_diff'], 2)}). Sending one "
        f"micro-batch's activations ({format_bytes(r['transfer_bytes'])}) took "
        f"{fixed(r['transfer_s'] * 1e3, 3)} ms. The cost is the bubble: with "
        f"{r['micro_batches']} micro-batches the stages sat idle {percent(r['bubble'], 0)} of a "
        f"step (GPipe's (S−1)/(M+S−1) for equal stages is {percent(r['ideal_bubble'], 0)}) — "
        "more micro-batches shrink it. On one CPU the stages share the cores: this is "
        "the mechanism at small scale, not a speed-up. "
        + (
            noisy_line(r)
            or f"The pipelined step took {fixed(r['step_s'] * 1e3, 1)} ms by the "
            f"wall clock, one process {fixed(r['single_process_step_s'] * 1e3, 1)} ms; the "
            f"stages' compute, scheduled, fills {fixed(r['schedule_step_s'] * 1e3, 1)} ms of "
            "it"
            + (
                " — the rest is the stages waiting on each other's messages and for the shared cores."
                if r["step_s"] > 1.5 * r["schedule_step_s"]
                else "."
            )
        ),
    )
