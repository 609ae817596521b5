"""A class's results as a table: a row per round and answer (counts, never members)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from typing import Any


def result_rows(results: dict[str, Any], answers: Callable[[str], Sequence[str]]
                ) -> list[dict[str, Any]]:
    """ClassStore.export's rounds as rows: question, vote, answer, members, share, whether the
    runs supported it. answers(question) gives the question's answers (by their index)."""
    rows = []
    for r in results.get("rounds", []):  # an export that failed: its error, no rows
        names = answers(r["question"]) or [str(i) for i in sorted(r["counts"])]
        total = sum(r["counts"].values())
        for i, name in enumerate(names):
            n = r["counts"].get(i, 0)
            rows.append({"question": r["question"], "vote": r["round"], "answer": name,
                         "members": n, "share": round(n / total, 4) if total else 0.0,
                         "the runs' answer": r["supported"] == i})
    return rows


def results_csv(results: dict[str, Any], answers: Callable[[str], Sequence[str]]) -> str:
    rows = result_rows(results, answers)
    buffer = io.StringIO()
    fields = ["question", "vote", "answer", "members", "share", "the runs' answer"]
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
