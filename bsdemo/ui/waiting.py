"""What a waiting run's owner reads: its place in line, why it waits, and when it should start."""

from __future__ import annotations

from bsdemo.runs import JobSnapshot


def duration_text(seconds: float) -> str:
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def waiting_message(snap: JobSnapshot, what: str = "Run") -> str:
    """'Run 12 is waiting: position 2 in the queue (1 run(s) ahead of it in the queue); it should
    start in about 14 s (predicted).' — the estimate says when it is only an upper bound."""
    text = f"{what} {snap.id} is waiting: position {snap.queue_position} in the queue"
    if snap.wait_reason:
        text += f" ({snap.wait_reason})"
    if snap.estimated_wait_s is not None:
        if snap.wait_is_bound:
            text += (
                f"; it should start within {duration_text(snap.estimated_wait_s)} "
                "(predicted; runs ahead with no measured speed yet count at their time cap)"
            )
        else:
            text += (
                f"; it should start in about {duration_text(snap.estimated_wait_s)} "
                "(predicted from the runs ahead: their progress and measured speeds)"
            )
    return text + "."
