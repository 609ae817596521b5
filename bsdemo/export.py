"""A session's runs as JSON (everything: settings, summary, series) or CSV (one row per step).

Pure functions of job snapshots (bsdemo.runs): the Training Lab offers both as downloads. Every
other page's results (a sweep's points, a comparison's rows) go out as CSV and as JSON with the
page's settings and the student's prediction (`results_csv`, `results_json`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from bsdemo.runs import STEP_FIELDS, JobSnapshot


def runs_json(runs: Sequence[JobSnapshot]) -> str:
    return json.dumps(
        [
            {
                "run": s.id,
                "status": s.status,
                "config": s.config,
                "device": (s.start or {}).get("device"),
                "summary": (s.end or {}).get("summary"),
                "steps": s.steps,
                "evals": s.evals,
                "stored_at": s.stored_at,
                "shared_device": s.shared_device,
            }
            for s in runs
        ],
        indent=1,
    )


def runs_csv(runs: Sequence[JobSnapshot]) -> str:
    """One row per recorded step of every run, with the run's batch settings beside it."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["run", "batch_size", "accumulation_steps", "lr", "optimizer", *STEP_FIELDS])
    for s in runs:
        c = s.config
        for i in range(len(s.steps["step"])):
            writer.writerow(
                [
                    s.id,
                    c["batch_size"],
                    c["accumulation_steps"],
                    c["lr"],
                    c["optimizer"],
                    *(s.steps[f][i] for f in STEP_FIELDS),
                ]
            )
    return out.getvalue()


def results_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """A page's results, one row each; the columns of every row, in first-seen order. Nested
    values (a memory breakdown) are written as JSON."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    out = io.StringIO()
    writer = csv.DictWriter(out, columns)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()})
    return out.getvalue()


def results_json(
    page: str, settings: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], prediction: str | None = None
) -> str:
    """A page's results with what produced them: the page, its settings (as its link writes
    them), the student's prediction, and the rows."""
    return json.dumps(
        {"page": page, "settings": dict(settings), "prediction": prediction, "results": list(rows)},
        indent=1,
        default=str,
    )
