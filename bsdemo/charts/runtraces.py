"""What every curve of a run shares: its label in legends and tables, its fade once Live mode
has superseded it, and the points a log x-axis can show."""

from __future__ import annotations

from collections.abc import Sequence

from bsdemo.runs import JobSnapshot
from bsdemo.units import setting


def run_label(snap: JobSnapshot) -> str:
    cfg = snap.config
    b, k = cfg["batch_size"], cfg["accumulation_steps"]
    batch = f"batch {b * k}" + (f" ({b}×{k})" if k > 1 else "")
    return f"#{snap.run_number} {batch}, lr {setting(cfg['lr'])}, {cfg['optimizer']}" + (
        " · superseded" if snap.superseded_by is not None else ""
    )


SUPERSEDED_OPACITY = 0.35  # a run Live mode replaced: drawn faint behind the one that replaced it


def _fade(snap: JobSnapshot, opacity: float = 1.0) -> dict:
    """The opacity of one of the run's traces, as a trace property: fainter for a superseded
    run; nothing where it is drawn at full strength (plotly's own default)."""
    value = opacity * (SUPERSEDED_OPACITY if snap.superseded_by is not None else 1.0)
    return {} if value == 1.0 else {"opacity": value}


def _xy(xs: Sequence, ys: Sequence, log: bool) -> tuple[list, list]:
    """The points to draw: on a log x-axis only x > 0 (step 0 has no place there)."""
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if not log or (x is not None and x > 0)]
    return [x for x, _ in pairs], [y for _, y in pairs]
