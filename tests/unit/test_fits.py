"""The fitted models t(B) = t0 + t1·B and M(B) = M0 + m·B, and the throughput knee."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsdemo.fits import crossover_batch, knee_batch, linear_fit


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


@given(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3),
       st.lists(st.integers(1, 10_000), min_size=2, max_size=12, unique=True))
def test_fit_recovers_any_line(intercept, slope, xs):
    fit = linear_fit(xs, [intercept + slope * x for x in xs])
    assert fit.slope == pytest.approx(slope, abs=1e-6 * (1 + abs(slope)) + 1e-9)
    assert fit.predict(xs[0]) == pytest.approx(intercept + slope * xs[0], rel=1e-6, abs=1e-6)


def test_a_negative_intercept_is_held_at_zero():
    from bsdemo.fits import nonnegative_fit

    xs, ys = [1, 2, 4, 8], [0.5, 2.0, 4.1, 7.9]  # least squares would put t0 below 0
    assert linear_fit(xs, ys).intercept < 0
    fit = nonnegative_fit(xs, ys)
    assert fit.intercept == 0.0 and fit.constrained and 0.9 < fit.slope < 1.1
    assert not nonnegative_fit([1, 2, 4], [1.1, 1.2, 1.4]).constrained
