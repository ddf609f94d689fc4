"""Beta posteriors over a task's success probability (SPEC §5 paired comparison, §6 learning zone).

With the uniform prior the posterior is Beta(1 + c, 1 + n - c): integer parameters,
so its CDF is an exact binomial tail, I_x(a, b) = P(Binomial(a + b - 1, x) >= a),
and P(p_A > p_B) has a finite closed-form sum. No scipy needed. Non-integer
parameters (e.g. the Jeffreys prior ThinkingBox's goldilocks column uses) go
through a continued-fraction evaluation of the regularized incomplete beta.
"""

from __future__ import annotations

import math

LEARNING_ZONE_LO = 1 / 16
LEARNING_ZONE_HI = 15 / 16
LEARNING_ZONE_Q = 0.95


def _log_binom_pmf(m: int, j: int, x: float) -> float:
    return (
        math.lgamma(m + 1)
        - math.lgamma(j + 1)
        - math.lgamma(m - j + 1)
        + j * math.log(x)
        + (m - j) * math.log1p(-x)
    )


def _beta_cdf_integer(x: float, a: int, b: int) -> float:
    m = a + b - 1
    # Sum the shorter tail for accuracy and speed.
    if a <= m - a + 1:
        lower = sum(math.exp(_log_binom_pmf(m, j, x)) for j in range(0, a))
        return min(1.0, max(0.0, 1.0 - lower))
    upper = sum(math.exp(_log_binom_pmf(m, j, x)) for j in range(a, m + 1))
    return min(1.0, max(0.0, upper))


def _beta_continued_fraction(x: float, a: float, b: float) -> float:
    # Modified Lentz evaluation of the incomplete-beta continued fraction.
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta did not converge for x={x}, a={a}, b={b}")


def beta_cdf(x: float, a: float, b: float) -> float:
    """P(p <= x) for p ~ Beta(a, b): exact binomial tail for integer a, b, continued fraction otherwise."""
    if a <= 0 or b <= 0:
        raise ValueError(f"Beta parameters must be > 0, got a={a}, b={b}")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if float(a).is_integer() and float(b).is_integer():
        return _beta_cdf_integer(x, int(a), int(b))
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    # The continued fraction converges fast only left of the mode; use symmetry otherwise.
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(1.0 - x, b, a) / b


def posterior_params(n: int, c: int, *, prior: float = 1.0) -> tuple[float, float]:
    """Beta posterior parameters (prior + c, prior + n - c); prior 1 is SPEC's uniform prior."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    return prior + c, prior + n - c


def prob_between(n: int, c: int, lo: float, hi: float, *, prior: float = 1.0) -> float:
    """P(lo < p < hi) under the Beta(prior + c, prior + n - c) posterior."""
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"need 0 <= lo <= hi <= 1, got lo={lo}, hi={hi}")
    a, b = posterior_params(n, c, prior=prior)
    return max(0.0, beta_cdf(hi, a, b) - beta_cdf(lo, a, b))


def in_learning_zone(
    n: int, c: int, *, lo: float = LEARNING_ZONE_LO, hi: float = LEARNING_ZONE_HI, q: float = LEARNING_ZONE_Q
) -> bool:
    """SPEC §6: the task is in the learning zone when P(lo < p < hi) >= q."""
    return prob_between(n, c, lo, hi) >= q


def prob_a_beats_b(n_a: int, c_a: int, n_b: int, c_b: int) -> float:
    """P(p_A > p_B) for independent posteriors Beta(1 + c, 1 + n - c); exact finite sum."""
    a_a, b_a = posterior_params(n_a, c_a)
    a_b, b_b = posterior_params(n_b, c_b)
    # P(X > Y), X~Beta(a1,b1), Y~Beta(a2,b2), integer a1:
    #   sum_{i=0}^{a1-1} B(a2+i, b1+b2) / ((b1+i) B(1+i, b1) B(a2, b2))
    a1, b1, a2, b2 = int(a_a), int(b_a), int(a_b), int(b_b)

    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    total = 0.0
    for i in range(a1):
        total += math.exp(
            log_beta(a2 + i, b1 + b2) - math.log(b1 + i) - log_beta(1 + i, b1) - log_beta(a2, b2)
        )
    return min(1.0, max(0.0, total))
