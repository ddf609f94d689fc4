"""Beta-distribution helpers (CDF and quantile) in pure Python, so tb agg figures need no SciPy."""

from __future__ import annotations

import math

_EPS = 1e-15
_TINY = 1e-300


def _continued_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz evaluation)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, 500):
        two_m = 2 * m
        for numerator in (
            m * (b - m) * x / ((a + two_m - 1.0) * (a + two_m)),
            -(a + m) * (a + b + m) * x / ((a + two_m) * (a + two_m + 1.0)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            result *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return result


def beta_cdf(x: float, a: float, b: float) -> float:
    """P(X <= x) for X ~ Beta(a, b) (the regularised incomplete beta function)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    # The fraction converges fast only left of the mean; use the symmetry I_x(a,b) = 1 - I_{1-x}(b,a).
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def beta_quantile(q: float, a: float, b: float) -> float:
    """The x with P(X <= x) = q for X ~ Beta(a, b), by bisection (monotone CDF)."""
    low, high = 0.0, 1.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if beta_cdf(middle, a, b) < q:
            low = middle
        else:
            high = middle
        if high - low < 1e-13:
            break
    return (low + high) / 2.0


def beta_interval_mass(low: float, high: float, a: float, b: float) -> float:
    """P(low < X < high) for X ~ Beta(a, b)."""
    return beta_cdf(high, a, b) - beta_cdf(low, a, b)
