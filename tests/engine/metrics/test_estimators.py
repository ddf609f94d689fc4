"""pass@k and pass^k: hand-computed values and properties."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_engine.metrics import (
    pass_at_k,
    pass_hat_k,
    pass_hat_k_plugin,
)


def test_pass_at_k_n20_c15_k5_equals_exact_fraction():
    expected = 1 - Fraction(math.comb(5, 5), math.comb(20, 5))  # = 15503/15504
    assert pass_at_k(20, 15, 5) == pytest.approx(float(expected), abs=1e-15)
    assert expected == Fraction(15503, 15504)


def test_pass_hat_k_n20_c15_k5_equals_exact_fraction():
    expected = Fraction(math.comb(15, 5), math.comb(20, 5))  # = 3003/15504
    assert expected == Fraction(1001, 5168)
    assert pass_hat_k(20, 15, 5) == pytest.approx(float(expected), abs=1e-15)


def test_pass_hat_k_plugin_n20_c15_k5_is_three_quarters_to_the_fifth():
    assert pass_hat_k_plugin(20, 15, 5) == pytest.approx(243 / 1024, abs=1e-15)


def test_pass_at_k_is_one_when_failures_fewer_than_k():
    assert pass_at_k(6, 4, 5) == 1.0
    assert pass_hat_k(6, 4, 5) == 0.0


def test_pass_at_k_is_nan_when_fewer_attempts_than_k():
    values = pass_at_k(np.array([3, 10]), np.array([1, 1]), 5)
    assert np.isnan(values[0])
    assert values[1] == pytest.approx(1 - math.comb(9, 5) / math.comb(10, 5))


def test_pass_at_k_large_n_stays_finite_and_exact():
    # C(2000, 1000) overflows a float; the product form does not.
    value = pass_hat_k(2000, 1990, 1000)
    expected = math.exp(math.lgamma(1991) - math.lgamma(991) - math.lgamma(2001) + math.lgamma(1001))
    assert value == pytest.approx(expected, rel=1e-9)


def test_pass_at_k_rejects_c_above_n():
    with pytest.raises(ValueError, match="exceeds"):
        pass_at_k(3, 4, 1)


def test_pass_at_k_rejects_non_positive_k():
    with pytest.raises(ValueError, match="positive integer"):
        pass_at_k(3, 1, 0)


counts = st.integers(min_value=1, max_value=40).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(min_value=0, max_value=n))
)


@settings(max_examples=200, deadline=None)
@given(counts)
def test_pass_at_k_monotone_in_k_and_within_unit_interval(nc):
    n, c = nc
    values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(b >= a - 1e-12 for a, b in zip(values, values[1:]))


@settings(max_examples=200, deadline=None)
@given(counts, st.integers(min_value=1, max_value=40))
def test_pass_hat_k_never_exceeds_pass_at_k(nc, k):
    n, c = nc
    k = min(k, n)
    assert pass_hat_k(n, c, k) <= pass_at_k(n, c, k) + 1e-12
    assert 0.0 <= pass_hat_k(n, c, k) <= 1.0


@settings(max_examples=200, deadline=None)
@given(counts)
def test_pass_hat_1_equals_pass_at_1_equals_rate(nc):
    n, c = nc
    assert pass_hat_k(n, c, 1) == pytest.approx(c / n, abs=1e-12)
    assert pass_at_k(n, c, 1) == pytest.approx(c / n, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(counts, st.integers(min_value=1, max_value=12))
def test_pass_hat_k_matches_exact_binomial_ratio(nc, k):
    n, c = nc
    k = min(k, n)
    exact = Fraction(math.comb(c, k), math.comb(n, k))
    assert pass_hat_k(n, c, k) == pytest.approx(float(exact), abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(
        float(1 - Fraction(math.comb(n - c, k), math.comb(n, k))), abs=1e-12
    )


def _peak_bytes(compute) -> tuple[object, int]:
    import tracemalloc

    tracemalloc.start()
    try:
        value = compute()
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("estimator", [pass_at_k, pass_hat_k])
def test_k_beyond_every_tasks_attempts_is_undefined_without_k_sized_work(estimator):
    # A stored N of 100,000 with two attempts a task (pass@N, pass^N): nothing to estimate, so the
    # running product over k steps is never built (it was a tasks x k array).
    n, c = np.array([2, 2, 2]), np.array([2, 1, 0])

    values, peak = _peak_bytes(lambda: estimator(n, c, 100_000))

    assert np.isnan(values).tolist() == [True, True, True]
    assert peak < 100_000  # bytes; tasks x k float64 would be 2,400,000
