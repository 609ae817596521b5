"""Fair-sharing limits for a hosted lab, set by the instructor, enforced by the scheduler.

Read from a TOML file named by BSDEMO_LIMITS (a [limits] table) and then from environment
variables BSDEMO_<NAME> (e.g. BSDEMO_MAX_STEPS=50000), so a deployment tunes them to its
hardware without code; and the torch threads each worker may use. Pure Python: the server
reads them, not the workers.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass

from bsdemo.errors import ConfigError
from bsdemo.units import parse_bytes, real_number, setting, whole_number

MAX_WORKERS = 64
MAX_TURNS = 256


@dataclass(frozen=True)
class Limits:
    workers: int = 1  # concurrent runs per device: worker processes kept warm
    # training runs one CPU worker holds at once, stepped in turns on its one thread (no step
    # beside another): a room's runs all start at once instead of queueing; 1 = one at a time
    turns: int = 32
    max_active_per_session: int = 2  # one running + one waiting (a comparison counts as one)
    max_steps: int = 500_000  # optimizer steps a run may plan
    max_wall_s: float = 600.0  # training seconds a run may take (becomes its time cap)
    max_batch_size: int = 65_536  # micro-batch ceiling (a sweep's largest, a check's k·b too)
    max_effective_batch_size: int = 262_144  # samples per optimizer step (micro x accumulation)
    submits_per_minute: int = 12  # per browser: hammering Run gets a "wait" message
    # per browser, a run that replaces one of its own (Live mode's change of a setting, a Run
    # while one waits): it never adds to the queue, so a dragging student gets more
    live_changes_per_minute: int = 60
    max_queued: int = 100  # runs queued or running on the whole server (a comparison: each run)
    # per connection address, on top of per browser: a script that drops its cookie gets a new
    # browser each time, not a new address. A class behind one NAT or proxy shares an address
    # (Streamlit sees the proxy's), hence the generous default: raise it for such a class.
    max_active_per_address: int = 24
    unattended_grace_s: float = 60.0  # a run nobody polls for this long is cancelled
    # a job still running this long after its time cap or its Stop is ended by killing its
    # worker process (and replacing it): the cap needs no cooperation from the job
    stop_grace_s: float = 5.0
    # memory admission: a run starts beside others only if all their predicted peaks fit
    memory_margin: float = 0.10  # share of the device's memory kept free (allocator slack)
    device_memory: int | None = None  # bytes to share out; None = the device's own total
    # on a Ray cluster (BSDEMO_RAY_ADDRESS): how many workers share one GPU, each holding that
    # share of a card (tiny lab runs can share; 1 = a whole GPU each)
    workers_per_gpu: int = 1

    def check(self, cost) -> None:
        """Raise ConfigError naming the limit a job's cost bound (bsdemo.jobkinds.Cost) is over."""
        if cost.micro_batch > self.max_batch_size:
            raise ConfigError(
                "batch_size",
                cost.micro_batch,
                f"at most {self.max_batch_size} on this server (its limit max_batch_size)",
            )
        if cost.effective_batch > self.max_effective_batch_size:
            raise ConfigError(
                "effective batch",
                cost.effective_batch,
                f"at most {self.max_effective_batch_size:,} samples per optimizer "
                "step on this server (its limit max_effective_batch_size)",
            )
        if cost.steps > self.max_steps:
            raise ConfigError(
                "steps",
                cost.steps,
                f"at most {self.max_steps:,} optimizer steps on this server (this "
                f"job plans up to {cost.steps:,}; limit max_steps)",
            )
        if cost.wall_s > self.max_wall_s + 1e-9:
            raise ConfigError(
                "time_limit_s",
                round(cost.wall_s, 3),
                f"at most {setting(self.max_wall_s)} s for the whole job on this server "
                "(its limit max_wall_s)",
            )

    @classmethod
    def load(cls, environ: dict[str, str] | None = None) -> Limits:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        path = env.get("BSDEMO_LIMITS")
        if path:
            try:
                with open(path, "rb") as f:
                    table = tomllib.load(f).get("limits", {})
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError("BSDEMO_LIMITS", path, f"a readable TOML file ({exc})") from None
            values.update(table)
        for f in dataclasses.fields(cls):
            raw = env.get(f"BSDEMO_{f.name.upper()}")
            if raw is not None:
                values[f.name] = raw
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(
                "limits", sorted(unknown)[0], "one of " + ", ".join(f.name for f in dataclasses.fields(cls))
            )
        return cls(**{name: _number(name, value, getattr(cls, name)) for name, value in values.items()})


def _number(name: str, value: object, default: float | None) -> float | int:
    """A limit's value from a TOML file (a number) or the environment (text)."""
    if name == "device_memory":
        return parse_bytes(str(value), name)
    if name == "memory_margin":
        number = real_number(name, value, 0.0, 1.0, low_open=True, exact=False)
        if number >= 1:
            raise ConfigError(name, value, "a share of the device's memory, above 0 and below 1")
        return number
    if isinstance(default, int):
        top = MAX_WORKERS if name.startswith("workers") else MAX_TURNS if name == "turns" else 10**15
        return whole_number(name, value, 1, top, exact=False)
    return real_number(name, value, 0.0, 1e12, low_open=True, exact=False)


def default_threads(workers: int) -> int:
    """Torch threads per worker: BSDEMO_TORCH_THREADS, else the cores less one (the web server's,
    and on a laptop the browser's) shared among the workers.

    Measured on 2 cores with ten browser tabs polling (bench/load_test.py): a worker with 2
    threads took 0.3-4 s for a run that takes 0.08 s with 1, because OpenMP's threads wait on
    each other whenever the browser holds one of their cores.
    """
    raw = os.environ.get("BSDEMO_TORCH_THREADS")
    if raw is None:
        return threads_rule(workers)
    return whole_number("BSDEMO_TORCH_THREADS", raw, 1, 256, exact=False)


def threads_rule(workers: int) -> int:
    """The cores less one, shared among the workers (at least one each)."""
    spare = max(1, (os.cpu_count() or 1) - 1)
    return max(1, spare // workers)
