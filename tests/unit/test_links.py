"""bsdemo.links: a page's controls in its link, read back with the lab's checks and messages."""

from __future__ import annotations

import pytest

from bsdemo.config import ConfigError, config_from_query
from bsdemo.links import MAX_PARAMS, Control, View, hidden_params, option_text, read, write

CONTROLS = [
    Control("k", "lr_k", "Batch multiplier k", "int", 1, 256),
    Control("ref_lr", "lr_ref_lr", "Reference lr", "choice", options=(0.002, 0.05, 0.1)),
    Control("budget", "reg_budget", "Memory budget", "choice", options=(None, 4194304)),
    Control("bn", "acc_bn", "BatchNorm", "bool"),
]


def test_a_link_round_trips_every_kind_of_control_and_the_view():
    values = {"lr_k": 32, "lr_ref_lr": 0.002, "reg_budget": None, "acc_bn": True}
    params = write(CONTROLS, values, View(True, ("k", "bn")))
    assert params == {
        "k": "32",
        "ref_lr": "0.002",
        "budget": "none",
        "bn": "1",
        "present": "1",
        "hide": "k,bn",
    }
    assert read(CONTROLS, params) == (values, View(True, ("k", "bn")), None)
    assert read(CONTROLS, {"budget": "4194304", "bn": "off"})[0] == {"reg_budget": 4194304, "acc_bn": False}


@pytest.mark.parametrize(
    "params, message",
    [
        ({"k": "999"}, "k: got '999'; allowed: a whole number from 1 to 256"),
        ({"k": "3.5"}, "k: got '3.5'; allowed: a whole number from 1 to 256"),
        ({"k": "x" * 500}, "allowed: a whole number"),
        ({"ref_lr": "0.3"}, "ref_lr: got '0.3'; allowed: one of 0.002, 0.05, 0.1"),
        ({"bn": "maybe"}, "bn: got 'maybe'; allowed: 1 or 0"),
        ({"colour": "red"}, "parameter: got 'colour'; allowed: k, ref_lr, budget, bn, present, hide"),
        ({"hide": "k,nope"}, "hide: got 'nope'; allowed: a comma-separated list of k, ref_lr"),
        ({"present": "2"}, "present: got '2'; allowed: 1 or 0"),
    ],
)
def test_a_bad_link_sets_nothing_and_says_what_is_allowed(params, message):
    values, view, error = read(CONTROLS, {"k": "8", **params} if "k" not in params else params)
    assert values == {} and view == View()
    assert error.startswith("This link's settings could not be used — ") and message in error
    assert len(error) < 400  # a long value is quoted short


def test_a_link_with_too_many_parameters_is_not_read():
    params = {f"p{i}": "1" for i in range(MAX_PARAMS + 1)}
    assert read(CONTROLS, params)[2].startswith(f"This link has {MAX_PARAMS + 1:,} parameters")


def test_hidden_controls_are_listed_once_and_repeats_take_the_last_value():
    by_param = {c.param: c for c in CONTROLS}
    assert hidden_params("k, k,bn,", by_param) == ("k", "bn")
    assert hidden_params(["bn", "k"], by_param) == ("k",)
    assert CONTROLS[0].parse(["7", "9"]) == 9
    with pytest.raises(ConfigError):
        CONTROLS[0].parse([])


def test_options_are_spelled_as_a_person_types_them():
    assert [option_text(v) for v in (None, 0.05, 1e-4, 8388608, "adam")] == [
        "none",
        "0.05",
        "0.0001",
        "8388608",
        "adam",
    ]


def test_the_labs_own_link_ignores_the_view_switches():
    cfg, error = config_from_query({"batch_size": "64", "present": "1", "hide": "lr"})
    assert error is None and cfg.batch_size == 64
