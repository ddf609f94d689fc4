"""The Beta posteriors: CDF and quantile against closed forms, the learning zone, P(A beats B)."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_engine.metrics import beta_cdf, in_learning_zone, prob_a_beats_b, prob_between
from tb_engine.metrics.posterior import beta_interval_mass, beta_quantile

counts = st.integers(min_value=0, max_value=40).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(min_value=0, max_value=n))
)


def binomial_tail(x: Fraction, a: int, b: int) -> Fraction:
    """I_x(a, b) for integer a, b as the exact tail P(Binomial(a + b - 1, x) >= a)."""
    m = a + b - 1
    return sum((math.comb(m, j) * x**j * (1 - x) ** (m - j) for j in range(a, m + 1)), Fraction(0))


@settings(max_examples=100, deadline=None)
@given(counts, st.integers(min_value=0, max_value=1000))
def test_beta_cdf_integer_parameters_equals_the_binomial_tail(nc, thousandths):
    n, c = nc
    x = Fraction(thousandths, 1000)
    assert beta_cdf(float(x), 1 + c, 1 + n - c) == pytest.approx(
        float(binomial_tail(x, 1 + c, 1 + n - c)), abs=1e-12
    )


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0.0, max_value=1.0), st.floats(min_value=0.05, max_value=60))
def test_beta_cdf_non_integer_parameters_match_closed_forms(x, a):
    # Beta(a, 1) has CDF x^a; Beta(1/2, 1/2) is the arcsine law, CDF (2/pi) asin(sqrt(x)).
    assert beta_cdf(x, a, 1.0) == pytest.approx(x**a, abs=1e-12)
    assert beta_cdf(x, 0.5, 0.5) == pytest.approx(2 / math.pi * math.asin(math.sqrt(x)), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0.0, max_value=1.0))
def test_beta_quantile_matches_closed_forms(q):
    assert beta_quantile(q, 0.5, 0.5) == pytest.approx(math.sin(math.pi * q / 2) ** 2, abs=1e-12)
    assert beta_quantile(q, 3.0, 1.0) == pytest.approx(q ** (1 / 3), abs=1e-12)


def test_beta_quantile_inverts_beta_cdf():
    for a, b, q in [(4.5, 2.5, 0.025), (0.5, 10.5, 0.5), (30.5, 0.5, 0.975)]:
        assert round(beta_cdf(beta_quantile(q, a, b), a, b), 9) == q


def test_beta_functions_reject_parameters_that_are_not_positive():
    with pytest.raises(ValueError) as caught:
        beta_cdf(0.5, 0.0, 1.0)
    assert str(caught.value) == "Beta parameters must be > 0, got a=0.0, b=1.0"
    with pytest.raises(ValueError) as level:
        beta_quantile(1.5, 1.0, 1.0)
    assert str(level.value) == "quantile level must be in [0, 1], got 1.5"


def test_beta_interval_mass_is_the_cdf_difference():
    # Beta(2, 2): CDF 3x^2 - 2x^3.
    assert beta_interval_mass(0.25, 0.5, 2.0, 2.0) == pytest.approx(0.5 - (3 / 16 - 2 / 64), abs=1e-14)


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
