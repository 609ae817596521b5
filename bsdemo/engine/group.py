"""A torch.distributed process group of fresh processes, started from anywhere — the CLI or a
scheduler worker (a daemonic process, which multiprocessing forbids to have children of its own).

Each member is `python -m bsdemo.engine.group SPEC`: a new interpreter that reads its rank, the
group's size, the rendezvous file and the target function from SPEC, runs
`target(rank, world, **arguments)` and writes what it returns to its own result file. The
launcher polls the members; when the caller says stop, or one member fails, it kills them all.
On Linux every member also dies with its launcher (PR_SET_PDEATHSIG, set by the member as it
starts), so a worker killed outright leaves no member behind. Results travel as pickles in a
private temporary folder that only this launcher and its own members write; a launcher killed
outright leaves it, and the next launcher (or the pool replacing that worker) removes it.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from bsdemo.jobkinds import JobStopped
from bsdemo.lifetime import die_with, group_folder, remove_orphan_folders

POLL_S = 0.1
JOIN_S = 30.0  # a killed member is reaped within this
# who starts a group's members instead of this machine: set in a course's worker actor, whose
# groups are placed on the cluster's nodes (bsdemo.cluster.groups); None: here
LAUNCHER: Callable[..., list[Any]] | None = None


def member_threads(world: int) -> int:
    """Each member's share of this machine's cores."""
    return max(1, (os.cpu_count() or 1) // world)


def run_group(
    target: str,
    world: int,
    arguments: dict[str, Any],
    should_stop: Callable[[], bool] | None = None,
    threads: int | None = None,
) -> list[Any]:
    """Run `target` ("module:function") in `world` new processes of one gloo group; what each
    rank returned, by rank. Raises JobStopped when stopped and RuntimeError when a member fails;
    every member has exited (or been killed) when this returns or raises."""
    threads = threads or member_threads(world)
    if LAUNCHER is not None:
        return LAUNCHER(target, world, arguments, should_stop, threads)
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    remove_orphan_folders()  # those of launchers killed outright (a worker over its time cap)
    with group_folder() as folder:
        members = []
        try:
            for rank in range(world):
                spec = Path(folder) / f"spec-{rank}.json"
                spec.write_text(
                    json.dumps(
                        {
                            "target": target,
                            "rank": rank,
                            "world": world,
                            "threads": threads,
                            "parent": os.getpid(),
                            "init": f"file://{Path(folder) / 'rendezvous'}",
                            "arguments": arguments,
                            "result": str(Path(folder) / f"result-{rank}.pickle"),
                        }
                    )
                )
                with open(Path(folder) / f"stderr-{rank}.txt", "wb") as stderr:
                    members.append(
                        subprocess.Popen(
                            [sys.executable, "-m", "bsdemo.engine.group", str(spec)],
                            env=env,
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=stderr,
                        )
                    )
            _wait(members, should_stop, Path(folder))
            return [_result(Path(folder) / f"result-{rank}.pickle") for rank in range(world)]
        finally:
            _end(members)


def _wait(members: list[subprocess.Popen], should_stop, folder: Path) -> None:
    """Until every member has exited; raises (and the caller kills the rest) when one fails or
    the caller says stop."""
    while True:
        codes = [m.poll() for m in members]
        # a member that wrote its whole result has done its work, whatever its teardown did
        codes = [
            0 if code not in (None, 0) and (folder / f"result-{rank}.pickle").exists() else code
            for rank, code in enumerate(codes)
        ]
        failed = next((i for i, code in enumerate(codes) if code not in (None, 0)), None)
        if failed is not None:
            lines = (folder / f"stderr-{failed}.txt").read_text(errors="replace").strip()
            raise RuntimeError(
                f"process {failed} of the group exited with code {codes[failed]}: "
                f"{lines.splitlines()[-1][:300] if lines else 'no message'}"
            )
        if all(code == 0 for code in codes):
            return
        if should_stop is not None and should_stop():
            raise JobStopped("Stopped before it finished.")
        time.sleep(POLL_S)


def _end(members: list[subprocess.Popen]) -> None:
    """Kill and reap every member still running."""
    for m in members:
        if m.poll() is None:
            m.kill()
    for m in members:
        m.wait(timeout=JOIN_S)


def _result(path: Path) -> Any:
    with open(path, "rb") as f:
        return pickle.load(f)  # written by this launcher's own member, in its private folder


def run_member(
    target: str,
    rank: int,
    world: int,
    init: str,
    arguments: dict[str, Any],
    threads: int,
    keep: Callable[[Any], None] | None = None,
    timeout_s: float | None = None,
) -> Any:
    """One member's work, in the process it runs in (a fresh interpreter here, a cluster's actor
    in bsdemo.cluster.groups): join the gloo group at `init`, run `target(rank, world,
    **arguments)`, hand what it returns to `keep` before leaving the group, and return it."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    module, name = target.split(":")
    function = getattr(importlib.import_module(module), name)
    dist.init_process_group(
        "gloo",
        init_method=init,
        rank=rank,
        world_size=world,
        **({"timeout": timedelta(seconds=timeout_s)} if timeout_s else {}),
    )
    try:
        result = function(rank, world, **arguments)
        if keep is not None:
            keep(result)
        return result
    finally:
        dist.destroy_process_group()


def _member(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    die_with(spec["parent"])

    def keep(result: Any) -> None:
        # the result first: gloo's teardown has, rarely, aborted a member ("terminate called
        # without an active exception") after its work was done; the launcher then takes the
        # written result, and the work is not lost to a crash in the cleanup
        partial = spec["result"] + ".part"
        with open(partial, "wb") as f:
            pickle.dump(result, f)
        os.replace(partial, spec["result"])

    run_member(
        spec["target"], spec["rank"], spec["world"], spec["init"], spec["arguments"], spec["threads"], keep
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: the group's native threads have nothing left to do


if __name__ == "__main__":
    _member(sys.argv[1])
