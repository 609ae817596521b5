"""bsdemo.export's page results: CSV with every row's columns, JSON with settings and the
student's prediction."""

from __future__ import annotations

import csv
import io
import json

from bsdemo import export


def test_page_results_go_out_as_csv_and_json_with_what_produced_them():
    rows = [
        {"batch_size": 1, "status": "ok", "samples_per_sec": 950.5, "memory_breakdown": {"params": 10}},
        {"batch_size": 2, "status": "oom", "message": "out of memory, simulated"},
    ]
    table = list(csv.DictReader(io.StringIO(export.results_csv(rows))))
    assert list(table[0]) == ["batch_size", "status", "samples_per_sec", "memory_breakdown", "message"]
    assert table[0]["memory_breakdown"] == '{"params": 10}' and table[1]["message"].startswith("out")
    assert table[1]["samples_per_sec"] == ""
    data = json.loads(export.results_json("throughput", {"largest": "256"}, rows, "about the same"))
    assert data == {
        "page": "throughput",
        "settings": {"largest": "256"},
        "prediction": "about the same",
        "results": rows,
    }
