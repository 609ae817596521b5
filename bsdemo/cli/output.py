"""How the CLI prints: a training run's summary, a sweep's table and fits, the finder's answer,
a measurement's records as they stream (a line each, or JSON lines), a check's one record."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from bsdemo.recipes import finder_summary
from bsdemo.units import fixed, format_bytes, percent, sig


def print_sweep_table(points: list[dict]) -> None:
    print(
        f"{'batch':>7} {'status':>9} {'samples/s':>12} {'middle half':>19} {'step time':>11} "
        f"{'rounds':>6} {'peak memory':>12}  source"
    )
    for p in points:
        timing = p.get("timing") or {}
        rate = timing.get("samples_per_sec")
        middle = f"{fixed(rate['q1'], 0)}–{fixed(rate['q3'], 0)}" if rate else ""
        sim = " (simulated)" if p["simulated"] else ""
        print(
            f"{p['batch_size']:>7} {p['status']:>9} {fmt(p['samples_per_sec'], lambda v: fixed(v, 0)):>12} "
            f"{middle:>19} {fmt(p['step_time_s'], seconds):>11} "
            f"{timing.get('rounds', ''):>6} {fmt(p['peak_memory_bytes'], format_bytes):>12}  "
            f"{p['memory_source'] or ''}{sim}"
        )
    clocks = {(p.get("timing") or {}).get("clock") for p in points} - {None}
    if clocks:
        print(f"timed by {', '.join(sorted(clocks))}; middle half: the quartiles of the timed steps")
    for p in points:  # why a point did not run (an error of the model's own code, say)
        if p["status"] == "failed" and p.get("message"):
            print(f"batch {p['batch_size']}: {p['message']}")


def print_find_result(r: dict) -> None:
    print(finder_summary(r))


def span(values, write: Callable) -> str:
    return f" (68 %: {write(values[0])}–{write(values[1])})" if values else ""


def seconds(v: float) -> str:
    return f"{sig(v)} s"


def whole(v: float) -> str:
    return fixed(v, 0)


def print_sweep_end(end: dict) -> None:
    fit = end["fit"]
    if fit["t0_s"] is not None:
        t0 = fit.get("t0_range_s")
        print(
            f"step time  t(B) = {sig(fit['t0_s'] * 1e3)} ms"
            f"{span(t0 and [v * 1e3 for v in t0], sig)} + "
            f"{sig(fit['t1_s_per_sample'] * 1e6)} µs × B   (R² {fixed(fit['r2_time'], 3)}); overhead = "
            f"per-sample work at B ≈ {fmt(end['crossover_batch_size'], whole)}"
            f"{span(end.get('crossover_range'), whole)}"
        )
    if fit["m0_bytes"] is not None:
        print(
            f"memory     M(B) = {format_bytes(fit['m0_bytes'])} + "
            f"{format_bytes(fit['m_bytes_per_sample'])} × B   (R² {fixed(fit['r2_memory'], 3)})"
        )
    print(
        f"largest batch that ran: {fmt(end['max_batch_size_fits'], '{}')}; predicted largest "
        f"under {fmt(end['capacity_bytes'], format_bytes)}: "
        f"{fmt(end['predicted_max_batch_size'], '{} (predicted)')}; throughput knee: "
        f"{fmt(end['knee_batch_size'], '{}')}{span(end.get('knee_range'), whole)}"
    )
    print(
        "(68 %: the middle 68 % of estimates from the rounds resampled; a figure is named only "
        "where that range spans at most one doubling)"
    )


def print_summary(end) -> None:
    s = end.summary
    print(end.message)
    rows = [
        ("status", end.status),
        ("optimizer steps", s.get("steps")),
        ("samples/s (median)", fmt(s.get("samples_per_sec"), whole)),
        ("step time (median)", fmt(s.get("step_time_s"), seconds)),
        ("peak memory", fmt(s.get("peak_memory_bytes"), "{:,} B") + f" ({s.get('memory_source')})"),
        ("final train loss", fmt(s.get("final_train_loss"), lambda v: fixed(v, 4))),
        ("test accuracy", fmt(s.get("test_accuracy"), lambda v: percent(v, 2))),
        ("device", s.get("device")),
    ]
    if s.get("frechet_distance") is not None:  # a GAN: its loss and accuracy are the discriminator's
        rows[5:7] = [
            ("discriminator loss", fmt(s.get("final_train_loss"), lambda v: fixed(v, 4))),
            ("discriminator right", fmt(s.get("test_accuracy"), lambda v: percent(v, 2))),
            (
                "Fréchet distance",
                f"{sig(s['frechet_distance'])} (real images "
                f"{fmt(s.get('frechet_reference'), lambda v: sig(v, 2))})",
            ),
        ]
    for name, value in rows:
        print(f"  {name:<20} {value}")


def fmt(value, pattern) -> str:
    if value is None:
        return "–"
    return pattern(value) if callable(pattern) else pattern.format(value)


def stream(
    events: Iterable[dict],
    as_json: bool,
    header: str,
    rows: dict[str, Callable],
    json_kinds: tuple[str, ...] | None = None,
    header_first: bool = True,
) -> None:
    """A measurement's records as they come: with --json one JSON object a line (only
    `json_kinds`, when given); else `header` (before the first record, or with it: a check
    that raises first prints none), then a line per record of a kind in `rows` (its
    function's text; None prints nothing) and any other record's message."""
    if header_first and not as_json:
        print(header, flush=True)
    for i, event in enumerate(events):
        if as_json:
            if json_kinds is None or event["kind"] in json_kinds:
                print(json.dumps(event), flush=True)
            continue
        if i == 0 and not header_first:
            print(header)
        line = rows[event["kind"]](event) if event["kind"] in rows else event.get("message")
        if line is not None:
            print(line, flush=True)


def single(record: dict, as_json: bool, lines: Callable[[dict], list[str]]) -> None:
    """A check's one record: as JSON, or its lines and, where its timing broke a bound, why it
    is too noisy to read."""
    if as_json:
        print(json.dumps(record))
        return
    for line in lines(record):
        print(line)
    if record.get("too_noisy"):
        print(f"too noisy to read: {record['too_noisy']}")
