"""Beta posteriors over a task's success probability (SPEC §5 paired comparison, §6 learning zone).

With the uniform prior the posterior is Beta(1 + c, 1 + n - c); ThinkingBox's ``tb agg`` uses the
Jeffreys prior (0.5) for its goldilocks column and its interval of the mean pass rate. The CDF and
its inverse are SciPy's regularised incomplete beta (``betainc``, ``betaincinv``), the one Beta
implementation of the engine. P(p_A > p_B) has a finite closed-form sum for integer parameters.
"""

from __future__ import annotations

import math

from scipy.special import betainc, betaincinv

LEARNING_ZONE_LO = 1 / 16
LEARNING_ZONE_HI = 15 / 16
LEARNING_ZONE_Q = 0.95


def _check_parameters(a: float, b: float) -> None:
    if a <= 0 or b <= 0:
        raise ValueError(f"Beta parameters must be > 0, got a={a}, b={b}")


def beta_cdf(x: float, a: float, b: float) -> float:
    """P(p <= x) for p ~ Beta(a, b)."""
    _check_parameters(a, b)
    return float(betainc(a, b, min(1.0, max(0.0, x))))


def beta_quantile(q: float, a: float, b: float) -> float:
    """The x with P(p <= x) = q for p ~ Beta(a, b)."""
    _check_parameters(a, b)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile level must be in [0, 1], got {q}")
    return float(betaincinv(a, b, q))


def beta_interval_mass(lo: float, hi: float, a: float, b: float) -> float:
    """P(lo < p < hi) for p ~ Beta(a, b)."""
    return max(0.0, beta_cdf(hi, a, b) - beta_cdf(lo, a, b))


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
    return beta_interval_mass(lo, hi, a, b)


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
