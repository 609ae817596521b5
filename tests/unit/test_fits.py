"""The fitted models t(B) = t0 + t1·B and M(B) = M0 + m·B, and the throughput knee."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdemo.fits import crossover_batch, knee_batch, linear_fit, step_time_fit, step_time_reading
from bsdemo.timing import disagreement, interval, round_order, spread


def test_exact_line_is_recovered_with_r2_one():
    fit = linear_fit([1, 2, 4, 8], [3 + 2 * b for b in (1, 2, 4, 8)])
    assert fit.intercept == pytest.approx(3) and fit.slope == pytest.approx(2)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.predict(16) == pytest.approx(35)
    assert fit.solve(35) == pytest.approx(16)


def test_too_few_points_give_no_fit():
    assert linear_fit([4], [1.0]) is None
    assert linear_fit([4, 4], [1.0, 2.0]) is None
    with pytest.raises(ValueError):
        linear_fit([1, 2], [1.0])


def test_noise_lowers_r2():
    fit = linear_fit([1, 2, 3, 4, 5], [1.0, 5.0, 2.0, 6.0, 3.0])
    assert 0 <= fit.r2 < 0.5


def test_crossover_is_t0_over_t1():
    fit = linear_fit([1, 64, 256], [0.001 + 1e-5 * b for b in (1, 64, 256)])
    assert crossover_batch(fit) == pytest.approx(100)
    assert crossover_batch(linear_fit([1, 2], [2.0, 1.0])) is None


def test_knee_is_the_smallest_batch_within_ten_percent_of_the_best():
    sizes = [1, 2, 4, 8, 16, 32]
    rates = [100, 190, 350, 600, 950, 1000]
    assert knee_batch(sizes, rates) == 16
    assert knee_batch(sizes, rates, within=0.5) == 8
    assert knee_batch([], []) is None


@given(
    st.floats(-1e3, 1e3),
    st.floats(-1e3, 1e3),
    st.lists(st.integers(1, 10_000), min_size=2, max_size=12, unique=True),
)
def test_fit_recovers_any_line(intercept, slope, xs):
    fit = linear_fit(xs, [intercept + slope * x for x in xs])
    assert fit.slope == pytest.approx(slope, abs=1e-6 * (1 + abs(slope)) + 1e-9)
    assert fit.predict(xs[0]) == pytest.approx(intercept + slope * xs[0], rel=1e-6, abs=1e-6)


def test_a_negative_intercept_is_held_at_zero():
    xs, ys = [1, 2, 4, 8], [0.9, 2.0, 4.1, 7.9]  # least squares would put t0 below 0
    assert linear_fit(xs, ys).intercept < 0
    fit = step_time_fit(xs, ys)
    assert fit.intercept == 0.0 and fit.constrained and 0.9 < fit.slope < 1.1
    assert not step_time_fit([1, 2, 4], [1.1, 1.2, 1.4]).constrained


def test_the_step_fit_honours_the_small_batches_and_shrugs_off_a_burst():
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    times = [0.2e-3 + 10e-6 * b for b in sizes]
    times[-2] *= 1.8  # one point taken during a burst of load
    fit = step_time_fit(sizes, times)
    # the batch-1 step decides t0: least squares on the raw times is pulled by the burst
    assert fit.intercept == pytest.approx(0.2e-3, rel=0.05)
    assert fit.slope == pytest.approx(10e-6, rel=0.05)
    plain = linear_fit(sizes, times)
    assert abs(plain.slope - 10e-6) > abs(fit.slope - 10e-6)
    assert fit.intercept + fit.slope <= times[0] * 1.05  # never above the batch-1 step itself


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4096), st.floats(1e-5, 10.0)),
        min_size=2,
        max_size=12,
        unique_by=lambda p: p[0],
    )
)
def test_the_fitted_line_never_sits_above_or_below_every_point(pairs):
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    fit = step_time_fit(xs, ys)
    assert fit.intercept >= 0 and fit.slope >= 0
    residuals = [y - fit.predict(x) for x, y in zip(xs, ys, strict=True)]
    scale = 1e-9 * max(ys)
    assert any(r >= -scale for r in residuals) and any(r <= scale for r in residuals)


def test_knee_and_crossover_are_named_only_when_the_rounds_agree():
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    steady = {b: [(0.2e-3 + 10e-6 * b) * f for f in (0.99, 1.0, 1.01)] for b in sizes}
    reading = step_time_reading(steady)
    assert reading.knee is not None and reading.crossover == pytest.approx(20, rel=0.1)
    lo, hi = reading.knee_range
    assert hi <= 2 * lo and lo <= reading.knee <= hi
    # a flat curve whose rounds disagree by ±40 %: no knee can be read from it
    noisy = {b: [1e-3 * b * f for f in (0.6, 1.0, 1.4)] for b in sizes}
    noisy_reading = step_time_reading(noisy)
    assert noisy_reading.knee is None and noisy_reading.knee_range is not None
    assert noisy_reading.knee_range[1] > 2 * noisy_reading.knee_range[0]


def test_spread_rates_and_intervals():
    s = spread([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.median, s.q1, s.q3, s.n) == (3.0, 2.0, 4.0, 5)
    rate = s.per(12.0)  # samples/s from seconds per step: the quartiles swap
    assert (rate.median, rate.q1, rate.q3) == (4.0, 3.0, 6.0)
    assert spread([2.0]).relative_iqr == 0.0
    assert interval([]) is None and interval(list(range(101))) == (16, 84)
    assert round_order(range(10), 1, 0) == round_order(range(10), 1, 0)
    assert round_order(range(10), 1, 0) != round_order(range(10), 2, 0)
    assert sorted(round_order(range(10), 3, 7)) == list(range(10))
    assert disagreement([1.0, 1.1, 0.9]) == pytest.approx(0.2) and disagreement([1.0]) > 1
