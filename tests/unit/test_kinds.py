"""A job kind is declared once (bsdemo.jobkinds.KINDS): the worker, the scheduler's admission, a
page's progress and the CLI read the declaration, so each one must be whole and true to the
engine function it names."""

from __future__ import annotations

import inspect

from bsdemo.jobkinds import KINDS, planned_points


def test_every_kind_names_an_engine_function_that_takes_its_options():
    from bsdemo.engine.worker import engine_function

    for kind in KINDS.values():
        if kind.name == "train":  # the training loop itself, stepped in turns by the worker
            assert not kind.entry
            continue
        function = engine_function(kind.name)
        params = inspect.signature(function).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        for name in ("should_stop", *kind.option_names):
            assert takes_any or name in params, (kind.name, name)
        # a kind that returns its one record is a plain function; the others yield records
        assert inspect.isgeneratorfunction(function) != kind.one_record, kind.name
        assert kind.ended and kind.ended[0].isupper(), kind.name


def test_every_command_a_kind_declares_is_one_the_cli_has():
    from bsdemo.cli.checks import COMMAND_KINDS
    from bsdemo.cli.parser import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    declared = {k.command: k.name for k in KINDS.values() if k.command}
    assert COMMAND_KINDS == declared and set(declared) <= set(commands)
    assert len(set(declared.values())) == len(declared)  # one command a kind


def test_an_exclusive_kind_says_what_a_waiting_run_waits_for():
    from bsdemo.scheduler.admission import EXCLUSIVE_WAIT, exclusive_wait
    from bsdemo.scheduler.job import Job

    for kind in KINDS.values():
        if not kind.exclusive:
            continue
        job = Job.__new__(Job)
        job.kind = kind.name
        said = exclusive_wait([job])
        assert said == (
            f"a {kind.label} has the device to itself until it ends" if kind.label else EXCLUSIVE_WAIT
        )


def test_planned_points_follow_each_kinds_declaration():
    sizes = {"batch_sizes": [8, 64, 512]}
    assert planned_points("sweep", sizes) == 3
    assert planned_points("norms", {**sizes, "norms": ["batch", "group"]}) == 6
    assert planned_points("sharpness", {**sizes, "remedies": ["warmup"]}) == 3
    assert planned_points("fit_batch", {"techniques": ["fp32", "bf16"]}) == 2
    assert planned_points("architectures", {"architectures": ["cnn", "gan"], **sizes}) == 8
    assert planned_points("find", {}) is None and planned_points("train", sizes) is None


def _command_args(command: str, *flags: str):
    from bsdemo.cli.parser import build_parser

    return build_parser().parse_args([command, *flags])


def test_the_cli_and_the_server_read_one_schema_to_the_same_defaults():
    from bsdemo.jobkinds.schema import check_options, flag_options

    for kind in KINDS.values():
        if kind.command is None:
            continue
        server = check_options(kind.options, {})  # a job that gives no options
        assert flag_options(kind.options, _command_args(kind.command)) == server, kind.name
        namespace = vars(_command_args(kind.command))
        for option in kind.options:  # each option has its flag on its command (and in --help)
            assert option.cli is None or option.dest in namespace, (kind.name, option.cli)


def _too_big(option):
    from bsdemo.jobkinds.schema import BATCHES, CHOICE, NAMES, REAL, SWITCH, WHOLE

    if option.type == WHOLE:
        return int(option.high) + 1, str(int(option.high) + 1)
    if option.type == REAL:
        return option.high * 2 + 1, f"{option.high * 2 + 1:g}"
    if option.type in (NAMES, CHOICE):
        return (["nonsense"] if option.type == NAMES else "nonsense"), "nonsense"
    if option.type == BATCHES:
        return [0], "0"
    assert option.type != SWITCH
    return 0, "0B"  # BYTES


def test_a_value_the_server_refuses_the_cli_refuses_naming_the_flag():
    import pytest

    from bsdemo.config import ConfigError
    from bsdemo.jobkinds.schema import SWITCH, check_options, flag_options

    seen = 0
    for kind in KINDS.values():
        for option in kind.options:
            if option.type == SWITCH or option.cli is None:
                continue
            value, text = _too_big(option)
            with pytest.raises(ConfigError) as server:
                check_options(kind.options, {option.name: value})
            assert server.value.field == option.name
            with pytest.raises(ConfigError) as cli:
                flag_options(kind.options, _command_args(kind.command, option.cli, text))
            assert cli.value.field == option.cli, (kind.name, option.name)
            seen += 1
    assert seen >= 30  # every kind's options, not a few


def test_one_kind_runs_a_class_sweeps_cells_and_live_mode_replaces_only_its_own():
    from bsdemo.jobkinds import ROOM_KIND

    assert [k.name for k in KINDS.values() if k.room] == [ROOM_KIND]
    live = [k for k in KINDS.values() if k.live]
    assert live and all(k.stored and not k.exclusive for k in live)  # a run, not a measurement


def test_an_engine_functions_own_defaults_are_its_kinds_declared_ones():
    """A default an engine function keeps for Python callers (bsdemo.api) is the declaration's:
    a job with no options and a call with no arguments run the same measurement."""
    from bsdemo.engine.worker import engine_function

    compared = 0
    for kind in KINDS.values():
        if not kind.entry:
            continue
        params = inspect.signature(engine_function(kind.name)).parameters
        for option in kind.options:
            param = params.get(option.name)
            if param is None or param.default is param.empty:
                continue
            own = list(param.default) if isinstance(param.default, tuple) else param.default
            declared = list(option.default) if isinstance(option.default, tuple) else option.default
            assert own == declared, (kind.name, option.name, own, declared)
            compared += 1
    assert compared >= 15
