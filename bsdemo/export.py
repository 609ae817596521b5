"""A session's runs as JSON (everything: settings, summary, series) or CSV (one row per step).

Pure functions of job snapshots (bsdemo.runs): the Training Lab offers both as downloads.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence

from bsdemo.runs import STEP_FIELDS, JobSnapshot


def runs_json(runs: Sequence[JobSnapshot]) -> str:
    return json.dumps([{"run": s.id, "status": s.status, "config": s.config,
                        "device": (s.start or {}).get("device"),
                        "summary": (s.end or {}).get("summary"), "steps": s.steps,
                        "evals": s.evals, "stored_at": s.stored_at,
                        "shared_device": s.shared_device} for s in runs], indent=1)


def runs_csv(runs: Sequence[JobSnapshot]) -> str:
    """One row per recorded step of every run, with the run's batch settings beside it."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["run", "batch_size", "accumulation_steps", "lr", "optimizer", *STEP_FIELDS])
    for s in runs:
        c = s.config
        for i in range(len(s.steps["step"])):
            writer.writerow([s.id, c["batch_size"], c["accumulation_steps"], c["lr"],
                             c["optimizer"], *(s.steps[f][i] for f in STEP_FIELDS)])
    return out.getvalue()
