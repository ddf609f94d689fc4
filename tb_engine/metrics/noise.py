"""The noise floor of SPEC §9: standard errors, minimum detectable differences, tied bands, rerun floors.

Three figures, each for pass@1, pass^k and the all-N share (``NOISE_METRICS``):

* **standard error** of a campaign's figure: the standard deviation (ddof 1) of its task-bootstrap
  replicates (fixed seed, ``DEFAULT_REPLICATES`` = 2000 >= 1000), the replicates the 95% intervals
  come from;
* **minimum detectable difference** (MDD) between two campaigns: (1.96 + 0.84) x SE(Δ) — α = 0.05
  two-sided, power 0.8 — with SE(Δ) the standard deviation of the *paired* task bootstrap of the
  difference (the same resampled tasks for both). ``pairwise_floors`` does it for every pair of C
  campaigns at once: one resample of the union of their tasks, one matrix product, one covariance
  matrix (Var(A - B) = Var A + Var B - 2 Cov(A, B)), so a 20-campaign leaderboard costs milliseconds;
* **rerun floor** of one campaign: the MDD a rerun of the same configuration on the same tasks
  would face. Two reruns differ per task only by attempt noise, so the paired bootstrap's SE(Δ) of
  such a pair is, in expectation, sqrt(2 Σ_t v_t) / T, where v_t is the variance of task t's
  per-task estimate across reruns. v_t is read from the task's stored attempts: the expected
  binomial variance of the estimate under the task's Beta(1 + c, 1 + n - c) posterior (SPEC §5's
  prior), in closed form, so a task seen 20/20 still carries the noise a rate of 0.95 would.

Campaigns whose pairwise |Δ| is below the MDD are *tied* (SPEC §9); ``tied_bands`` groups a sorted
list into bands: each row joins the band of the row that opened it when its difference to that
leader stays below their MDD, else it opens the next band.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import betaln, gammaln

from tb_engine.metrics.bootstrap import DEFAULT_REPLICATES, replicate_means, replicate_sd, resample_counts
from tb_engine.metrics.campaign import validate_per_task
from tb_engine.metrics.estimators import pass_hat_k, success_rate

Z_ALPHA = 1.96  # two-sided α = 0.05
Z_POWER = 0.84  # power 0.8
MDD_FACTOR = Z_ALPHA + Z_POWER
# The figures a noise floor is given for, in display order.
NOISE_METRICS = ("pass_at_1", "pass_hat_5", "pass_hat_n", "all_n")
METRIC_LABELS = {
    "pass_at_1": "pass@1",
    "pass_hat_5": "pass^5",
    "pass_hat_n": "pass^N",
    "all_n": "all-N share",
}


def metric_k(metric: str, n_attempts: int) -> int | None:
    """The k behind a noise metric for a campaign of N attempts (None when k > N cannot be estimated)."""
    if metric == "pass_at_1":
        return 1
    if metric == "pass_hat_5":
        return 5 if n_attempts >= 5 else None
    if metric in ("pass_hat_n", "all_n"):
        return int(n_attempts)
    raise KeyError(f"noise metric {metric!r}: choose one of {', '.join(NOISE_METRICS)}")


def depends_on_n(metric: str) -> bool:
    """Whether the figure changes meaning with N (then campaigns of different N are not comparable)."""
    return metric in ("pass_hat_n", "all_n")


def per_task_values(n: np.ndarray, c: np.ndarray, *, metric: str, n_attempts: int) -> np.ndarray:
    """Each task's value of the metric (the leaderboard figure is their mean); NaN where not estimable."""
    n = np.asarray(n, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    if metric == "pass_at_1":
        return np.asarray(success_rate(n, c), dtype=np.float64).reshape(n.shape)
    if metric == "all_n":
        return ((c == n) & (n == n_attempts)).astype(np.float64)
    k = metric_k(metric, n_attempts)
    if k is None:
        return np.full(n.shape, np.nan)
    return np.asarray(pass_hat_k(n, c, k), dtype=np.float64).reshape(n.shape)


def standard_errors(values: np.ndarray, *, replicates: int = DEFAULT_REPLICATES, seed: int = 0) -> np.ndarray:
    """SPEC §9: per column of (tasks x metrics) values, the sd of its task-bootstrap replicate means."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.shape[0] == 0:
        return np.full(values.shape[1], np.nan)
    counts = resample_counts(values.shape[0], replicates=replicates, seed=seed)
    return replicate_sd(replicate_means(counts, values))


def _posterior_moment(a: np.ndarray, b: np.ndarray, power: int) -> np.ndarray:
    """E[p^power] for p ~ Beta(a, b)."""
    return np.exp(betaln(a + power, b) - betaln(a, b))


def rerun_variance(n: np.ndarray, c: np.ndarray, *, metric: str, n_attempts: int) -> np.ndarray:
    """Per task, the variance of its per-task estimate across reruns: E_post[Var(f(C) | p)], C ~ Bin(n, p).

    f is the task's estimator (c/n, C(c, k)/C(n, k), or the all-N indicator) and the posterior is
    Beta(1 + c, 1 + n - c). Since E[f(C) | p] = p^k for pass^k (k = 1 is pass@1) and the all-N
    indicator is pass^N of a complete task, the variance is E_pred[f(C)^2] - E_post[p^(2k)], the
    first term a sum over the beta-binomial predictive. NaN where the task has no estimate (n < k);
    0 for an incomplete task's all-N (it is 0 in every rerun of the same coverage).
    """
    n = np.asarray(n, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    out = np.full(n.shape, np.nan)
    k = metric_k(metric, n_attempts)
    if metric == "all_n":
        out[:] = 0.0
        eligible = n == n_attempts
    elif k is None:
        return out
    else:
        eligible = n >= k
    if k is None or not eligible.any():
        return out
    n_e, c_e = n[eligible].astype(np.float64), c[eligible].astype(np.float64)
    a, b = 1.0 + c_e, 1.0 + n_e - c_e
    top = int(n_e.max())
    j = np.arange(top + 1, dtype=np.float64)[None, :]
    n_col, a_col, b_col = n_e[:, None], a[:, None], b[:, None]
    inside = j <= n_col
    with np.errstate(invalid="ignore", divide="ignore"):
        log_pmf = (
            gammaln(n_col + 1)
            - gammaln(j + 1)
            - gammaln(np.where(inside, n_col - j, 0) + 1)
            + betaln(j + a_col, np.where(inside, n_col - j, 0) + b_col)
            - betaln(a_col, b_col)
        )
    pmf = np.where(inside, np.exp(log_pmf), 0.0)
    # f(j) = C(j, k) / C(n, k) as a running product, zero when j < k.
    steps = np.arange(k, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        factors = (j[..., None] - steps) / (n_col[..., None] - steps)
    f = np.prod(np.where(factors > 0, factors, 0.0), axis=-1)
    predictive_square = (pmf * f * f).sum(axis=1)
    variance = predictive_square - _posterior_moment(a, b, 2 * k)
    out[eligible] = np.maximum(variance, 0.0)
    return out


@dataclass(frozen=True)
class Floor:
    """A standard error and the MDD it implies (MDD_FACTOR x se); None where nothing is estimable."""

    se: float | None
    mdd: float | None
    tasks: int


def _floor(se: float, tasks: int, factor: float = MDD_FACTOR) -> Floor:
    if tasks == 0 or not math.isfinite(se):
        return Floor(se=None, mdd=None, tasks=tasks)
    return Floor(se=float(se), mdd=float(factor * se), tasks=tasks)


def rerun_floor(n: np.ndarray, c: np.ndarray, *, metric: str, n_attempts: int) -> Floor:
    """The MDD between the campaign and a rerun of it on the same tasks: factor x sqrt(2 Σ v_t) / T."""
    variance = rerun_variance(n, c, metric=metric, n_attempts=n_attempts)
    eligible = ~np.isnan(variance)
    tasks = int(eligible.sum())
    if tasks == 0:
        return Floor(se=None, mdd=None, tasks=0)
    return _floor(math.sqrt(2.0 * float(variance[eligible].sum())) / tasks, tasks)


def clears(delta: float | None, mdd: float | None) -> bool | None:
    """Whether |Δ| reaches the floor (SPEC §9); a zero difference never does. None when either is unknown."""
    if delta is None or mdd is None or math.isnan(delta) or math.isnan(mdd):
        return None
    return abs(delta) > 0 and abs(delta) >= mdd


@dataclass(frozen=True)
class PairwiseFloors:
    """Every pair of C campaigns on one metric: point values, SEs, Δ = row - column, SE(Δ) and MDD.

    Matrices are C x C; entries are NaN where a campaign has no value or the pair is not comparable.
    """

    point: np.ndarray
    se: np.ndarray
    delta: np.ndarray
    se_delta: np.ndarray
    mdd: np.ndarray

    def tied(self, i: int, j: int) -> bool:
        """Whether campaigns i and j are tied: a known difference below their MDD (or no difference)."""
        verdict = clears(float(self.delta[i, j]), float(self.mdd[i, j]))
        return verdict is False


def pairwise_floors(
    values: np.ndarray,
    *,
    comparable: np.ndarray | None = None,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    factor: float = MDD_FACTOR,
) -> PairwiseFloors:
    """Paired task-bootstrap floors for every pair of columns of (union tasks x campaigns) values.

    A campaign that did not run a task has NaN there; each replicate then averages each campaign
    over the drawn tasks it ran, so campaigns on the same tasks get exactly the paired bootstrap and
    campaigns on disjoint tasks an independent one. ``comparable`` (C x C bools) blanks pairs whose
    figures mean different things (e.g. all-N of different N).
    """
    values = np.asarray(values, dtype=np.float64)
    tasks, campaigns = values.shape
    nan_square = np.full((campaigns, campaigns), np.nan)
    if tasks == 0 or campaigns == 0:
        empty = np.full(campaigns, np.nan)
        return PairwiseFloors(empty, empty.copy(), nan_square, nan_square.copy(), nan_square.copy())
    with np.errstate(invalid="ignore"):
        eligible = ~np.isnan(values)
        sums = np.where(eligible, values, 0.0).sum(axis=0)
        counted = eligible.sum(axis=0)
        point = np.where(counted > 0, sums / np.where(counted > 0, counted, 1), np.nan)
    counts = resample_counts(tasks, replicates=replicates, seed=seed)
    means = replicate_means(counts, values)
    if not np.isnan(means).any():
        covariance = np.atleast_2d(np.cov(means, rowvar=False, ddof=1))
        diagonal = np.diag(covariance)
        var_delta = diagonal[:, None] + diagonal[None, :] - 2.0 * covariance
        se = np.sqrt(np.maximum(diagonal, 0.0))
    else:
        # Some replicate drew none of a campaign's eligible tasks (tiny slices): pair by pair over
        # the replicates where both have a value.
        var_delta = np.full((campaigns, campaigns), np.nan)
        se = replicate_sd(means)
        for i in range(campaigns):
            for j in range(i, campaigns):
                both = ~np.isnan(means[:, i]) & ~np.isnan(means[:, j])
                if both.sum() > 1:
                    var_delta[i, j] = var_delta[j, i] = float(np.var(means[both, i] - means[both, j], ddof=1))
    se_delta = np.sqrt(np.maximum(var_delta, 0.0))
    delta = point[:, None] - point[None, :]
    unknown = np.isnan(point)[:, None] | np.isnan(point)[None, :]
    if comparable is not None:
        unknown = unknown | ~np.asarray(comparable, dtype=bool)
    se_delta = np.where(unknown, np.nan, se_delta)
    delta = np.where(unknown, np.nan, delta)
    return PairwiseFloors(point=point, se=se, delta=delta, se_delta=se_delta, mdd=factor * se_delta)


def tied_bands(order: Sequence[int], floors: PairwiseFloors) -> dict[int, int]:
    """Band number (1 = first) per campaign index, walking ``order`` (best first) and opening a band
    whenever a campaign is not tied with the current band's leader. Campaigns without a value get none.
    """
    bands: dict[int, int] = {}
    leader: int | None = None
    band = 0
    for index in order:
        if math.isnan(floors.point[index]):
            continue
        if leader is None or not floors.tied(leader, index):
            band += 1
            leader = index
        bands[index] = band
    return bands


def competition_ranks(order: Sequence[int], bands: dict[int, int]) -> dict[int, tuple[int, bool]]:
    """(rank, shared) per campaign: a band's rank is 1 + the campaigns in better bands ("=2" when shared)."""
    sizes: dict[int, int] = {}
    for index in order:
        if index in bands:
            sizes[bands[index]] = sizes.get(bands[index], 0) + 1
    first_rank, running = {}, 1
    for band in sorted(sizes):
        first_rank[band] = running
        running += sizes[band]
    return {index: (first_rank[band], sizes[band] > 1) for index, band in bands.items()}


def union_values(
    tables: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, int]], *, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """(union task ids sorted, union tasks x campaigns values) from (task_ids, n, c, N) per campaign."""
    union = (
        np.unique(np.concatenate([np.asarray(t[0], dtype=object) for t in tables]))
        if tables
        else np.zeros(0, dtype=object)
    )
    values = np.full((len(union), len(tables)), np.nan)
    position = {task: i for i, task in enumerate(union)}
    for column, (task_ids, n, c, n_attempts) in enumerate(tables):
        rows = np.fromiter((position[t] for t in task_ids), dtype=np.int64, count=len(task_ids))
        values[rows, column] = per_task_values(n, c, metric=metric, n_attempts=n_attempts)
    return union, values


def comparable_pairs(n_attempts: Sequence[int], *, metric: str) -> np.ndarray:
    """C x C: which pairs' figures mean the same thing (N-dependent figures need equal N)."""
    ns = np.asarray(n_attempts)
    if not depends_on_n(metric):
        return np.ones((len(ns), len(ns)), dtype=bool)
    return ns[:, None] == ns[None, :]


def noise_report(
    per_task: pd.DataFrame,
    *,
    n_attempts: int,
    by: str | None = "domain",
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
) -> dict[str, dict[str, dict]]:
    """Per scope ("" = every task, then each domain) and NOISE_METRICS: value, SE, rerun floor.

    ``{"": {"pass_at_1": {"value", "se", "rerun_se", "rerun_mdd", "tasks"}, ...}, "retail": {...}}``;
    a metric that cannot be estimated (k > N) is left out.
    """
    table = validate_per_task(per_task, n_attempts=n_attempts)
    scopes = [("", table)]
    if by is not None and by in table.columns:
        scopes += [(str(name), group) for name, group in table.groupby(by, sort=True)]
    metrics = [m for m in NOISE_METRICS if metric_k(m, n_attempts) is not None]
    report: dict[str, dict[str, dict]] = {}
    for scope, group in scopes:
        n, c = group["n"].to_numpy(), group["c"].to_numpy()
        values = np.column_stack([per_task_values(n, c, metric=m, n_attempts=n_attempts) for m in metrics])
        ses = standard_errors(values.reshape(len(group), len(metrics)), replicates=replicates, seed=seed)
        entry = {}
        for position, metric in enumerate(metrics):
            column = values[:, position] if len(group) else np.zeros(0)
            kept = column[~np.isnan(column)]
            rerun = rerun_floor(n, c, metric=metric, n_attempts=n_attempts)
            se = float(ses[position])
            entry[metric] = {
                "value": float(kept.mean()) if kept.size else None,
                "se": None if math.isnan(se) else se,
                "rerun_se": rerun.se,
                "rerun_mdd": rerun.mdd,
                "tasks": int(kept.size),
            }
        report[scope] = entry
    return report


def replicate_spread(
    tables: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, int]],
    *,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
) -> dict[str, dict]:
    """Observed run-to-run spread of replicate campaigns beside the floors the bootstrap predicts.

    Per metric: the replicates' values, their sd (ddof 1) and range, the largest pairwise |Δ|, how
    many of the pairs stay below their paired MDD, the median paired MDD, and the rerun floor and
    the sd it implies for one replicate (rerun SE / sqrt 2) averaged over the replicates.
    """
    n_attempts = {t[3] for t in tables}
    spread: dict[str, dict] = {}
    for metric in NOISE_METRICS:
        if any(metric_k(metric, n) is None for n in n_attempts):
            continue
        _, values = union_values(tables, metric=metric)
        floors = pairwise_floors(
            values,
            comparable=comparable_pairs([t[3] for t in tables], metric=metric),
            replicates=replicates,
            seed=seed,
        )
        known = [float(v) for v in floors.point if not math.isnan(v)]
        pairs = [(i, j) for i in range(len(tables)) for j in range(i + 1, len(tables))]
        deltas = [abs(float(floors.delta[i, j])) for i, j in pairs if not math.isnan(floors.delta[i, j])]
        mdds = [float(floors.mdd[i, j]) for i, j in pairs if not math.isnan(floors.mdd[i, j])]
        reruns = [rerun_floor(t[1], t[2], metric=metric, n_attempts=t[3]) for t in tables]
        rerun_ses = [r.se for r in reruns if r.se is not None]
        rerun_mdds = [r.mdd for r in reruns if r.mdd is not None]
        spread[metric] = {
            "values": [None if math.isnan(v) else float(v) for v in floors.point],
            "sd": float(np.std(known, ddof=1)) if len(known) > 1 else None,
            "range": float(max(known) - min(known)) if known else None,
            "max_abs_delta": max(deltas) if deltas else None,
            "pairs": len(deltas),
            "pairs_below_floor": sum(1 for i, j in pairs if floors.tied(i, j)),
            "median_pair_mdd": float(np.median(mdds)) if mdds else None,
            "rerun_mdd": float(np.mean(rerun_mdds)) if rerun_mdds else None,
            "expected_sd": float(np.mean(rerun_ses)) / math.sqrt(2.0) if rerun_ses else None,
        }
    return spread
