"""Every lesson page in its link (AppTest from app.py): settings read back, a bad value said as
plain text while the page keeps working, the URL following the controls, presentation mode."""

from __future__ import annotations

import pytest

from bsdemo.plaintext import unescape
from tests.app.helpers import open_page

PAGES = {  # page -> a link's settings and the widget each lands in
    "pages/lr_scaling.py": (
        {"k": "32", "ref_lr": "0.002", "optimizer": "adam"},
        {"lr_k": 32, "lr_ref_lr": 0.002, "lr_optimizer": "adam"},
    ),
    "pages/regimes.py": (
        {"epochs": "3", "mini": "64", "size": "M"},
        {"reg_epochs": 3, "reg_mini": 64, "reg_size": "M"},
    ),
    "pages/accumulation.py": (
        {"micro": "16", "k": "8", "bn": "1"},
        {"acc_micro": 16, "acc_k": 8, "acc_bn": True},
    ),
    "pages/throughput.py": (
        {"largest": "256", "preset": "moons-mlp"},
        {"tp_largest": 256, "tp_preset": "moons-mlp"},
    ),
    "pages/memory.py": ({"largest": "512"}, {"mem_largest": 512}),
    "pages/norms.py": ({"epochs": "3", "batches": "2,8,32"}, {"nrm_epochs": 3, "nrm_batches": "2,8,32"}),
    "pages/noise.py": (
        {"draws": "16", "after": "100", "rule": "linear", "cap": "1.6"},
        {"noi_draws": 16, "noi_after": 100, "noi_rule": "linear", "noi_cap": 1.6},
    ),
    "pages/fit_batch.py": ({"accum": "8", "size": "L"}, {"fit_accum": 8, "fit_size": "L"}),
    "pages/sharpness.py": (
        {"small": "32", "lr": "0.1", "longer": "1"},
        {"shp_small": 32, "shp_lr": 0.1, "shp_longer": True},
    ),
    "pages/finder.py": ({"margin": "0.2", "target": "512"}, {"find_margin": 0.2, "find_target": 512}),
}


@pytest.mark.parametrize("page", PAGES)
def test_a_pages_link_sets_its_controls_and_the_url_follows_them(page):
    params, expected = PAGES[page]
    at = open_page(page, params)
    assert not at.exception and not at.error
    assert {key: at.session_state[key] for key in expected} == expected
    written = dict(at.query_params)
    assert {k: written[k] for k in params} == params  # the link reproduces what it set
    assert "present" not in written


def test_a_bad_value_is_said_as_plain_text_and_the_rest_is_used():
    at = open_page("pages/regimes.py", {"epochs": "999", "mini": "64", "x<b>": "1"})
    assert not at.exception
    message = unescape(at.error[0].value)
    assert message.startswith(
        "This link's settings could not all be used — epochs: got '999'; "
        "allowed: a whole number from 1 to 100"
    )
    assert at.session_state["reg_epochs"] == 5 and at.session_state["reg_mini"] == 64
    assert dict(at.query_params)["epochs"] == "5"  # the URL now says what the page shows


def test_presentation_mode_from_a_link_hides_the_chosen_controls():
    at = open_page("pages/lr_scaling.py", {"k": "32", "present": "1", "hide": "k,size"})
    assert not at.exception
    assert at.session_state["present"] is True
    assert at.session_state["hide_lr_scaling"] == ["k", "size"]
    styles = " ".join(h.proto.body for h in at.get("html") if "<style>" in h.proto.body)
    assert ".st-key-lr_k { display: none; }" in styles and "font-size: 22px" in styles
    assert ".st-key-lr_size { display: none; }" in styles
    written = dict(at.query_params)
    assert written["present"] == "1" and written["hide"] == "k,size" and written["k"] == "32"
    at.toggle(key="present").set_value(False).run()  # the presenter switches it off
    assert "present" not in dict(at.query_params)
    assert not any("font-size: 22px" in h.proto.body for h in at.get("html"))


def test_the_lab_keeps_its_own_link_and_adds_the_view():
    at = open_page("pages/training_lab.py", {"batch_size": "64", "present": "1", "hide": "lr"})
    assert not at.exception and not at.error
    assert at.session_state["w_batch_pow"] == 64 and at.session_state["present"] is True
    written = dict(at.query_params)
    assert written["batch_size"] == "64" and written["present"] == "1" and written["hide"] == "lr"


SCENARIO_PAGES = [
    "throughput",
    "memory",
    "finder",
    "regimes",
    "lr_scaling",
    "accumulation",
    "norms",
    "noise",
    "sharpness",
    "fit_batch",
]


@pytest.mark.parametrize("slug", SCENARIO_PAGES)
def test_every_scenario_sets_the_controls_it_names_and_defaults_the_rest(slug):
    from urllib.parse import parse_qsl

    from bsdemo.presets import SCENARIOS

    at = open_page(f"pages/{slug}.py")
    controls = {c.param: c for c in at.session_state[f"link_controls_{slug}"]}
    defaults = {c.key: at.session_state[c.key] for c in controls.values()}
    assert len(SCENARIOS[slug]) >= 3 if slug != "lr_scaling" else len(SCENARIOS[slug]) == 2
    for i, (name, query) in enumerate(SCENARIOS[slug].items()):
        at.button(key=f"{slug}_scenario_{i}").click().run()
        assert not at.exception and not at.error, (name, at.error)
        named = dict(parse_qsl(query))
        assert set(named) <= set(controls), name  # every parameter is one of the page's own
        for param, control in controls.items():
            want = control.parse(named[param]) if param in named else defaults[control.key]
            if param == "optimizer" and "optimizer" not in named:  # the preset's own
                continue
            assert at.session_state[control.key] == want, (name, param)
        written = dict(at.query_params)  # the URL follows: a copied link is the scenario
        assert all(written[p] == controls[p].text(controls[p].parse(v)) for p, v in named.items())


def test_a_scenario_after_changed_controls_puts_the_others_back_to_their_defaults():
    at = open_page("pages/accumulation.py", {"k": "16", "bn": "1"})
    at.button(key="accumulation_scenario_1").click().run()  # "Forget the 1/k": unscaled=1
    assert not at.exception and not at.error
    assert at.session_state["acc_unscaled"] is True
    assert at.session_state["acc_k"] == 4 and at.session_state["acc_bn"] is False


def _keys_in_order(node) -> list[str]:
    """Widget keys in the order the page shows them, top to bottom."""
    keys = []
    for child in getattr(node, "children", {}).values():
        key = getattr(child, "key", None)
        if key:
            keys.append(key)
        keys += _keys_in_order(child)
    return keys


@pytest.mark.parametrize(
    "page, run, control",
    [
        ("pages/regimes.py", "reg_run", "reg_epochs"),
        ("pages/memory.py", "mem_run", "mem_largest"),
        ("pages/training_lab.py", "run", "w_epochs"),
    ],
)
def test_presentation_mode_puts_the_run_and_its_results_above_the_controls(page, run, control):
    normal = _keys_in_order(open_page(page).main)
    assert normal.index(control) < normal.index(run)  # a student reads the settings first
    shown = _keys_in_order(open_page(page, {"present": "1"}).main)
    assert shown.index(run) < shown.index(control)  # the back of the room sees the run first


STORED_COMPARISON = r"""
import json, sys, time
from streamlit.testing.v1 import AppTest
from tests.timeouts import scaled  # run from the checkout: the suite's one timeout scale

def open_regimes():
    at = AppTest.from_file(sys.argv[1], default_timeout=scaled(120))
    for k, v in {"sgd": "16", "mini": "128", "epochs": "1", "cap": "10"}.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/regimes.py").run()
    return at

def train(at, key):
    at.button(key=key).click().run()
    for _ in range(900):
        at.run()
        if at.exception or (at.dataframe and not any("runs done" in i.value for i in at.info)):
            return
        time.sleep(0.2)

first = open_regimes()  # one tab trains the three runs: the store keeps them
train(first, "reg_run")
second = open_regimes()  # another tab, the same settings: served from the store
train(second, "reg_run")
note = [i.value for i in second.info if "Stored results" in i.value]
fresh = [b for b in second.button if b.key == "reg_fresh"]
train(second, "reg_fresh")  # trained again now: no stored run in the new comparison
after = [i.value for i in second.info if "Stored results" in i.value]
print(json.dumps({"exception": bool(first.exception or second.exception), "note": note,
                  "fresh": len(fresh), "after": after,
                  "rows": len(second.dataframe[0].value) if second.dataframe else 0}))
"""


def test_a_comparison_trained_once_is_served_from_the_store_in_another_tab(tmp_path):
    """A real server process with a run store: the regimes comparison one tab trained is served
    at once in another, said with where and when it was measured; Train fresh trains it again."""
    import json
    import os
    import subprocess
    import sys

    from tests.app.helpers import APP
    from tests.timeouts import scaled

    out = subprocess.run(
        [sys.executable, "-c", STORED_COMPARISON, APP],
        capture_output=True,
        text=True,
        timeout=scaled(400),
        env={**os.environ, "BSDEMO_DATA_DIR": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert not seen["exception"] and seen["rows"] == 3
    note = [unescape(n) for n in seen["note"]]
    assert len(note) == 1 and note[0].startswith("Stored results (all): measured earlier on ")
    assert "`" not in note[0] and note[0].endswith("and served at once from the run store.")
    assert seen["fresh"] == 1 and seen["after"] == []
