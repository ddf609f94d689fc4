"""pass@k, pass^k and the Beta posteriors: hand-computed values and properties."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_engine.metrics import (
    beta_cdf,
    in_learning_zone,
    pass_at_k,
    pass_hat_k,
    pass_hat_k_plugin,
    prob_a_beats_b,
    prob_between,
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


def test_prob_between_beta_2_2_matches_hand_computed_cdf():
    # n=2, c=1 -> Beta(2, 2), CDF 3x^2 - 2x^3: F(1/16) = 46/4096, F(15/16) = 4050/4096.
    assert prob_between(2, 1, 1 / 16, 15 / 16) == pytest.approx(4004 / 4096, abs=1e-14)
    assert in_learning_zone(2, 1) is True


def test_prob_between_no_attempts_is_uniform_width():
    assert prob_between(0, 0, 1 / 16, 15 / 16) == pytest.approx(14 / 16, abs=1e-14)
    assert in_learning_zone(0, 0) is False


def test_prob_between_all_passed_beta_5_1_is_power_difference():
    assert prob_between(4, 4, 1 / 16, 15 / 16) == pytest.approx((15 / 16) ** 5 - (1 / 16) ** 5, abs=1e-14)
    assert in_learning_zone(4, 4) is False


def test_prob_between_jeffreys_prior_matches_tb_agg_goldilocks_column():
    # tb agg printed P(GZ|Data) = 0.98 for 4 passes in 6 runs: the Jeffreys prior, Beta(4.5, 2.5).
    assert round(prob_between(6, 4, 1 / 16, 15 / 16, prior=0.5), 2) == 0.98
    assert round(prob_between(6, 4, 1 / 16, 15 / 16), 4) == 0.9929  # SPEC's uniform prior


@settings(max_examples=100, deadline=None)
@given(
    st.floats(min_value=0.001, max_value=0.999),
    st.floats(min_value=0.3, max_value=60),
    st.floats(min_value=0.3, max_value=60),
)
def test_beta_cdf_matches_scipy(x, a, b):
    special = pytest.importorskip("scipy.special")
    assert beta_cdf(x, a, b) == pytest.approx(float(special.betainc(a, b, x)), abs=1e-10)


@settings(max_examples=100, deadline=None)
@given(counts, st.floats(min_value=0.0, max_value=1.0))
def test_beta_cdf_integer_params_matches_continued_fraction(nc, x):
    n, c = nc
    a, b = 1 + c, 1 + n - c
    # A hair off integer forces the continued-fraction branch.
    assert beta_cdf(x, a, b) == pytest.approx(beta_cdf(x, a + 1e-12, b + 1e-12), abs=1e-9)


def test_prob_a_beats_b_hand_computed_two_thirds():
    # A: 1 pass of 1 -> Beta(2, 1), density 2x; B: no attempts -> uniform. P = int 2x * x dx = 2/3.
    assert prob_a_beats_b(1, 1, 0, 0) == pytest.approx(2 / 3, abs=1e-14)


@settings(max_examples=100, deadline=None)
@given(counts, counts)
def test_prob_a_beats_b_complements_and_matches_numerical_integral(a, b):
    (n_a, c_a), (n_b, c_b) = a, b
    forward = prob_a_beats_b(n_a, c_a, n_b, c_b)
    backward = prob_a_beats_b(n_b, c_b, n_a, c_a)
    assert forward + backward == pytest.approx(1.0, abs=1e-9)
    # Midpoint rule of P(X > Y) = int f_A(x) F_B(x) dx.
    grid = (np.arange(4000) + 0.5) / 4000
    log_norm = math.lgamma(n_a + 2) - math.lgamma(c_a + 1) - math.lgamma(n_a - c_a + 1)
    density = np.exp(log_norm + c_a * np.log(grid) + (n_a - c_a) * np.log1p(-grid))
    cdf_b = np.array([beta_cdf(x, 1 + c_b, 1 + n_b - c_b) for x in grid])
    assert forward == pytest.approx(float(np.mean(density * cdf_b)), abs=2e-3)


def test_prob_a_beats_b_equal_evidence_is_one_half():
    assert prob_a_beats_b(10, 3, 10, 3) == pytest.approx(0.5, abs=1e-12)
