"""A campaign's ability from the attempts it ran, and its full-suite figures as *estimated* (SPEC §9).

Ability: maximum a posteriori under the calibration's ability prior (mean and covariance of the
calibrated campaigns' abilities) and the model's cell likelihood, by SciPy's ``trust-exact``
Newton method on the exact gradient and Hessian; its covariance is the inverse Hessian there
(Laplace approximation).

Figures: every task of the calibration counts, run or not. For a task with m done attempts of
which c passed, the full campaign would have had c + X passes with X ~ Binomial(N - m, p_t),
p_t = sigmoid(k a_t (theta - b_t) + e) and e's posterior given the task's own attempts. Drawing
the campaign's (theta, k, s) from their posterior, then e per task, then X gives the
predictive distribution of the full
campaign's pass@1, all-N share (tasks with N of N) and cost per dependable task; the point
figures are the draws' conditional expectations (no sampling noise), the 95% intervals the
draws' percentiles, widened by the tasks' calibration standard errors (delta method). Costs: a task's full cost is N times its mean agent cost per attempt run
(for tasks not run, the mean over the run attempts of its domain), so only the all-N count is
uncertain in cost per dependable task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.optimize import minimize

from tb_engine.irt.calibration import Calibration
from tb_engine.irt.model import QUADRATURE, cell_terms, node_probabilities, sigmoid

DRAWS = 1000
LEVEL = 0.95


@dataclass(frozen=True)
class Ability:
    """Posterior of one campaign's parameters: (theta_1..theta_D, factor_1..factor_K, log k, log s).

    ``dims`` abilities along the calibration's named dimensions, then its latent factors, the
    log consistency and the log spread of the random effect.
    """

    mean: np.ndarray
    cov: np.ndarray
    dims: int
    n_factors: int = 0

    @property
    def theta(self) -> np.ndarray:
        return self.mean[: self.dims]

    @property
    def consistency(self) -> float:
        return float(math.exp(self.mean[-2]))

    @property
    def spread(self) -> float:
        return float(math.exp(self.mean[-1]))

    def theta_variance_per_task(self, cal: Calibration) -> np.ndarray:
        return np.diag(self.cov)[: self.dims][cal.task_dimension]


def _prior(cal: Calibration) -> tuple[np.ndarray, np.ndarray]:
    P = cal.ability_mean.size  # named dimensions + latent factors
    mean = np.concatenate([cal.ability_mean, [cal.log_consistency_prior[0], cal.log_residual_prior[0]]])
    cov = np.zeros((P + 2, P + 2))
    cov[:P, :P] = cal.ability_cov
    cov[P, P] = cal.log_consistency_prior[1] ** 2
    cov[P + 1, P + 1] = cal.log_residual_prior[1] ** 2
    return mean, cov


def ability_posterior(
    cal: Calibration, done: np.ndarray, passes: np.ndarray, *, start: np.ndarray | None = None
) -> Ability:
    """MAP campaign parameters (see ``Ability``) and their Laplace covariance from per-task (done, passes).

    ``start`` (a previous estimate) only speeds the search up.
    """
    D, K = len(cal.dimensions), cal.n_factors
    seen = np.flatnonzero(done > 0)
    prior_mean, prior_cov = _prior(cal)
    if seen.size == 0:
        return Ability(mean=prior_mean, cov=prior_cov, dims=D, n_factors=K)
    precision = np.linalg.inv(prior_cov)
    a, b = cal.discrimination[seen], cal.difficulty[seen]
    loadings = cal.loadings[seen] if K else np.zeros((seen.size, 0))
    dim = cal.task_dimension[seen]
    n, c = done[seen].astype(np.float64), passes[seen].astype(np.float64)
    P = D + K + 2

    def value_and_grad(x: np.ndarray) -> tuple[float, np.ndarray]:
        k, spread = math.exp(x[D + K]), math.exp(x[D + K + 1])
        inner = a * (x[dim] - b) + loadings @ x[D : D + K]
        eta = k * inner
        t = cell_terms(eta, spread, n, c, QUADRATURE, second=False)
        offset = x - prior_mean
        value = -t.log_lik.sum() + 0.5 * offset @ precision @ offset
        grad = np.empty(P)
        grad[:D] = -np.bincount(dim, weights=k * a * t.d_eta, minlength=D)
        grad[D : D + K] = -(k * t.d_eta) @ loadings
        grad[D + K] = -(eta * t.d_eta).sum()
        grad[D + K + 1] = -(t.d_s.sum() * spread)
        return float(value), grad + precision @ offset

    x0 = prior_mean.copy() if start is None else np.asarray(start, dtype=np.float64).copy()
    result = minimize(value_and_grad, x0, jac=True, method="BFGS", options={"gtol": 1e-5})
    mean = result.x
    # Laplace covariance: the Hessian by forward differences of the exact gradient.
    hessian = np.empty((P, P))
    step = 1e-5
    at = value_and_grad(mean)[1]
    for i in range(P):
        moved = mean.copy()
        moved[i] += step
        hessian[i] = (value_and_grad(moved)[1] - at) / step
    hessian = 0.5 * (hessian + hessian.T)
    try:
        cov = np.linalg.inv(hessian)
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        cov = prior_cov
    return Ability(mean=mean, cov=cov, dims=D, n_factors=K)


def task_linear(cal: Calibration, params: np.ndarray) -> np.ndarray:
    """k (a_t (theta_{d(t)} - b_t) + loadings_t . factors) for one parameter vector or many (draws, P)."""
    D, K = len(cal.dimensions), cal.n_factors
    theta = params[..., :D]
    k = np.exp(params[..., D + K])[..., None]
    inner = cal.discrimination * (theta[..., cal.task_dimension] - cal.difficulty)
    if K:
        inner = inner + params[..., D : D + K] @ cal.loadings.T
    return k * inner


def _spread(params: np.ndarray) -> np.ndarray:
    return np.exp(params[..., -1])


def beta_prior(cal: Calibration, ability: Ability) -> tuple[np.ndarray, np.ndarray]:
    """Per-task Beta(alpha, beta) matching the mean and variance of the model's prediction of p_t.

    The prediction integrates both the random effect and the ability's uncertainty: logit p_t ~
    N(k a_t (theta - b_t), s^2 + (k a_t)^2 var(theta_d)). This is the prior the stopping rule puts
    in SPEC §6's Beta posterior in place of the uniform one (see adaptive.py).
    """
    centre = task_linear(cal, ability.mean)
    slope = ability.consistency * cal.discrimination
    spread = np.sqrt(ability.spread**2 + slope**2 * ability.theta_variance_per_task(cal))
    p = sigmoid(centre[:, None] + spread[:, None] * QUADRATURE.z[None, :])
    w = np.exp(QUADRATURE.log_w)
    mean = np.clip(p @ w, 1e-6, 1 - 1e-6)
    variance = np.clip(((p - mean[:, None]) ** 2) @ w, 1e-12, None)
    strength = np.clip(mean * (1 - mean) / variance - 1.0, 0.05, 1e6)
    return mean * strength, (1 - mean) * strength


def _node_weights(eta: np.ndarray, s: Any, done: np.ndarray, passes: np.ndarray) -> np.ndarray:
    """(..., tasks, nodes) posterior weights of the random effect given each task's own attempts."""
    eta_k = (
        eta[..., None] + np.asarray(s)[..., None, None] * QUADRATURE.z
        if np.ndim(s)
        else eta[..., None] + s * QUADRATURE.z
    )
    log_terms = QUADRATURE.log_w + passes[:, None] * eta_k - done[:, None] * np.logaddexp(0.0, eta_k)
    log_terms -= log_terms.max(axis=-1, keepdims=True)
    weights = np.exp(log_terms)
    return weights / weights.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class Expectations:
    """Per-task conditional expectations at one ability: E[full passes], P(N of N), Var(full passes)."""

    full_passes: np.ndarray
    all_n: np.ndarray
    full_passes_var: np.ndarray


def expectations(
    cal: Calibration, theta: np.ndarray, done: np.ndarray, passes: np.ndarray, n_attempts: int
) -> Expectations:
    """What each task's full campaign (N attempts) holds at ability ``theta``, given its attempts run."""
    eta = task_linear(cal, theta)
    spread = float(_spread(theta))
    weights = _node_weights(eta, spread, done, passes)
    p = node_probabilities(eta, spread)
    left = np.maximum(n_attempts - done, 0).astype(np.float64)
    mean_p = (weights * p).sum(axis=-1)
    mean_pq = (weights * p * (1 - p)).sum(axis=-1)
    var_p = np.clip((weights * p * p).sum(axis=-1) - mean_p**2, 0.0, None)
    clean = passes == done
    all_n = np.where(clean, (weights * p ** left[:, None]).sum(axis=-1), 0.0)
    return Expectations(
        full_passes=passes + left * mean_p,
        all_n=all_n,
        full_passes_var=left * mean_pq + left * left * var_p,
    )


def standard_errors(
    cal: Calibration, ability: Ability, done: np.ndarray, passes: np.ndarray, n_attempts: int
) -> tuple[float, float]:
    """Delta-method SE of estimated pass@1 and all-N share (cheap; the planner's stopping test)."""
    T = cal.n_tasks
    base = expectations(cal, ability.mean, done, passes, n_attempts)
    P = ability.mean.size
    grad_pass, grad_all = np.zeros(P), np.zeros(P)
    step = 1e-3
    for d in range(P):
        shifted = ability.mean.copy()
        shifted[d] += step
        moved = expectations(cal, shifted, done, passes, n_attempts)
        grad_pass[d] = (moved.full_passes.sum() - base.full_passes.sum()) / (step * T * n_attempts)
        grad_all[d] = (moved.all_n.sum() - base.all_n.sum()) / (step * T)
    var_pass = grad_pass @ ability.cov @ grad_pass + base.full_passes_var.sum() / (T * n_attempts) ** 2
    var_all = grad_all @ ability.cov @ grad_all + (base.all_n * (1 - base.all_n)).sum() / T**2
    return math.sqrt(max(var_pass, 0.0)), math.sqrt(max(var_all, 0.0))


def _interval(values: np.ndarray) -> tuple[float | None, float | None]:
    finite = values[np.isfinite(values)]
    tail = (1 - LEVEL) / 2 * 100
    if finite.size < values.size / 2:
        # Most draws have no dependable task: the ratio's upper end is unbounded.
        lo = float(np.percentile(finite, tail)) if finite.size else None
        return lo, None
    lo, hi = np.percentile(np.where(np.isfinite(values), values, np.inf), [tail, 100 - tail])
    return float(lo), (float(hi) if math.isfinite(hi) else None)


def estimate_figures(
    cal: Calibration,
    done: np.ndarray,
    passes: np.ndarray,
    *,
    n_attempts: int,
    cost_per_attempt: np.ndarray | None = None,
    draws: int = DRAWS,
    seed: int = 0,
    ability: Ability | None = None,
) -> dict[str, Any]:
    """Estimated full-campaign figures with 95% predictive intervals; labelled ``estimated``.

    ``done``/``passes`` are per task of the calibration (0 where not run); ``cost_per_attempt``
    the mean agent cost of the task's run attempts (NaN where none). The result says how many
    attempts were run of the N x tasks a full campaign has (``attempts_share``).
    """
    done = np.asarray(done, dtype=np.float64)
    passes = np.asarray(passes, dtype=np.float64)
    ability = ability or ability_posterior(cal, done, passes)
    T = cal.n_tasks
    rng = np.random.default_rng(seed)
    thetas = rng.multivariate_normal(ability.mean, ability.cov, size=draws, method="cholesky")
    left = np.maximum(n_attempts - done, 0).astype(np.int64)
    clean = passes == done
    pass_draws = np.empty(draws)
    all_draws = np.empty(draws)
    pass_expect = np.empty(draws)
    all_expect = np.empty(draws)
    chunk = 100
    for start in range(0, draws, chunk):
        theta = thetas[start : start + chunk]
        eta = task_linear(cal, theta)  # (chunk, tasks)
        spread = _spread(theta)[:, None, None]
        weights = _node_weights(eta, _spread(theta), done, passes)
        p = sigmoid(eta[..., None] + spread * QUADRATURE.z)
        pass_expect[start : start + chunk] = (passes + left * (weights * p).sum(-1)).sum(-1) / (
            T * n_attempts
        )
        all_expect[start : start + chunk] = (clean * (weights * p ** left[:, None]).sum(-1)).sum(-1) / T
        # One predictive draw per ability draw: a node per task, then the attempts not run.
        cumulative = np.cumsum(weights, axis=-1)
        u = rng.random(cumulative.shape[:-1] + (1,))
        node = np.minimum((cumulative < u).sum(-1), len(QUADRATURE.z) - 1)
        p_draw = np.take_along_axis(p, node[..., None], axis=-1)[..., 0]
        extra = rng.binomial(np.broadcast_to(left, p_draw.shape), p_draw)
        full = passes + extra
        pass_draws[start : start + chunk] = full.sum(-1) / (T * n_attempts)
        all_draws[start : start + chunk] = ((full == n_attempts) & clean).sum(-1) / T
    # The tasks' (a, b) are estimates too: their calibration standard errors, carried through
    # each task's expectation by the delta method, widen the draws (the point figures stay).
    sd_pass, sd_all = _item_uncertainty(cal, ability, done, passes, n_attempts)
    pass_draws = pass_draws + sd_pass * rng.standard_normal(draws)
    all_draws = np.clip(all_draws + sd_all * rng.standard_normal(draws), 0.0, 1.0)
    tail = (1 - LEVEL) / 2 * 100
    run = int(done.sum())
    planned = T * n_attempts
    result: dict[str, Any] = {
        "estimated": True,
        "tasks": T,
        "tasks_run": int((done > 0).sum()),
        "attempts_run": run,
        "attempts_planned": planned,
        "attempts_share": run / planned if planned else None,
        "n_attempts": n_attempts,
        "draws": draws,
        "seed": seed,
        "ability": [float(x) for x in ability.theta],
        "ability_se": [float(math.sqrt(v)) for v in np.diag(ability.cov)[: ability.dims]],
        "consistency": ability.consistency,
        "spread": ability.spread,
        "dimensions": list(cal.dimensions),
        "pass_at_1": {
            "value": float(pass_expect.mean()),
            "lo": float(np.percentile(pass_draws, tail)),
            "hi": float(np.percentile(pass_draws, 100 - tail)),
            "se": float(pass_draws.std(ddof=1)) if draws > 1 else 0.0,
        },
        "all_n": {
            "value": float(all_expect.mean()),
            "count": float(all_expect.mean() * T),
            "lo": float(np.percentile(all_draws, tail)),
            "hi": float(np.percentile(all_draws, 100 - tail)),
            "se": float(all_draws.std(ddof=1)) if draws > 1 else 0.0,
        },
        "cost_per_dependable_task": None,
    }
    if cost_per_attempt is not None:
        result["cost_per_dependable_task"] = _cost_per_dependable(
            cal, np.asarray(cost_per_attempt, dtype=np.float64), n_attempts, all_expect, all_draws
        )
    return result


def _item_uncertainty(
    cal: Calibration, ability: Ability, done: np.ndarray, passes: np.ndarray, n_attempts: int
) -> tuple[float, float]:
    """SD of estimated pass@1 and all-N share from the tasks' (a, b) standard errors (delta method)."""
    T = cal.n_tasks
    base = expectations(cal, ability.mean, done, passes, n_attempts)
    step = 1e-3
    var_pass = np.zeros(T)
    var_all = np.zeros(T)
    for name, se in (("difficulty", cal.difficulty_se), ("discrimination", cal.discrimination_se)):
        shifted = replace(cal, **{name: getattr(cal, name) + step})
        moved = expectations(shifted, ability.mean, done, passes, n_attempts)
        se = np.nan_to_num(se, nan=0.0, posinf=0.0)
        var_pass += ((moved.full_passes - base.full_passes) / step * se) ** 2
        var_all += ((moved.all_n - base.all_n) / step * se) ** 2
    return math.sqrt(var_pass.sum()) / (T * n_attempts), math.sqrt(var_all.sum()) / T


def _cost_per_dependable(
    cal: Calibration, per_attempt: np.ndarray, n_attempts: int, all_expect: np.ndarray, all_draws: np.ndarray
) -> dict[str, Any] | None:
    known = np.isfinite(per_attempt)
    if not known.any():
        return None
    filled = per_attempt.copy()
    domains = np.asarray(cal.task_domains)
    overall = float(per_attempt[known].mean())
    for domain in np.unique(domains):
        mine = domains == domain
        seen = mine & known
        filled[mine & ~known] = float(per_attempt[seen].mean()) if seen.any() else overall
    total = float(filled.sum() * n_attempts)
    T = cal.n_tasks
    count = float(all_expect.mean() * T)
    with np.errstate(divide="ignore"):
        ratios = np.where(all_draws > 0, total / np.maximum(all_draws * T, 1e-300), np.inf)
    lo, hi = _interval(ratios)
    return {
        "value": total / count if count > 0.5 else None,
        "lo": lo,
        "hi": hi,
        "agent_cost_full": total,
        "all_n_count": count,
    }
