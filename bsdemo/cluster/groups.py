"""A data-parallel or pipeline group across the cluster's nodes: its members as Ray actors in
one placement group.

On a laptop a group's members are fresh processes on the worker's machine
(bsdemo.engine.group.run_group). In a course's worker actor (bsdemo.cluster.workers) the same
call places them on the cluster instead: a placement group of one bundle per member (its CPU
threads) spread over the nodes, so the group starts whole or not at all; then one actor per
bundle, rank 0's address as the gloo rendezvous (tcp://node:port), and each member runs the
same target function a local member runs. The launcher polls them like local members: Stop
(the job's stop flag) or a failed or lost member ends them all, and the placement group is
removed whatever happens. A worker actor that dies takes its members and its placement group
with it (Ray's ownership).

Imports Ray: loaded only in a course's worker actor.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from bsdemo.cluster import first_line
from bsdemo.jobkinds import JobStopped
from bsdemo.units import setting

PLACE_S = 120.0  # the longest a group waits for room for all its members
RENDEZVOUS_S = 120.0  # gloo's timeout for the members to meet
POLL_S = 0.1


class GroupMember:
    """One rank of a group, in an actor of its own on the node its bundle is on."""

    def address(self) -> tuple[str, int, str]:
        """(this node's address, a free port on it, the node's id): rank 0's rendezvous."""
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return (ray.util.get_node_ip_address(), port, ray.get_runtime_context().get_node_id())

    def run(self, target: str, rank: int, world: int, init: str, arguments: dict, threads: int) -> Any:
        from bsdemo.engine.group import run_member

        return run_member(target, rank, world, init, arguments, threads, timeout_s=RENDEZVOUS_S)


def run_on_cluster(
    target: str, world: int, arguments: dict[str, Any], should_stop: Callable[[], bool] | None, threads: int
) -> list[Any]:
    """bsdemo.engine.group.run_group's contract, its members on the cluster's nodes: what each
    rank returned, by rank; JobStopped when stopped; RuntimeError when the group cannot be
    placed or a member fails. Nothing of the group is left when it returns or raises."""
    group = placement_group([{"CPU": threads}] * world, strategy="SPREAD")
    members: list[Any] = []
    try:
        _placed(group, world, threads, should_stop)
        members = [
            ray.remote(GroupMember)
            .options(
                num_cpus=threads,
                max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    group, placement_group_bundle_index=rank
                ),
            )
            .remote()
            for rank in range(world)
        ]
        where = ray.get([m.address.remote() for m in members], timeout=PLACE_S)
        host, port, _ = where[0]
        runs = [
            m.run.remote(target, rank, world, f"tcp://{host}:{port}", arguments, threads)
            for rank, m in enumerate(members)
        ]
        return _results(runs, [node for *_, node in where], should_stop)
    finally:
        for m in members:
            ray.kill(m, no_restart=True)
        remove_placement_group(group)


def _placed(group, world: int, threads: int, should_stop) -> None:
    ready, deadline = group.ready(), time.monotonic() + PLACE_S
    while not ray.wait([ready], timeout=POLL_S)[0]:
        if should_stop is not None and should_stop():
            raise JobStopped("Stopped before the group started.")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the cluster had no room for the group's {world} processes "
                f"({threads} CPU each) within {setting(PLACE_S)} s; a group starts "
                "whole or not at all"
            )


def _results(runs: list, nodes: list[str], should_stop) -> list[Any]:
    results: dict[int, Any] = {}
    while len(results) < len(runs):
        done, _ = ray.wait([r for i, r in enumerate(runs) if i not in results], num_returns=1, timeout=POLL_S)
        for ref in done:
            rank = runs.index(ref)
            try:
                results[rank] = ray.get(ref)
            except RayTaskError as exc:
                raise RuntimeError(
                    f"process {rank} of the group failed on node "
                    f"{nodes[rank][:12]}: {first_line(exc.cause or exc)}"
                ) from None
            except (RayActorError, RayError) as exc:
                raise RuntimeError(
                    f"process {rank} of the group was lost with node {nodes[rank][:12]} ({first_line(exc)})"
                ) from None
        if should_stop is not None and should_stop():
            raise JobStopped("Stopped before it finished.")
    return [results[rank] for rank in range(len(runs))]


def use_cluster_groups() -> None:
    """From now on, in this process, a group's members are placed on the cluster."""
    from bsdemo.engine import group

    group.LAUNCHER = run_on_cluster
