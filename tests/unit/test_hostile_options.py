"""Every job kind's options, hostile: admission (bsdemo.jobkinds.assess, what the server, the
API and the course's Ray scheduler call before queueing) refuses each bad value with a
ConfigError naming the option, the value (truncated) and what is allowed, and never raises
anything else: nested lists, huge numbers, empty and wrong-typed values, NaN."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bsdemo.config import QUOTE_CHARS, ConfigError, RunConfig
from bsdemo.jobkinds import KINDS, assess
from bsdemo.limits import Limits

LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", " ", "none", "1,,2", "x" * 5000, "batch", "sgd", "fp16", "mlp"]),
)
HOSTILE = st.recursive(
    LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def _config(kind: str) -> RunConfig:
    """A config each kind accepts at its defaults (its models, its epoch budget)."""
    spec = KINDS[kind]
    model = spec.models[0] if spec.models else "mlp"
    cfg = RunConfig(model=model, epochs=2, depth=2 if kind == "pipeline" else 1)
    return cfg.validated()[0]


def _admitted_or_refused(kind: str, options: dict) -> None:
    try:
        assess(kind, _config(kind), options, Limits(), 60.0)
    except ConfigError as exc:
        text = str(exc)
        assert exc.field and text and "\n" not in text
        # the value is quoted truncated: a 5,000-character value never comes back whole
        assert len(text) < 4 * QUOTE_CHARS + 400, text[:200]


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@example(data=None)  # the kind's defaults: no options at all
def test_admission_refuses_every_hostile_option_cleanly(kind, data):
    """Each of the kind's own options (and a stranger), given hostile values: admitted, or
    one ConfigError; never a TypeError, OverflowError or any other exception."""
    if data is None:
        _admitted_or_refused(kind, {})
        return
    names = list(KINDS[kind].option_names) + ["not_an_option"]
    chosen = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    _admitted_or_refused(kind, {name: data.draw(HOSTILE, label=name) for name in chosen})


@pytest.mark.parametrize(
    ("kind", "option"),
    [
        ("norms", "norms"),
        ("sharpness", "remedies"),
        ("fit_batch", "techniques"),
        ("architectures", "architectures"),
    ],
)
def test_nested_lists_of_names_are_refused_by_name(kind, option):
    """The four kinds whose option is a list of names: a nested list, a number among the names
    and a repeat are each a refusal naming the option (a TypeError before)."""
    base = {"memory_budget_bytes": 2**30} if kind == "fit_batch" else {}
    for bad in ([["batch"]], [1, 2], ["x", "x"], "group", [None]):
        with pytest.raises(ConfigError) as caught:
            assess(kind, _config(kind), {**base, option: bad}, Limits(), 60.0)
        assert caught.value.field == option


def test_a_huge_whole_number_is_refused_as_a_number():
    """10**400 has no float: a real-valued option refuses it (an OverflowError before)."""
    with pytest.raises(ConfigError) as caught:
        assess("sweep", _config("sweep"), {"batch_sizes": [8], "min_timed_s": 10**400}, Limits(), 60.0)
    assert caught.value.field == "min_timed_s"
    with pytest.raises(ConfigError):
        assess("sweep", _config("sweep"), {"batch_sizes": [8], "min_timed_s": math.inf}, Limits(), 60.0)


def test_the_pipeline_refuses_batchnorm_micro_batches_of_one_sample():
    """BatchNorm over a one-sample micro-batch is torch's ValueError mid-run: refused up front,
    naming the micro-batches and how many the batch allows."""
    cfg = RunConfig(model="mlp", depth=2, norm="batch", batch_size=8).validated()[0]
    with pytest.raises(ConfigError) as caught:
        assess("pipeline", cfg, {"micro_batches": 8}, Limits(), 60.0)
    assert caught.value.field == "micro_batches" and "at most 4" in str(caught.value)
    assess("pipeline", cfg, {"micro_batches": 4}, Limits(), 60.0)  # two samples each: fine
