"""Chance level: what a model that learned nothing scores on a test set, and whether a test
accuracy is within noise of it. A page says "at chance" wherever it shows such an accuracy.
Pure functions, property-tested."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from bsdemo.units import percent

SDS = 3.0  # an accuracy within this many binomial standard errors above chance is at chance


def chance_edge(chance: float, labels: int) -> float:
    """The highest accuracy still at chance on `labels` test labels, where always answering the
    commonest one scores `chance`: chance plus SDS binomial standard errors."""
    return chance + SDS * math.sqrt(chance * (1 - chance) / max(labels, 1))


def at_chance(accuracy: float | None, summary: Mapping[str, Any]) -> bool:
    """Whether a run's test accuracy is within noise of chance on its own test set (its summary's
    chance_accuracy and test_labels: bsdemo.engine.tally.chance_of). False where either is
    unknown (an older record)."""
    chance, labels = summary.get("chance_accuracy"), summary.get("test_labels")
    if accuracy is None or chance is None or not labels:
        return False
    return accuracy <= chance_edge(chance, labels)


def chance_words(accuracy: float, summary: Mapping[str, Any]) -> str:
    """A sentence's clause for an accuracy at chance, with the chance level it is measured by."""
    return (
        f"at chance ({percent(accuracy)}, where always answering the commonest class scores "
        f"{percent(summary['chance_accuracy'])}): it learned nothing here"
    )
