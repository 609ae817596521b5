"""The scheduler package: a FIFO queue of jobs run by warm worker processes (no torch here).

    core.py       Scheduler: the queue, dispatch, events in, the public API pages call
    job.py        Job: the live record of one job, and its snapshot for a page
    admission.py  what may be queued (limits, sharing) and what may start (workers, memory)
    estimates.py  queue-wait estimates, learned from the jobs that ended
    pool.py       the worker processes (spawn), their task queues and stop flags
    stored.py     the write-through to the run store
    joined.py     identical requests ride one run
    superseding.py  a newer job in an older one's place (a waiting one's, Live mode's running one)

What a job is and what it may cost is one table outside the package (bsdemo.jobkinds), which
the engine reads too: which kinds are served from the run store, joined or replaced by Live mode
is each kind's declaration.
"""

from bsdemo.scheduler.admission import CUDA_CONTEXT_BYTES, ActiveRunError
from bsdemo.scheduler.core import Scheduler
from bsdemo.scheduler.pool import start_spawned

__all__ = ["CUDA_CONTEXT_BYTES", "ActiveRunError", "Scheduler", "start_spawned"]
