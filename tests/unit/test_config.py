"""RunConfig validation, clamping and the query-parameter round trip (no torch involved)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdemo.config import DATASETS, DEVICES, IMAGE_DATASETS, MODELS, NORMS, OPTIMIZERS, ConfigError, RunConfig
from bsdemo.presets import PRESETS, preset_of


def test_defaults_are_valid_and_derived_numbers_follow():
    cfg, notices = RunConfig().validated()
    assert notices == []
    assert cfg.train_samples + cfg.test_samples == 1797
    assert cfg.effective_batch_size == 32
    assert cfg.updates_per_epoch == math.ceil(cfg.train_samples / 32)
    assert cfg.planned_steps == 10 * cfg.updates_per_epoch


@pytest.mark.parametrize(
    "field,value,allowed",
    [
        ("batch_size", 0, "from 1 to 65536"),
        ("batch_size", -4, "from 1 to 65536"),
        ("batch_size", 10**9, "from 1 to 65536"),
        ("lr", 0.0, "greater than 0"),
        ("lr", float("nan"), "finite"),
        ("lr", float("inf"), "finite"),
        ("accumulation_steps", 0, "from 1 to 1024"),
        ("optimizer", "rmsprop", "sgd, momentum, adam, adamw"),
        ("dataset", "imagenet", "digits, synthetic"),
        ("device", "tpu", "auto, cpu, cuda, mps"),
        ("norm", "instance", "none, batch, group, layer"),
        ("epochs", 0, "from 1 to"),
        ("seed", -1, "from 0 to"),
        ("warmup_steps", -1, "from 0 to"),
        ("samples", 5, "from 20 to"),
        ("batch_size", 2.5, "whole number"),
        ("batch_size", True, "whole number"),
    ],
)
def test_invalid_values_name_field_value_and_what_is_allowed(field, value, allowed):
    with pytest.raises(ConfigError) as err:
        RunConfig(**{field: value}).validated()
    message = str(err.value)
    assert err.value.field == field
    assert message.startswith(f"{field}: got {value!r}")
    assert allowed in message


def test_cnn_needs_an_image_dataset():
    with pytest.raises(ConfigError, match="image dataset for the CNN"):
        RunConfig(model="cnn", dataset="spirals").validated()


def test_no_budget_at_all_is_an_error():
    with pytest.raises(ConfigError, match="epochs"):
        RunConfig(epochs=None, max_steps=None).validated()


def test_batch_larger_than_training_set_is_clamped_with_notice():
    cfg, notices = RunConfig(batch_size=5000).validated()
    assert cfg.batch_size == cfg.train_samples
    assert cfg.updates_per_epoch == 1
    assert len(notices) == 1 and "clamped" in notices[0] and "5000" in notices[0]


def test_effective_batch_larger_than_training_set_clamps_accumulation():
    cfg, notices = RunConfig(batch_size=500, accumulation_steps=8).validated()
    assert cfg.batch_size == 500 and cfg.accumulation_steps == math.ceil(cfg.train_samples / 500)
    assert "accumulation steps clamped" in notices[0]


def test_params_round_trip_and_only_non_defaults_are_written():
    cfg = RunConfig(batch_size=256, lr=0.003, accumulation_steps=4, optimizer="adam", seed=9)
    params = cfg.to_params()
    assert params == {
        "batch_size": "256",
        "lr": "0.003",
        "accumulation_steps": "4",
        "optimizer": "adam",
        "seed": "9",
    }
    assert RunConfig.from_params(params) == cfg
    assert RunConfig().to_params() == {}


def test_step_budget_alone_replaces_the_epoch_budget():
    cfg = RunConfig.from_params({"max_steps": "50"})
    assert cfg.epochs is None and cfg.planned_steps == 50


@pytest.mark.parametrize(
    "params,field",
    [
        ({"batch_sise": "8"}, "batch_sise"),
        ({"batch_size": "eight"}, "batch_size"),
        ({"batch_size": "8.5"}, "batch_size"),
        ({"lr": "fast"}, "lr"),
        ({"dataset": "x" * 500}, "dataset"),
    ],
)
def test_bad_query_params_raise_config_errors(params, field):
    with pytest.raises(ConfigError) as err:
        RunConfig.from_params(params).validated()
    assert err.value.field == field
    assert len(str(err.value)) < 300  # a very long value is cut, not echoed whole


def test_repeated_query_param_takes_the_last_value():
    assert RunConfig.from_params({"batch_size": ["8", "64"]}).batch_size == 64


def test_every_preset_is_a_valid_config():
    for name, preset in PRESETS.items():
        cfg, _ = RunConfig(**preset.settings).validated()
        assert preset_of(cfg) == name


configs = st.builds(
    RunConfig,
    dataset=st.sampled_from([d for d in DATASETS if d != "arithmetic"]),
    model=st.just("mlp"),
    norm=st.sampled_from(NORMS),
    width=st.integers(1, 4096),
    depth=st.integers(1, 16),
    batch_size=st.integers(1, 65536),
    lr=st.floats(1e-6, 100.0, allow_nan=False),
    accumulation_steps=st.integers(1, 1024),
    optimizer=st.sampled_from(OPTIMIZERS),
    warmup_steps=st.integers(0, 10**6),
    epochs=st.one_of(st.none(), st.integers(1, 10_000)),
    max_steps=st.integers(1, 10**6),
    seed=st.integers(0, 2**31 - 1),
    device=st.sampled_from(DEVICES),
    eval_interval=st.integers(0, 1000),
    samples=st.integers(20, 200_000),
    noise=st.floats(0.0, 10.0, allow_nan=False),
).filter(lambda c: not (c.norm == "batch" and c.batch_size < 2))  # refused: tested below


@given(configs)
@settings(max_examples=200, deadline=None)
def test_valid_configs_round_trip_through_the_url(cfg):
    checked, _ = cfg.validated()
    assert checked.batch_size <= checked.train_samples
    assert checked.effective_batch_size <= checked.train_samples + checked.batch_size
    assert RunConfig.from_params(checked.to_params()) == checked


@given(
    st.dictionaries(
        st.sampled_from([f for f in RunConfig.__dataclass_fields__] + ["junk"]),
        st.text(max_size=80),
        max_size=6,
    )
)
@settings(max_examples=300, deadline=None)
def test_arbitrary_strings_are_a_valid_config_or_a_config_error(params):
    try:
        cfg, _ = RunConfig.from_params(params).validated()
    except ConfigError as err:
        assert err.field in RunConfig.__dataclass_fields__ or err.field == "junk"
    else:
        assert cfg.batch_size >= 1 and math.isfinite(cfg.lr)


@given(st.sampled_from(MODELS), st.sampled_from(DATASETS))
def test_model_dataset_pairs(model, dataset):
    takes = {
        "mlp": set(DATASETS) - {"arithmetic"},
        "cnn": set(IMAGE_DATASETS),
        "transformer": {*IMAGE_DATASETS, "arithmetic"},
        "lstm": {*IMAGE_DATASETS, "arithmetic"},
        "gan": {"digits", "mnist", "fashion"},
    }
    if dataset not in takes[model]:
        with pytest.raises(ConfigError):
            RunConfig(model=model, dataset=dataset).validated()
    else:
        RunConfig(model=model, dataset=dataset).validated()


# ----- hostile links: any URL gives a config and, at worst, a short message -----
names = st.one_of(
    st.sampled_from([*RunConfig.__dataclass_fields__, "run"]), st.text(min_size=0, max_size=300)
)
values = st.one_of(
    st.text(max_size=300),
    st.sampled_from(
        [
            "²",
            "-inf",
            "nan",
            "1e306",
            "[click me](https://example.com)",
            "![p](https://example.com/p.png)",
            "<script>alert(1)</script>",
            "x" * 100_000,
            "",
            "none",
            "0x10",
            "١٢٣",
            "9" * 5000,
        ]
    ),
)


@given(st.dictionaries(names, values, max_size=8))
@settings(max_examples=500, deadline=None)
def test_any_query_gives_a_config_and_a_short_message(params):
    from bsdemo.config import QUOTE_CHARS, config_from_query

    cfg, message = config_from_query(params)
    assert isinstance(cfg, RunConfig)
    cfg.validated()  # what the page shows is always runnable
    if message is not None:
        # quoted at most QUOTE_CHARS of a name and of a value, plus our own words
        assert len(message) <= 2 * QUOTE_CHARS + 400, len(message)


def test_a_huge_or_crowded_query_is_answered_without_echoing_it():
    from bsdemo.config import config_from_query

    cfg, message = config_from_query({"x" * 100_000: "1"})
    assert cfg == RunConfig() and len(message) < 600 and "x" * 65 not in message
    cfg, message = config_from_query({f"p{i}": "1" for i in range(3000)})
    assert cfg == RunConfig() and "3,000 settings" in message


@pytest.mark.parametrize(
    "raw,job",
    [
        ("12", 12),
        ("12.deadbeef", 12),
        (["3", "4"], 4),
        ("²", None),
        ("١٢", None),
        ("-1", None),
        ("", None),
        (None, None),
        ("1" * 12, 111111111111),
        ("1" * 13, None),
        ("x" * 100_000, None),
    ],
)
def test_a_links_run_id_is_ascii_digits_or_nothing(raw, job):
    from bsdemo.config import parse_run_id

    assert parse_run_id(raw) == job


def test_errors_quote_long_names_and_values_short():
    exc = ConfigError("n" * 5000, "v" * 5000, "something")
    assert len(str(exc)) < 200 and str(exc).endswith("allowed: something")


@pytest.mark.parametrize("text", ["1e306GiB", "1e400", "inf", "-1MiB", "0", "", "2PiB", "nan KiB"])
def test_byte_sizes_out_of_range_are_config_errors(text):
    from bsdemo.units import parse_bytes

    with pytest.raises(ConfigError, match="memory_budget"):
        parse_bytes(text)


@given(st.text(max_size=200))
@settings(max_examples=500, deadline=None)
def test_plain_text_escapes_every_markdown_mark(text):
    from bsdemo.plaintext import plain, unescape
    from tests.plain_check import is_plain

    shown = plain(text)
    assert unescape(shown) == text.replace("\r", " ").replace("\n", " ")
    assert is_plain(shown), shown


@pytest.mark.parametrize(
    "text",
    [
        "https://example.com",
        "www.example.com",
        "a@example.com",
        ":red[x]",
        ":smile:",
        "mailto:x",
        "`https://x`",
        "``:``",
    ],
)
def test_words_that_could_autolink_go_into_code_spans(text):
    from bsdemo.plaintext import plain, unescape

    shown = plain(f"see {text} now")
    assert shown.startswith("see `") and shown.endswith("` now")
    assert unescape(shown) == f"see {text} now"


def test_batch_norm_refuses_a_batch_of_one_and_drops_a_lone_last_sample():
    with pytest.raises(ConfigError) as err:
        RunConfig(norm="batch", batch_size=1).validated()
    assert err.value.field == "batch_size" and "at least 2 with BatchNorm" in err.value.allowed
    cfg, notices = RunConfig(norm="batch", batch_size=3).validated()  # 1,438 = 3 * 479 + 1
    assert cfg.train_samples % 3 == 1 and cfg.drops_lone_sample
    assert any("one sample left over" in n for n in notices)
    assert not RunConfig(norm="batch", batch_size=2).drops_lone_sample
    assert not RunConfig(norm="layer", batch_size=3).drops_lone_sample
    assert not RunConfig(model="cnn", norm="batch", batch_size=1).validated()[0].drops_lone_sample


@pytest.mark.parametrize("name", ["time_limit_s", "max_steps", "lr"])
def test_an_empty_setting_in_a_link_is_refused_not_read_as_unset(name):
    """`?time_limit_s=` once meant "no limit" silently: an empty value is now refused by name
    (only `none` unsets a setting that may be unset)."""
    from bsdemo.config import config_from_query

    cfg, message = config_from_query({name: ""})
    assert cfg == RunConfig() and name in message and "a value" in message
    if name != "lr":  # an optional setting: "none" unsets it
        assert getattr(RunConfig.from_params({name: "none"}), name) is None


def test_a_batch_size_list_with_an_empty_entry_is_refused():
    from bsdemo.units import parse_batch_sizes

    for text in ("1,,2", "1,2,", ",1", ""):
        with pytest.raises(ConfigError, match="batch_sizes"):
            parse_batch_sizes(text, "batch_sizes", 64)
    assert parse_batch_sizes(" 1, 2 ,4 ", "batch_sizes", 64) == [1, 2, 4]


@pytest.mark.parametrize("text", ["١٢", "1_000", "٣٢,٦٤"])
def test_numbers_are_ascii_digits_not_whatever_python_would_read(text):
    """Python's int() reads Arabic-Indic digits and digit-group underscores ("١٢" -> 12,
    "1_000" -> 1000): a link, a flag or a batch list refuses them instead, naming the field."""
    from bsdemo.config import config_from_query
    from bsdemo.units import parse_batch_sizes, whole_number

    cfg, message = config_from_query({"batch_size": text})
    assert cfg == RunConfig() and "batch_size" in message
    with pytest.raises(ConfigError, match="steps"):
        whole_number("steps", text, 1, 10**6, exact=False)
    with pytest.raises(ConfigError, match="batch_sizes"):
        parse_batch_sizes(text, "batch_sizes", 4096)
    assert whole_number("steps", " +12 ", 1, 100, exact=False) == 12  # as a person types it


def test_a_checked_config_says_so_by_its_type_and_is_never_checked_again(monkeypatch):
    """RunConfig.validated() returns a CheckedRunConfig (oversize batches clamped); validated()
    on one returns it as it is, and the scheduler's admission takes it without a second check.
    A config changed from one (dataclasses.replace) is a plain RunConfig again, checked where it
    is used."""
    import dataclasses
    import pickle

    import pytest

    from bsdemo import config
    from bsdemo.config import CheckedRunConfig, ConfigError, RunConfig
    from bsdemo.limits import Limits
    from bsdemo.scheduler import admission

    checked, notices = RunConfig(batch_size=5000).validated()
    assert type(checked) is CheckedRunConfig and checked.batch_size == checked.train_samples
    assert notices and "clamped" in notices[0]
    assert checked == RunConfig(batch_size=checked.train_samples)  # equal settings, equal configs
    assert hash(checked) == hash(RunConfig(batch_size=checked.train_samples))
    assert type(pickle.loads(pickle.dumps(checked))) is CheckedRunConfig  # to a Ray actor
    changed = dataclasses.replace(checked, batch_size=9000)
    assert type(changed) is RunConfig and changed.batch_size == 9000
    assert type(CheckedRunConfig()) is RunConfig  # only validated() makes one
    with pytest.raises(ConfigError, match="time_limit_s"):
        checked.with_time_limit(-1.0)
    capped = checked.with_time_limit(30.0)
    assert type(capped) is CheckedRunConfig and capped.time_limit_s == 30.0

    calls = []
    real = config._checked
    monkeypatch.setattr(config, "_checked", lambda cfg: calls.append(cfg) or real(cfg))
    assert checked.validated() == (checked, [])
    cfg, _, _ = admission.checked(checked, "train", None, Limits())
    assert calls == [] and type(cfg) is CheckedRunConfig and cfg.time_limit_s is not None
    admission.checked(RunConfig(), "train", None, Limits())
    assert len(calls) == 1  # a plain config: checked once, where it enters
