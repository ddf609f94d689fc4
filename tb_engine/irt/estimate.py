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
draws' percentiles, widened by the tasks' calibration standard errors (delta method) and by the
model's measured misfit to this campaign (``misfit_dispersion``). Costs: a task's full cost is N
times its mean agent cost per attempt run (for tasks not run, the mean over the run attempts of
its domain), so only the all-N count is uncertain in cost per dependable task.

Misfit: the draws carry the ability's, the random effects', the attempts' and the calibration's
uncertainty, all *under the model*. Where the model is wrong for a campaign (a weak spot the
calibration has no dimension for, a success curve of another shape) the errors of the tasks'
predictions do not average out over the suite: they share a sign among related tasks. The
estimate measures this on the campaign's own run tasks by cross-fitting: the tasks, in the
calibration's order, are split into two halves; the ability is fitted on one half and predicts
the other half's passes (and vice versa). Residuals (passes - predicted) are summed within
clusters of tasks whose errors may be shared — the held-out half's tasks in each band of the
campaign's predicted logit (quintiles over the suite) — and the dispersion

    phi = sum over clusters of (sum of residuals)^2  /  sum over clusters of their model variance

compares the clustered residuals with what the model expects of them (binomial noise, the
random effect, the half-fit ability's uncertainty). phi is about 1 when the model fits; the
predictive spread of both figures is multiplied by sqrt(max(phi, 1)) (a design effect: never
narrower than the model's own interval). A fully observed campaign has nothing predicted and
its interval stays a point.
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
MISFIT_FOLDS = 2  # the halves of the cross-fit: each held-out half as large as possible
MISFIT_BANDS = 5  # quintiles of the predicted logit: clusters of tasks that may share an error


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


@dataclass(frozen=True)
class Misfit:
    """The cross-fitted clustered dispersion of a campaign's residuals (see the module docstring)."""

    dispersion: float  # phi: clustered squared residuals over their model variance
    clusters: int  # (fold, band) clusters with at least one run task
    residual_ss: float  # sum over clusters of (sum of residuals)^2
    model_variance: float  # sum over clusters of their model variance

    @property
    def inflation(self) -> float:
        """Factor on the predictive spread: sqrt(max(phi, 1))."""
        return math.sqrt(max(self.dispersion, 1.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "dispersion": self.dispersion,
            "inflation": self.inflation,
            "clusters": self.clusters,
            "residual_ss": self.residual_ss,
            "model_variance": self.model_variance,
            "folds": MISFIT_FOLDS,
            "bands": MISFIT_BANDS,
        }


NO_MISFIT = Misfit(dispersion=1.0, clusters=0, residual_ss=0.0, model_variance=0.0)


def clustered_dispersion(residuals: np.ndarray, variances: np.ndarray, clusters: np.ndarray) -> Misfit:
    """phi = sum_g (sum_{t in g} r_t)^2 / sum_g sum_{t in g} v_t, plus the extra variance per cluster.

    ``variances`` are per task; a cluster's model variance may carry a shared part too, passed as
    a task of the cluster (``misfit_dispersion`` adds the half-fit ability's variance that way).
    """
    labels, index = np.unique(clusters, return_inverse=True)
    sums = np.bincount(index, weights=residuals, minlength=labels.size)
    variance = float(np.sum(variances))
    square = float(np.sum(sums**2))
    if variance <= 0:
        return NO_MISFIT
    return Misfit(
        dispersion=square / variance, clusters=int(labels.size), residual_ss=square, model_variance=variance
    )


def _prior_moments(cal: Calibration, ability: Ability) -> tuple[np.ndarray, np.ndarray]:
    """Per task the model's mean and variance of p at ``ability`` (before the task's own attempts)."""
    alpha, beta = beta_prior(cal, ability)
    mean = alpha / (alpha + beta)
    return mean, mean * (1 - mean) / (alpha + beta + 1.0)


def misfit_dispersion(
    cal: Calibration, done: np.ndarray, passes: np.ndarray, ability: Ability | None = None
) -> Misfit:
    """How far the campaign's run tasks stray from the model, beyond its own noise (cross-fitted).

    Each half of the tasks (every other task of the calibration's order) is predicted by the
    ability fitted on the other half only, so a residual never fits itself. A held-out task with
    n attempts and c passes has residual c - n pi and model variance n pi (1 - pi) + n (n - 1) v
    (pi, v: the model's mean and variance of its p; ``beta_prior``); the half-fit ability's
    uncertainty adds (d sum n pi / d ability)' Cov (d sum n pi / d ability) per cluster. The
    clusters are (half, band of the predicted logit at the full-data ability). The likelihood of
    the counts is the same whatever the stopping rule did, but c / n is not: the residuals are
    of counts against their predictions, as the estimate itself sums them.
    """
    done = np.asarray(done, dtype=np.float64)
    passes = np.asarray(passes, dtype=np.float64)
    T = cal.n_tasks
    fold = np.arange(T) % MISFIT_FOLDS
    run = done > 0
    if any(int((run & (fold == f)).sum()) < 2 for f in range(MISFIT_FOLDS)):
        return NO_MISFIT
    ability = ability or ability_posterior(cal, done, passes)
    eta = task_linear(cal, ability.mean)
    edges = np.quantile(eta, np.linspace(0.0, 1.0, MISFIT_BANDS + 1)[1:-1])
    band = np.searchsorted(edges, eta)
    residuals: list[np.ndarray] = []
    variances: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    step = 1e-4
    for f in range(MISFIT_FOLDS):
        train = fold != f
        half = ability_posterior(
            cal, np.where(train, done, 0.0), np.where(train, passes, 0.0), start=ability.mean
        )
        mean, var_p = _prior_moments(cal, half)
        test = run & ~train
        n, c = done[test], passes[test]
        pi, v = mean[test], var_p[test]
        residuals.append(c - n * pi)
        variances.append(n * pi * (1 - pi) + n * (n - 1) * v)
        cluster = f * MISFIT_BANDS + band[test]
        labels.append(cluster)
        # The half-fit ability's uncertainty, shared by a cluster's tasks.
        present = np.unique(cluster)
        grad = np.zeros((present.size, half.mean.size))
        for j in range(half.mean.size):
            moved = half.mean.copy()
            moved[j] += step
            shifted, _ = _prior_moments(cal, replace(half, mean=moved))
            change = n * (shifted[test] - pi) / step
            grad[:, j] = [change[cluster == g].sum() for g in present]
        shared = np.einsum("gi,ij,gj->g", grad, half.cov, grad)
        residuals.append(np.zeros(present.size))
        variances.append(shared)
        labels.append(present)
    return clustered_dispersion(np.concatenate(residuals), np.concatenate(variances), np.concatenate(labels))


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
    misfit: bool = True,
) -> dict[str, Any]:
    """Estimated full-campaign figures with 95% predictive intervals; labelled ``estimated``.

    ``done``/``passes`` are per task of the calibration (0 where not run); ``cost_per_attempt``
    the mean agent cost of the task's run attempts (NaN where none). The result says how many
    attempts were run of the N x tasks a full campaign has (``attempts_share``). ``misfit``
    (default on) widens the intervals by the campaign's measured misfit (``misfit_dispersion``);
    the result's ``misfit`` says by how much.
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
    all_draws = all_draws + sd_all * rng.standard_normal(draws)
    # Misfit: the spread about the point figures, times sqrt(max(phi, 1)).
    measured = misfit_dispersion(cal, done, passes, ability) if misfit else NO_MISFIT
    pass_value, all_value = float(pass_expect.mean()), float(all_expect.mean())
    pass_draws = pass_value + measured.inflation * (pass_draws - pass_value)
    all_draws = np.clip(all_value + measured.inflation * (all_draws - all_value), 0.0, 1.0)
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
            "value": pass_value,
            "lo": float(np.percentile(pass_draws, tail)),
            "hi": float(np.percentile(pass_draws, 100 - tail)),
            "se": float(pass_draws.std(ddof=1)) if draws > 1 else 0.0,
        },
        "all_n": {
            "value": all_value,
            "count": all_value * T,
            "lo": float(np.percentile(all_draws, tail)),
            "hi": float(np.percentile(all_draws, 100 - tail)),
            "se": float(all_draws.std(ddof=1)) if draws > 1 else 0.0,
        },
        "cost_per_dependable_task": None,
        "misfit": measured.to_dict(),
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
