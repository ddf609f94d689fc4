"""Adaptive campaigns: which task to run next, when a task's repeats stop, when the campaign stops.

Tasks are chosen by information at the current ability estimate: the expected Fisher
information of one attempt, a_t^2 E[p_t (1 - p_t)], times the posterior variance of the task's
ability dimension (so with one ability per domain, domains already well measured wait). A chosen
task gets ``min_attempts`` attempts, then more one at a time until its success probability is
*settled* (SPEC §6 thresholds lo = 1/16, hi = 15/16, q = 0.95):

* dependable     P(p > hi)      >= q
* learning zone  P(lo < p < hi) >= q
* hopeless       P(p < lo)      >= q

or it reached N. The posterior is SPEC §6's Beta(alpha + c, beta + n - c); with a calibration
its prior (alpha, beta) is the model's prediction for the task at the current ability (mean and
variance matched, ``estimate.beta_prior``) instead of the uniform Beta(1, 1). That is what lets a
task the model already expects to pass stop after a few clean passes — and only then: with the
uniform prior a 20/20 task is not yet dependable (P(p > 15/16) = 1 - (15/16)^21 = 0.74; it takes
46 clean passes), so without a calibration every clean task runs its N attempts.

The campaign stops when the delta-method standard errors of estimated pass@1 and all-N share
are both at most ``target_se``, when the attempt budget (a share of N x tasks) is spent, or when
every task is settled or complete. ``plan`` is a pure function of the counts so far (done,
passes, attempts still pending), so a dispatcher that calls it after every recorded attempt, or
twice, queues the same work; ``replay`` drives it from stored outcomes (no model calls).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import betainc, gammaln

from tb_engine.irt.calibration import Calibration
from tb_engine.irt.estimate import Ability, ability_posterior, beta_prior, standard_errors, task_linear
from tb_engine.irt.model import QUADRATURE, node_probabilities
from tb_engine.metrics.posterior import LEARNING_ZONE_HI, LEARNING_ZONE_LO, LEARNING_ZONE_Q

DEPENDABLE, LEARNING_ZONE, HOPELESS = "dependable", "learning_zone", "hopeless"
SETTLED = (DEPENDABLE, LEARNING_ZONE, HOPELESS)


@dataclass(frozen=True)
class AdaptiveConfig:
    """How an adaptive campaign spends its attempts (a campaign option; stored as ``to_dict``)."""

    n_attempts: int = 20  # N of the full campaign being estimated
    budget_share: float = 0.3  # attempts at most, as a share of N x tasks
    target_se: float = 0.005  # stop once SE(pass@1) and SE(all-N share) are both at most this
    min_attempts: int = 3  # attempts a task gets before its posterior can settle it
    batch_tasks: int = 8  # tasks with attempts in flight at once
    lo: float = LEARNING_ZONE_LO
    hi: float = LEARNING_ZONE_HI
    q: float = LEARNING_ZONE_Q

    def budget(self, n_tasks: int) -> int:
        return int(math.floor(self.budget_share * self.n_attempts * n_tasks + 1e-9))

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_attempts": self.n_attempts,
            "budget_share": self.budget_share,
            "target_se": self.target_se,
            "min_attempts": self.min_attempts,
            "batch_tasks": self.batch_tasks,
            "lo": self.lo,
            "hi": self.hi,
            "q": self.q,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AdaptiveConfig:
        """The config of ``data``; without an explicit min_attempts, the default capped at N."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if "min_attempts" not in known and "n_attempts" in known:
            known["min_attempts"] = max(1, min(cls.min_attempts, int(known["n_attempts"])))
        config = cls(**known)
        config.check()
        return config

    def check(self) -> None:
        """Raise ValueError naming the first option out of range."""
        if self.n_attempts < 1:
            raise ValueError("n_attempts: must be at least 1")
        if not 0 < self.budget_share <= 1:
            raise ValueError("budget_share: must be in (0, 1]")
        if self.target_se < 0:
            raise ValueError("target_se: must be >= 0")
        if not 1 <= self.min_attempts <= self.n_attempts:
            raise ValueError("min_attempts: must be between 1 and n_attempts")
        if self.batch_tasks < 1:
            raise ValueError("batch_tasks: must be at least 1")
        if not (0 < self.lo < self.hi < 1 and 0 < self.q <= 1):
            raise ValueError("lo, hi, q: need 0 < lo < hi < 1 and 0 < q <= 1")


def settle(
    n: Any,
    c: Any,
    *,
    prior_alpha: Any = 1.0,
    prior_beta: Any = 1.0,
    lo: float = LEARNING_ZONE_LO,
    hi: float = LEARNING_ZONE_HI,
    q: float = LEARNING_ZONE_Q,
) -> np.ndarray:
    """Per task: dependable, learning_zone, hopeless or "" (not settled) under Beta(alpha + c, beta + n - c)."""
    n_arr = np.asarray(n, dtype=np.float64)
    c_arr = np.asarray(c, dtype=np.float64)
    alpha = np.asarray(prior_alpha, dtype=np.float64) + c_arr
    beta = np.asarray(prior_beta, dtype=np.float64) + n_arr - c_arr
    below = betainc(alpha, beta, lo)
    above = 1.0 - betainc(alpha, beta, hi)
    between = 1.0 - below - above
    out = np.full(np.broadcast(alpha, beta).shape, "", dtype=object)
    out[between >= q] = LEARNING_ZONE
    out[below >= q] = HOPELESS
    out[above >= q] = DEPENDABLE
    return out


@dataclass(frozen=True)
class Plan:
    """What to do next: attempts to queue per task index, or why the campaign stops."""

    queue: dict[int, int]
    stop: str | None  # target_se | budget | settled | None (keep going)
    ability: Ability
    se_pass_at_1: float
    se_all_n: float
    categories: np.ndarray  # per task: a SETTLED value or ""
    used: int
    budget: int


def plan(
    cal: Calibration,
    done: np.ndarray,
    passes: np.ndarray,
    pending: np.ndarray,
    config: AdaptiveConfig,
    *,
    limit: np.ndarray | None = None,
    start: np.ndarray | None = None,
) -> Plan:
    """The next attempts of an adaptive campaign from its counts so far (arrays aligned with cal.task_ids).

    ``limit`` caps the attempts per task (default N; a replay passes how many are stored);
    ``start``, a previous ability estimate, only speeds the ability search up.
    """
    done = np.asarray(done, dtype=np.int64)
    passes = np.asarray(passes, dtype=np.int64)
    pending = np.asarray(pending, dtype=np.int64)
    N = config.n_attempts
    budget = config.budget(cal.n_tasks)
    used = int(done.sum() + pending.sum())
    ability = ability_posterior(cal, done, passes, start=start)
    alpha, beta = beta_prior(cal, ability)
    categories = np.where(
        done >= config.min_attempts,
        settle(done, passes, prior_alpha=alpha, prior_beta=beta, lo=config.lo, hi=config.hi, q=config.q),
        "",
    )
    se_pass, se_all = standard_errors(cal, ability, done, passes, N)
    remaining = budget - used
    in_flight = int(pending.sum())

    def finished(reason: str) -> Plan:
        return Plan(
            {}, reason if in_flight == 0 else None, ability, se_pass, se_all, categories, used, budget
        )

    if max(se_pass, se_all) <= config.target_se:
        return finished("target_se")
    if remaining <= 0:
        return finished("budget")
    started = done + pending
    cap = np.full(cal.n_tasks, N, dtype=np.int64) if limit is None else np.minimum(limit, N)
    candidates = (started < cap) & (categories == "") & (pending == 0)
    # Tasks with attempts in flight count against the batch; each chosen task gets one attempt.
    room = config.batch_tasks - int((pending > 0).sum())
    queue: dict[int, int] = {}
    if room > 0 and candidates.any():
        score = value_of_attempt(cal, ability, done, passes, alpha, beta, N)
        chosen = np.flatnonzero(candidates)
        order = chosen[np.lexsort((chosen, -score[chosen]))]  # most valuable first, ties by task order
        for index in order[: min(room, remaining)]:
            queue[int(index)] = 1
    if not queue:
        return finished("settled")
    return Plan(queue, None, ability, se_pass, se_all, categories, used, budget)


def _beta_binomial_var(r: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Variance of the passes among r further attempts when p ~ Beta(alpha, beta)."""
    total = alpha + beta
    return r * alpha * beta * (total + r) / (total * total * (total + 1.0))


def _all_pass(r: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """P(r further attempts all pass) when p ~ Beta(alpha, beta): B(alpha + r, beta) / B(alpha, beta)."""
    return np.exp(gammaln(alpha + r) + gammaln(alpha + beta) - gammaln(alpha) - gammaln(alpha + beta + r))


def value_of_attempt(
    cal: Calibration,
    ability: Ability,
    done: np.ndarray,
    passes: np.ndarray,
    prior_alpha: np.ndarray,
    prior_beta: np.ndarray,
    n_attempts: int,
) -> np.ndarray:
    """Per task: how much one more attempt is expected to shrink the variance of the estimated figures.

    The classical adaptive test picks the item with the most Fisher information about the
    ability. The quantities estimated here are the full campaign's pass@1 and all-N share, so
    the information that counts is about them: an attempt of task t removes one unknown attempt
    from the task's own total (its Beta posterior's predictive variance shrinks, computed
    exactly for both outcomes), and it informs the ability, with Fisher information
    (k a_t)^2 E[p(1 - p)] along the task's dimension, which shrinks the part of the figures'
    variance that all unrun tasks share (a rank-one update of the ability covariance).
    Both figures count with weight 1 / their scale (tasks x N, tasks).
    """
    T, N = cal.n_tasks, n_attempts
    alpha = prior_alpha + passes
    beta = prior_beta + done - passes
    r = np.maximum(N - done, 0).astype(np.float64)
    pi = alpha / (alpha + beta)
    clean = passes == done
    step = np.maximum(r - 1, 0)
    v1 = _beta_binomial_var(r, alpha, beta)
    v1_after = pi * _beta_binomial_var(step, alpha + 1, beta) + (1 - pi) * _beta_binomial_var(
        step, alpha, beta + 1
    )
    q = np.where(clean, _all_pass(r, alpha, beta), 0.0)
    q_after = np.where(clean, _all_pass(step, alpha + 1, beta), 0.0)
    v2 = q * (1 - q)
    v2_after = pi * q_after * (1 - q_after)
    own = (v1 - v1_after) / (T * N) ** 2 + (v2 - v2_after) / T**2
    # The shared part: d(figure)/d(ability) through the unrun tasks' predictions.
    D = ability.dims
    slope = ability.consistency * cal.discrimination
    p = node_probabilities(task_linear(cal, ability.mean), ability.spread)
    w = np.exp(QUADRATURE.log_w)
    info = slope**2 * ((p * (1 - p)) @ w)
    sensitivity = slope * ((p * (1 - p)) @ w)  # d E[p_t] / d theta_d
    unrun = done == 0
    grad = np.bincount(cal.task_dimension, weights=sensitivity * unrun * r, minlength=D) / (T * N)
    cov = ability.cov[:D, :D]
    reach = (cov @ grad)[cal.task_dimension]
    shared = info * reach**2 / (1.0 + info * np.diag(cov)[cal.task_dimension])
    return own + shared


@dataclass
class Replay:
    """The outcome of driving ``plan`` from stored attempts."""

    done: np.ndarray
    passes: np.ndarray
    stop: str
    steps: int
    categories: np.ndarray
    history: list[tuple[int, float, float]] = field(default_factory=list)  # (attempts, SE pass@1, SE all-N)


def replay(
    cal: Calibration,
    outcome: Callable[[int, int], bool | None],
    available: np.ndarray,
    config: AdaptiveConfig,
) -> Replay:
    """Run an adaptive campaign on stored attempts: ``outcome(task index, k)`` is the k-th stored attempt.

    ``available`` (per task) is how many stored attempts can be read; a task runs out when they
    are used up (its attempts beyond are treated as never run). Nothing is called but ``outcome``.
    """
    T = cal.n_tasks
    done = np.zeros(T, dtype=np.int64)
    passes = np.zeros(T, dtype=np.int64)
    pending = np.zeros(T, dtype=np.int64)
    capped = np.asarray(available, dtype=np.int64)
    history: list[tuple[int, float, float]] = []
    steps = 0
    start = None
    while True:
        step = plan(cal, done, passes, pending, config, limit=capped, start=start)
        start = step.ability.mean
        history.append((step.used, step.se_pass_at_1, step.se_all_n))
        if step.stop is not None:
            return Replay(done, passes, step.stop, steps, step.categories, history)
        steps += 1
        for task, count in step.queue.items():
            for _ in range(count):
                result = outcome(task, int(done[task]))
                done[task] += 1
                passes[task] += bool(result)
