"""A class's results as a table: a row per round and answer (counts, never members)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from typing import Any


def result_rows(results: dict[str, Any], answers: Callable[[str], Sequence[str]]) -> list[dict[str, Any]]:
    """ClassStore.export's rounds as rows: question, vote, answer, members, share, whether the
    runs supported it. answers(question) gives the question's answers (by their index)."""
    rows = []
    for r in results.get("rounds", []):  # an export that failed: its error, no rows
        names = answers(r["question"]) or [str(i) for i in sorted(r["counts"])]
        total = sum(r["counts"].values())
        for i, name in enumerate(names):
            n = r["counts"].get(i, 0)
            rows.append(
                {
                    "question": r["question"],
                    "vote": r["round"],
                    "answer": name,
                    "members": n,
                    "share": round(n / total, 4) if total else 0.0,
                    "the runs' answer": r["supported"] == i,
                }
            )
    return rows


def results_csv(results: dict[str, Any], answers: Callable[[str], Sequence[str]]) -> str:
    rows = result_rows(results, answers)
    buffer = io.StringIO()
    fields = ["question", "vote", "answer", "members", "share", "the runs' answer"]
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


RUN_FIELDS = [
    "page",
    "sweep",
    "cell",
    "batch",
    "lr",
    "seed",
    "status",
    "test accuracy",
    "samples/s",
    "samples/s by thread CPU time",
    "others busy",
    "time capped",
    "device",
    "conditions",
]


def run_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """ClassStore.export's sweeps as rows: one a run the room (or its instructor) reported —
    its cell, settings, how it ended, its measures and the conditions they were taken under."""
    from bsdemo.classroom.sweep import condition
    from bsdemo.timing import THREAD_CLOCK

    return [
        {
            "page": s["page"],
            "sweep": s["sweep"],
            "cell": r["cell"],
            "batch": r.get("batch"),
            "lr": r.get("lr"),
            "seed": r.get("seed"),
            "status": r.get("status"),
            "test accuracy": r.get("accuracy"),
            "samples/s": r.get("samples_per_sec"),
            "samples/s by thread CPU time": (r.get("speed") if r.get("clock") == THREAD_CLOCK else None),
            "others busy": r.get("others_busy_share"),
            "time capped": r.get("time_capped"),
            "device": r.get("device"),
            "conditions": condition(r),
        }
        for s in results.get("sweeps", [])
        for r in s["runs"]
    ]


def runs_csv(results: dict[str, Any]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=RUN_FIELDS)
    writer.writeheader()
    writer.writerows(run_rows(results))
    return buffer.getvalue()
