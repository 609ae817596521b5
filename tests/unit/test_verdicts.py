"""Every sentence true to its numbers: the verdict functions that compose a page's words from a
record's numbers, property-tested over perturbed and edge-case records — ties, sign flips, a
value at chance, a measurement that got slower, a budget exceeded by one byte, a recommendation
that would be the worst — checking that each comparative word agrees with the numbers it
describes, and that a chart's title comes from the same reading as its text."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bsdemo.architectures import ACCURACY_TOLERANCE, FRECHET_TOLERANCE, analyse
from bsdemo.charts import fit_chart
from bsdemo.charts.parallel import pipeline_chart
from bsdemo.charts.profile import cut_chart
from bsdemo.recipes import lr_prediction, lr_verdict, norms_verdict, regimes_verdict
from bsdemo.recipes.chance import at_chance, chance_edge
from bsdemo.recipes.comparisons import against_reference, points
from bsdemo.recipes.fitbatch import budget_basis, fit_verdict, real_over
from bsdemo.recipes.parallel import pipeline_verdict
from bsdemo.recipes.profile import cut_effect, cut_title
from bsdemo.units import (
    MINUS,
    fixed,
    format_bytes,
    percent,
    read_number,
    setting,
    sig,
    signed,
    signed_percent,
)

FAST = settings(max_examples=150, deadline=None)
ACC = st.floats(0.0, 1.0, allow_nan=False)
# a hyphen used as a minus sign ("(-5.3", " -0.4"), or a signed zero anywhere
HYPHEN_MINUS = re.compile(r"(^|[\s(])-\d")
SIGNED_ZERO = re.compile(rf"[-{MINUS}]0(\.0+)?(?![.\d])")


def clean(text: str) -> None:
    """A page's text: a real minus sign, never a hyphen for one, never a signed zero."""
    assert not HYPHEN_MINUS.search(text), text
    assert not SIGNED_ZERO.search(text), text


# ----- one number format -----
@FAST
@given(st.floats(-1e12, 1e12, allow_nan=False))
@example(-0.0)
@example(-1e-9)
@example(999.96)
def test_numbers_have_a_real_minus_sign_and_no_signed_zero(x):
    for text in (sig(x), fixed(x), fixed(x, 3), signed(x)):
        clean(text)
        assert not text.startswith("-")
    if round(x, 1) > 0:
        assert signed(x).startswith("+")
    elif round(x, 1) < 0:
        assert signed(x).startswith(MINUS)


@FAST
@given(st.integers(0, 2**50))
@example(1000 * 1024)  # 1000 KiB: 0.977 MiB
@example(1035305)  # the "1011.04 KiB" seen
@example(1023 * 2**20 + 2**20 - 1)
def test_a_size_is_three_significant_figures_in_a_unit_that_keeps_it_under_1000(size):
    text = format_bytes(size)
    number, unit = text.rsplit(" ", 1)
    value = float(number.replace(",", ""))
    assert value < 1000 or unit == "TiB", text
    digits = number.replace(",", "").replace(".", "").lstrip("0")
    assert unit == "B" or len(digits) == 3 or value >= 1000, text  # 3 significant figures
    scale = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]
    assert abs(value * scale - size) <= 0.005 * size + 0.5, text  # the same size, rounded


@FAST
@given(st.floats(-1e9, 1e9, allow_nan=False).filter(lambda x: abs(x) > 1e-300), st.integers(2, 4))
@example(7.4512e-9, 3)  # the accumulation check's "7.45e-09"
@example(9.996e-9, 3)  # rounds up into the next power
@example(-0.000999951, 3)
@example(1.5e-300, 3)
def test_a_number_is_its_significant_figures_without_e_notation(x, digits):
    text = sig(x, digits)
    clean(text)
    assert "e" not in text and not text.startswith("-"), text
    # the same number, to within half its last figure
    assert abs(read_number(text) - x) <= abs(x) * 0.5 * 10.0 ** (1 - digits) * 1.0001, text
    for typed in (setting(abs(x)), setting(abs(x), digits)):
        assert "e" not in typed, typed
        assert abs(read_number(typed) - abs(x)) <= abs(x) * 10.0 ** (1 - digits), typed


@FAST
@given(st.floats(-2.0, 2.0, allow_nan=False), st.integers(0, 2))
@example(-0.0004, 1)
def test_a_share_is_a_percentage_with_a_real_minus_sign(share, decimals):
    for text in (percent(share, decimals), signed_percent(share, decimals)):
        clean(text)
        assert text.endswith("%"), text
        assert (
            abs(float(text[:-1].replace(",", "").replace(MINUS, "-")) - 100 * share)
            <= 0.5 * 10.0**-decimals + 1e-9
        ), text


# every text a page, the CLI or a message writes: numbers through bsdemo.units, never a raw
# format spec that can write "-0.0", "-5.3", "7.45e-09" or "578.00 KiB" (whole numbers and
# integers, ".0f", ",", "d", "x", and widths, stay allowed)
RAW_SPEC = re.compile(r"\.[1-9]|[eEgG%]|\+|(?<![.\d])[fF]")
SOURCES = [*Path("bsdemo").rglob("*.py"), *Path("pages").glob("*.py"), Path("app.py")]


# a str.format template's field ("{:.3g} s"; a spec has no spaces or quotes, which tells it
# from a JavaScript object in a page's script)
TEMPLATE = re.compile(r"(?<!%)\{\w*:([^{}\s\"']+)\}")
# a Plotly hover template's field ("%{x:.2f}") is d3-format's, in the browser: fixed decimals
# (d3 writes a real minus) are allowed, never "g" or "e", which write "1.2e-8"
HOVER_E = re.compile(r"%\{\w+:[^}]*[eEgG]\}")


def _specs(path: Path):
    """Each format spec in a file: an f-string's, and a string constant's str.format fields."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            yield (
                node.lineno,
                "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.format_spec.values),
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for m in TEMPLATE.finditer(node.value):
                yield node.lineno, m.group(1)


def test_no_text_formats_a_number_but_through_the_units_module():
    raw = [
        f"{path}:{line}: {{…:{spec}}}"
        for path in SOURCES
        if path.name != "units.py"
        for line, spec in _specs(path)
        if RAW_SPEC.search(spec.lstrip("<>^=0123456789,"))
        and "machine-read" not in path.read_text(encoding="utf-8").splitlines()[line - 1]
    ]
    raw += [
        f"{path}: {m.group(0)}"
        for path in SOURCES
        for m in HOVER_E.finditer(path.read_text(encoding="utf-8"))
    ]
    templates = [
        f"{path}: {m.group(0)}"
        for path in Path("bsdemo").rglob("*.toml")
        for m in re.finditer(r"\{\w+:([^{}]+)\}", path.read_text(encoding="utf-8"))
        if RAW_SPEC.search(m.group(1).lstrip("<>^=0123456789,"))
    ]
    assert not raw + templates, "\n".join(raw + templates)


def test_the_format_check_finds_a_raw_spec(tmp_path):
    """The check above can fail: each kind of raw spec it must catch, caught."""
    caught = [
        spec
        for spec in (".3g", ".2f", ".1%", "+.1f", ">8.2f", "g", ".2e", ",.1f")
        if RAW_SPEC.search(spec.lstrip("<>^=0123456789,"))
    ]
    assert len(caught) == 8
    assert not any(
        RAW_SPEC.search(s.lstrip("<>^=0123456789,")) for s in (".0f", ",", ">12", "03d", "02x", ",.0f")
    )
    # and it reads str.format templates in string constants, not only f-strings
    path = tmp_path / "templates.py"
    path.write_text('x = fmt(v, "{:.3g} s")\ny = f"{v:.2f}"\nz = "{}: {name}"\n')
    assert sorted(spec for _, spec in _specs(path)) == [".2f", ".3g"]
    assert HOVER_E.search('hovertemplate="%{x:.3g}"') and not HOVER_E.search('"%{x:.2f} ms"')


# ----- learning-rate scaling: "beat", "within a point", "short" -----
@FAST
@given(ACC, ACC)
@example(0.97, 0.982)  # the case seen: 1.2 points better was called "within a point"
@example(0.97, 0.96)  # exactly a point
@example(0.5, 0.5)
def test_a_rule_against_the_reference_is_worded_as_its_rounded_difference(ref, acc):
    words = against_reference("the linear rule", acc, ref)
    d = points(acc, ref)
    assert d == round((acc - ref) * 100, 1)
    clean(words)
    if "beat" in words:
        assert d > 1 and f"by {fixed(d)} points" in words
    elif "within a point" in words:
        assert -1 <= d <= 1 and f"({signed(d)} points)" in words
    else:
        assert "short" in words and d < -1 and f"fell {fixed(-d)} points" in words


def _lr_row(run, acc, batch, status="completed"):
    return {
        "run": run,
        "test accuracy": acc if status == "completed" else None,
        "status": status,
        "note": "",
        "batch": batch,
        "weight updates": 100,
        "wall time (s)": 1.0,
        "first loss": 2.3,
        "peak loss": 2.3,
    }


@FAST
@given(ACC, ACC, ACC, ACC, ACC, st.sampled_from(["completed", "diverged"]))
def test_the_lr_page_says_what_its_accuracies_show(ref, same, linear, root, warm, status):
    rows = [
        _lr_row("ref", ref, 16),
        _lr_row("same", same, 128, status),
        _lr_row("linear", linear, 128),
        _lr_row("sqrt", root, 128),
        _lr_row("warm", warm, 128),
    ]
    text = lr_verdict(rows)
    clean(text)
    for name, acc in (("the linear rule", linear), ("the square-root rule", root)):
        assert against_reference(name, acc, ref)[1:] in text  # its own, exact words
    index, numbers = lr_prediction(rows)
    d = points(same if status == "completed" else 0.0, ref)
    assert f"({signed(d)} points)" in numbers
    assert index == (1 if d < -1 else 2 if d > 1 else 0)  # the answer follows the number shown


# ----- fitting a bigger batch: "fits" by what -----
def _fit(technique, batch, real=None, k=1):
    return {
        "technique": technique,
        "max_batch_size": batch,
        "effective_batch_size": batch * k,
        "accumulation_steps": k,
        "samples_per_sec": 1000.0,
        "bytes_per_sample": 1000.0,
        "fixed_bytes": 10_000,
        "peak_memory_bytes": 1_000_000,
        "loss_after": 2.0,
        "loss_vs_fp32": 0.0,
        "budget_steps": 20,
        "budget_batch": 32,
        **({"real_peak_bytes": real, "real_batch": 2000} if real is not None else {}),
    }


@FAST
@given(st.integers(1_000_000, 10_000_000), st.integers(-3, 3), st.integers(-3, 3), st.booleans())
def test_a_budget_is_said_to_be_run_over_exactly_when_a_real_peak_is_over_it(budget, a, b, real):
    """Real peaks a byte over, at, or a byte under the budget (and far either side)."""
    peaks = [budget + a, budget + 1000 * b]
    rows = [
        _fit("fp32", 2000, peaks[0] if real else None),
        _fit("accumulation", 2000, peaks[1] if real else None, k=4),
    ]
    basis = budget_basis(rows, budget)
    subtitle = fit_chart(rows, budget).figure.layout.title.subtitle.text
    text = fit_verdict(rows, budget, "cpu")
    over = [p for p in peaks if p > budget] if real else []
    assert len(real_over(rows, budget)) == len(over)
    assert ("real peaks over it" in basis) == bool(over)
    assert ("real peaks over it" in subtitle) == bool(over)  # the chart reads it as the text
    assert ("ran over it" in text) == bool(over)
    if real:
        assert "by the accounting" in subtitle
    clean(text)


# ----- the pipeline: the chart holds the times its text quotes -----
@FAST
@given(st.floats(1e-4, 0.5), st.floats(1e-4, 0.5), st.floats(1e-4, 0.5), st.booleans())
def test_every_step_time_the_pipeline_text_quotes_is_drawn_on_its_chart(step, single, sched, noisy):
    r = {
        "stage_parameter_bytes": [100, 100],
        "stage_activation_bytes": [50, 50],
        "single_parameter_bytes": 200,
        "single_activation_bytes": 100,
        "equivalent": True,
        "max_abs_param_diff": 1e-9,
        "transfer_bytes": 32768,
        "transfer_s": 5e-5,
        "micro_batches": 4,
        "bubble": 0.29,
        "ideal_bubble": 0.2,
        "step_s": step,
        "single_process_step_s": single,
        "schedule_step_s": sched,
        "schedule": [{"stage": 0, "pass": "forward", "micro_batch": 0, "start": 0.0, "end": sched}],
        "too_noisy": "a speed-up of 7.4x from 2 processes" if noisy else None,
    }
    text = pipeline_verdict(r)
    chart = pipeline_chart(r).figure
    drawn = {
        f"{(base or 0) + x:.1f}"
        for trace in chart.data
        for x, base in zip(trace.x, trace.base or [0] * len(trace.x), strict=True)
    }
    for quoted in re.findall(r"(\d+\.\d) ms", text.split("Sending")[-1]):
        assert quoted in drawn, (quoted, drawn, text)
    clean(text)


# ----- choosing a batch size: a range is never read from the worst runs -----
QUALITY = st.floats(0.05, 1.0)


@FAST
@given(
    st.lists(st.tuples(QUALITY, QUALITY, st.floats(10, 10_000)), min_size=2, max_size=6),
    st.sampled_from(["cnn", "gan"]),
)
def test_a_measured_range_never_holds_a_run_worse_than_one_it_leaves_out(runs, arch):
    """Runs with their own starts (a run can learn from a worse start and end worse than one
    that 'did not learn'): every batch in the range is at least as good, within the
    tolerance, as the best run that completed."""
    batches = [2 ** (3 + 2 * i) for i in range(len(runs))]
    gan = arch == "gan"
    points_ = [
        {
            "architecture": arch,
            "batch_size": b,
            "status": "completed",
            "steps": 100,
            "samples_per_sec": speed,
            "peak_memory_bytes": 1000 + b,
            "quality": 100 * end if gan else end,
            "initial_quality": 100 * start if gan else start,
            "frechet_reference": 1.0,
        }
        for b, (start, end, speed) in zip(batches, runs, strict=True)
    ]
    s = analyse(arch, points_)
    if not s.get("range"):
        return
    lo, hi = s["range"]
    quality = {p["batch_size"]: p["quality"] for p in points_}
    inside = [b for b in batches if lo <= b <= hi and b in s["good_batches"]]
    assert inside
    best = min(quality.values()) if gan else max(quality.values())
    for b in (lo, hi):
        if gan:
            assert quality[b] <= best * (1 + FRECHET_TOLERANCE) + 1e-9, (b, quality)
        else:
            assert quality[b] >= best - ACCURACY_TOLERANCE - 1e-9, (b, quality)


# ----- throughput: a chart is titled "cutting" only where it cut -----
@FAST
@given(st.floats(0.3, 3.0), st.floats(0.3, 3.0))
@example(0.81, 0.81)  # the case seen: torch.compile made the steps slower
@example(1.05, 1.051)
def test_the_overhead_cut_chart_is_titled_by_its_own_speed_ups(small, large):
    cuts = [
        {
            "kind": "cut_point",
            "batch_size": b,
            "technique": "compile",
            "status": "ok",
            "speedup": x,
            "prepare_s": 1.0,
            "eager_samples_per_sec": 1000.0,
            "cut_samples_per_sec": 1000.0 * x,
        }
        for b, x in ((8, small), (512, large))
    ]
    title = cut_chart(cuts).figure.layout.title.text
    assert title == cut_title(cuts)
    effects = {cut_effect(small), cut_effect(large)}
    shown = [round(x, 2) for x in (small, large)]
    if "Cutting" in title or "faster" in title.split(":")[0]:
        assert effects == {"faster"} and min(shown) > 1.05, (title, shown)
    if "slower" in title and "not at others" not in title:
        assert effects == {"slower"} and max(shown) < 0.95, (title, shown)
    if "about the same" in title:
        assert all(0.95 <= x <= 1.05 for x in shown), (title, shown)


# ----- normalisation: a per-sample norm's fall is said, and why -----
@FAST
@given(st.lists(ACC, min_size=3, max_size=3), st.lists(ACC, min_size=3, max_size=3))
def test_a_per_sample_normalisation_that_lost_accuracy_with_the_batch_is_said_to_have(bn, gn):
    cells = [
        {
            "norm": norm,
            "batch_size": b,
            "status": "completed",
            "test_accuracy": acc,
            "train_mode_test_accuracy": acc,
            "partner_changed": 0.1 if norm == "batch" else 0,
        }
        for norm, accs in (("batch", bn), ("group", gn))
        for b, acc in zip((2, 32, 512), accs, strict=True)
    ]
    text = norms_verdict(cells)
    fell = 100 * (max(gn) - gn[2]) > 5 and gn[2] != max(gn)
    assert ("GroupNorm" in text.split("fell too:")[-1]) == fell if fell else "fell too" not in text
    clean(text)


# ----- chance: an accuracy at chance is said to be -----
@FAST
@given(ACC, st.floats(0.05, 0.6), st.integers(20, 20_000))
def test_chance_is_the_commonest_class_plus_its_noise(acc, chance, labels):
    s = {"chance_accuracy": chance, "test_labels": labels}
    assert at_chance(acc, s) == (acc <= chance_edge(chance, labels))
    assert at_chance(chance, s) and not at_chance(None, s) and not at_chance(acc, {})


def test_a_regime_that_ended_at_chance_is_said_to_have_wherever_its_accuracy_is_shown():
    """The case seen: the full batch at 11.7 % on the digits (chance 10.3 % over 359 labels)."""
    from bsdemo.charts.tables import comparison_table
    from bsdemo.runs import JobSnapshot

    def snap(i, batch, acc, lr=0.05):
        return JobSnapshot(
            id=i,
            owner="o",
            status="completed",
            steps={},
            evals={},
            config={"batch_size": batch, "lr": lr, "accumulation_steps": 1, "epochs": 5},
            end={
                "summary": {
                    "steps": 5,
                    "test_accuracy": acc,
                    "wall_time_s": 0.5,
                    "chance_accuracy": 0.103,
                    "test_labels": 359,
                }
            },
        )

    rows = comparison_table(
        [
            ("SGD (batch 1)", snap(1, 1, 0.95)),
            ("full batch (1438)", snap(2, 1438, 0.117)),
            ("mini-batch (32)", snap(3, 32, 0.96)),
        ]
    )
    assert [r["note"] for r in rows] == ["", "at chance", ""]
    text = regimes_verdict(rows)
    assert (
        "full batch (1438) ended at chance (11.7%, where always answering the commonest "
        "class scores 10.3%)" in text
    )
    clean(text)
    # the lr grid: a cell at chance says so beside its number; one above chance does not
    from bsdemo.charts import lr_grid_chart
    from bsdemo.recipes import grid_cells

    cells = grid_cells([("a", snap(4, 8, 0.117, lr=1.0)), ("b", snap(5, 8, 0.95))])
    assert [c["at_chance"] for c in cells] == [True, False]
    texts = [t for row in lr_grid_chart(cells).figure.data[0].text for t in row]
    assert any("12%<br>chance" in t for t in texts), texts
    assert any(t.endswith("95%") for t in texts), texts


# ----- gradient noise: "fell as 1/B", "rose", "within … of each other" -----
@FAST
@given(
    st.floats(-2.0, 1.0),
    st.floats(-1.0, 1.0),
    st.floats(-1.0, 1.0),
    st.floats(1.0, 5000.0),
    st.floats(-500.0, 5000.0),
)
@example(-1.104, 0.2, 0.9, 100.0, 125.4)  # the slope and the agreement on their edges
@example(0.05, 0.5, 0.5, 100.0, 100.0)  # a variance that rose; a cosine that stayed
def test_the_noise_text_says_what_its_slope_cosines_and_estimates_show(slope, cos0, cos1, direct, two):
    from bsdemo.recipes import noise_verdict
    from bsdemo.recipes.noise import AGREE, SLOPE_TOLERANCE

    text = noise_verdict(
        {
            "variance_slope": slope,
            "batch_sizes": [1, 4, 16, 64, 256],
            "train_samples": 1437,
            "b_simple": direct,
            "b_simple_two_batch": two,
            "b_simple_range": [direct / 2, direct * 2],
            "b_simple_two_batch_range": [1.0, 2.0],
            "two_batch_sizes": [1, 256],
            "draws": 32,
            "cosines": [cos0, 0.5, cos1],
        }
    )
    clean(text)
    shown = round(slope, 2)
    assert ("fell as 1/B" in text) == (abs(shown + 1) <= SLOPE_TOLERANCE + 1e-9), text
    assert "variance fell" not in text or shown < 0, text
    assert "variance rose" not in text or shown > 0, text
    a, b = round(cos0, 2), round(cos1, 2)
    assert ("cosine to the full gradient rose" in text) == (b > a), text
    assert ("cosine to the full gradient fell" in text) == (b < a), text
    if two > 0:
        apart = round(abs(two - direct) / direct, 2)
        assert ("of each other" in text) == (apart <= AGREE + 1e-9), text
        assert f"within {percent(apart, 0)}" in text or f"{percent(apart, 0)} apart" in text


# ----- the Lab: "better", "about the same", "fewer updates … learn less" -----
@FAST
@given(ACC, ACC, st.sampled_from([(32, 256), (256, 32), (8, 1024)]))
@example(0.764, 0.744, (32, 256))  # 2.0 points: "within 2 points", never "fewer … learn less"
def test_the_lab_compares_two_batches_by_the_accuracies_it_shows(small_acc, large_acc, batches):
    from bsdemo.recipes import lab_verdict
    from bsdemo.runs import JobSnapshot

    def snap(i, batch, acc):
        return JobSnapshot(
            id=i,
            owner="o",
            status="completed",
            steps={},
            evals={},
            config={"batch_size": batch, "lr": 0.05, "accumulation_steps": 1, "epochs": 10, "model": "mlp"},
            end={
                "summary": {
                    "steps": 10 * -(-1437 // batch),
                    "epochs": 10,
                    "test_accuracy": acc,
                    "wall_time_s": 1.0,
                    "chance_accuracy": 0.103,
                    "test_labels": 360,
                }
            },
        )

    (b0, b1) = batches
    runs = [
        snap(1, b0, small_acc if b0 < b1 else large_acc),
        snap(2, b1, large_acc if b0 < b1 else small_acc),
    ]
    text = lab_verdict(runs)
    clean(text)
    gap = round(round(small_acc * 100, 1) - round(large_acc * 100, 1), 1)
    assert ("learn less per epoch" in text) == (gap > 2), text
    assert ("reached a better test accuracy" in text) == (gap < -2), text
    assert ("about the same test accuracy" in text) == (-2 <= gap <= 2), text
    assert f"test accuracy {percent(small_acc)} → {percent(large_acc)}" in text, text


# ----- accumulation: "slower", "about as fast", "no more efficient" -----
@FAST
@given(st.floats(10.0, 1e6), st.floats(0.05, 5.0))
@example(1000.0, 0.8996)  # shown as 0.90: on the band's edge
@example(1000.0, 1.1)
def test_accumulation_says_faster_or_slower_as_its_own_samples_per_second_show(big, ratio):
    from bsdemo.recipes import accumulation_why
    from bsdemo.recipes.measurements import SAME_SPEED

    text = accumulation_why(
        {
            "accumulation_steps": 4,
            "micro_batch": 32,
            "effective_batch_size": 128,
            "unscaled_loss": False,
            "norm": "none",
            "variable_length": False,
            "big_samples_per_sec": big,
            "accumulated_samples_per_sec": big * ratio,
        }
    )
    clean(text)
    shown = round(ratio, 2)
    assert f"{fixed(ratio, 2)}×" in text, text
    assert ("used the device less well" in text) == (shown < 1 - SAME_SPEED - 1e-9), text
    assert ("was no more efficient" in text) == (shown > 1 + SAME_SPEED + 1e-9), text
    assert ("about as fast" in text) == (1 - SAME_SPEED - 1e-9 <= shown <= 1 + SAME_SPEED + 1e-9)


# ----- sharpness: "found the sharper minimum", "the opposite", "about as sharp" -----
@FAST
@given(st.floats(0.01, 1000.0), st.floats(0.01, 1000.0))
def test_the_sharper_minimum_is_the_one_whose_eigenvalue_is_larger(small, large):
    from bsdemo.recipes.sharpness import SHARPER, _sharp_lead

    text = _sharp_lead(
        {"top_hessian_eigenvalue": small}, {"top_hessian_eigenvalue": large}, "batch 16", "the full batch"
    )
    clean(text)
    if large >= SHARPER * small:
        assert text.startswith("The full batch found the sharper minimum:"), text
    elif small >= SHARPER * large:
        assert text.startswith("Batch 16 found the sharper minimum, the opposite"), text
    else:
        assert "about as sharp" in text and "×" not in text, text
    if "×" in text:  # the ratio it shows is at least the threshold it was judged by
        assert float(text.rsplit("(", 1)[1].split("×")[0].replace(",", "")) >= round(SHARPER, 1), text


# ----- the critical batch: "perfect scaling", "near-perfect", "diminishing", "no gain" -----
@FAST
@given(st.lists(st.integers(1, 50_000), min_size=2, max_size=6))
@example([2685, 671])  # 4× the batch, 4.0× fewer steps: perfect, as the figures show
@example([100, 26])  # 3.8× fewer for 4×: near-perfect
def test_each_step_between_batches_is_named_by_the_figures_it_shows(steps):
    from bsdemo.recipes import critical_verdict
    from bsdemo.recipes.noise import FLAT, PERFECT

    sizes = [4**i for i in range(len(steps))]
    text = critical_verdict(
        {
            "batch_sizes": sizes,
            "steps": steps,
            "statuses": ["completed"] * len(steps),
            "lrs": [0.1] * len(steps),
            "lr_cap": 0.8,
            "target_loss": 0.1,
            "rule": "sqrt",
            "reference_batch": 32,
            "reference_lr": 0.2,
            "s_min": min(steps),
            "b_crit": None,
            "b_simple": 80.0,
        }
    )
    clean(text)
    line = re.split(r"\.(?:\s|$)", text.split("Batch by batch — ")[1])[0]
    for piece in line.split("; "):
        m = re.match(r"[\d,]+→[\d,]+: (\S+)× the batch, (\S+)× (fewer|more) steps \((.+)\)$", piece)
        assert m, piece
        grow, fall = read_number(m.group(1)), read_number(m.group(2))
        if m.group(3) == "more":
            assert m.group(4) == "no gain", piece
            continue
        assert m.group(4) == (
            "perfect scaling or better"
            if fall >= grow
            else "near-perfect scaling"
            if fall >= PERFECT * grow
            else "no gain"
            if fall < FLAT
            else "diminishing returns"
        ), piece
