"""Lesson 9's normalisation grid: the job kind's checks and cost, the engine's cells (the
per-sample normalisations never depend on batch-mates; BatchNorm does), the page's texts on
constructed grids, and `bsdemo norms --json`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bsdemo import recipes
from bsdemo.config import ConfigError, RunConfig
from bsdemo.jobkinds import assess, norms_configs
from bsdemo.limits import Limits
from tests.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "options, field",
    [
        ({"batch_sizes": [1, 4]}, "batch_sizes"),  # BatchNorm needs two samples
        ({"batch_sizes": [8, 4]}, "batch_sizes"),
        ({"batch_sizes": [2] * 9}, "batch_sizes"),
        ({"norms": ["batch", "weight"]}, "norms"),
        ({"norms": []}, "norms"),
        ({"seeds": 3}, "seeds"),
    ],
)
def test_a_bad_grid_is_refused_naming_its_option(options, field):
    with pytest.raises(ConfigError) as err:
        assess("norms", RunConfig(epochs=2).validated()[0], options, Limits(), 60.0)
    assert err.value.field == field


def test_the_grid_costs_the_steps_of_all_its_runs():
    cfg = RunConfig(epochs=2).validated()[0]
    options, cost = assess("norms", cfg, {"batch_sizes": [2, 32]}, Limits(), 60.0)
    assert options == {"batch_sizes": [2, 32], "norms": ["none", "batch", "group", "layer"]}
    runs = norms_configs(cfg, options)
    assert [(c.norm, c.batch_size) for c in runs][:3] == [("none", 2), ("none", 32), ("batch", 2)]
    assert cost.steps == 4 * (2 * 719 + 2 * 45) and cost.micro_batch == 32


def test_batch_mates_change_batchnorm_predictions_and_never_a_per_sample_norms():
    from bsdemo.engine.norms import norms_grid

    cells = list(norms_grid(RunConfig(epochs=1), [2, 64], ["batch", "group"]))
    assert cells[-1]["kind"] == "norms_end" and cells[-1]["cells"] == 4
    by = {(c["norm"], c["batch_size"]): c for c in cells[:-1]}
    assert all(c["status"] == "completed" for c in by.values())
    assert by["group", 2]["partner_changed"] == 0.0 and by["group", 64]["partner_changed"] == 0.0
    # per-sample: the test set in batches of any size gives the evaluation's own accuracy
    assert by["group", 2]["train_mode_test_accuracy"] == pytest.approx(
        by["group", 2]["test_accuracy"], abs=1e-6
    )
    assert by["batch", 2]["partner_changed"] > 0.05  # pairs: each feature normalises to ±1
    assert by["batch", 2]["partner_changed"] > by["batch", 64]["partner_changed"]


def cell(norm, batch, acc, train_mode=None, changed=0.0):
    return {
        "norm": norm,
        "batch_size": batch,
        "status": "completed",
        "test_accuracy": acc,
        "train_accuracy": acc,
        "train_mode_test_accuracy": acc if train_mode is None else train_mode,
        "partner_changed": changed,
    }


def test_the_verdict_says_what_the_grid_showed():
    failed = [
        cell("none", 2, 0.95),
        cell("none", 128, 0.5),
        cell("batch", 2, 0.45, 0.2, 0.52),
        cell("batch", 128, 0.93, 0.92, 0.04),
        cell("group", 2, 0.94),
        cell("layer", 2, 0.96),
        cell("group", 128, 0.85),
    ]
    text = recipes.norms_verdict(failed)
    assert text.startswith("At batch 2 BatchNorm reached 45.0%, 51 points below LayerNorm's 96.0%.\n\n")
    assert "BatchNorm did best at batch 128 (93.0%)" in text
    assert "changed 52% of its predictions (at batch 128: 4%)" in text
    assert "none of their predictions changed" in text and "too few steps" in text
    index, numbers = recipes.norms_prediction(failed)
    assert index == 0 and "BatchNorm 45.0%" in numbers
    alike = [cell("batch", 2, 0.90, 0.89, 0.01), cell("group", 2, 0.91), cell("none", 2, 0.92)]
    text = recipes.norms_verdict(alike, model="cnn")
    assert text.startswith(
        "At batch 2 BatchNorm reached 90.0%, within 1 points of GroupNorm: no small-batch failure this time."
    )
    assert "every position of the image" in text
    assert recipes.norms_prediction(alike)[0] == 2
    assert recipes.norms_prediction([cell("batch", 2, 0.95), cell("layer", 2, 0.5)])[0] == 1
    assert recipes.norms_verdict([cell("none", 2, 0.9)]) is None  # nothing to compare


def test_cli_norms_prints_one_result_per_cell_as_json():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsdemo",
            "norms",
            "--batch-sizes",
            "8,64",
            "--norms",
            "batch,layer",
            "--epochs",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["norm"], r["batch_size"]) for r in rows] == [
        ("batch", 8),
        ("batch", 64),
        ("layer", 8),
        ("layer", 64),
    ]
    for r in rows:
        assert r["kind"] == "norms_result"
        assert {"norm", "batch_size", "test_accuracy", "train_accuracy"} <= set(r)
        assert 0 <= r["test_accuracy"] <= 1 and 0 <= r["train_accuracy"] <= 1


def test_the_table_is_a_row_per_normalisation_and_a_column_per_batch():
    from bsdemo.charts import norms_table

    rows = norms_table(
        [
            cell("batch", 2, 0.451, 0.2, 0.52),
            cell("batch", 8, 0.9, 0.85, 0.1),
            cell("group", 2, 0.947),
            cell("group", 8, 0.95),
        ]
    )
    assert rows[0] == {"normalisation": "BatchNorm", "batch 2": 45.1, "batch 8": 90.0}
    assert rows[1]["batch 2"] == 20.0 and rows[2]["batch 2"] == 52.0
    assert rows[3] == {"normalisation": "GroupNorm", "batch 2": 94.7, "batch 8": 95.0}
