"""Calibrating the item response model (``model.py``) on stored campaigns of one suite.

Fit: maximum a posteriori of all parameters at once — abilities theta (campaigns x dimensions),
consistencies k and random-effect spreads s (campaigns), discriminations a and difficulties b
(tasks) — with weak priors that only pin the scale and keep sparse tasks finite: theta ~ N(0, 1)
per dimension, a ~ N(1, 1) (negative values allowed, so a task where better campaigns do worse
shows up as such), b ~ N(0, 3^2), log k ~ N(0, 0.5^2), log s ~ N(log 0.5, 1). The optimiser is
SciPy's L-BFGS-B (``scipy.optimize.minimize``) on the exact gradient of the quadrature
likelihood; nothing here is a hand-rolled optimiser. Measured (bench/adaptive.py): 16 campaigns
x 500 tasks (8,000 cells), both dimension choices, 7.5 s of CPU on this machine.

Dimensions: ``"auto"`` fits one ability for the whole suite and, where the data allow (every
domain with at least ``MIN_TASKS_PER_DOMAIN`` calibrated tasks and at least
``MIN_CAMPAIGNS_PER_DOMAIN`` campaigns), one per domain, and keeps the one with the lower BIC
(cells as observations). The result says which and why (``Calibration.dimension_note``).

Libraries considered: girth and catsim fit dichotomous response matrices (one response per
person and item); our cells are binomial with a shared per-cell effect, which neither models,
so the model is written out here and optimised by SciPy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from tb_engine.irt.model import QUADRATURE, cell_terms

MIN_TASKS_PER_DOMAIN = 8
MIN_CAMPAIGNS_PER_DOMAIN = 5
MIN_CAMPAIGNS = 3
THETA_SD = 1.0
A_MEAN, A_SD = 1.0, 1.0
B_SD = 3.0
LOG_S_MEAN, LOG_S_SD = math.log(0.5), 1.0
PRIOR_WIDENING = 2.0  # a new campaign may lie beyond the calibrated ones: its prior sd is doubled
LOADING_SD = 0.5  # latent factor loadings ~ N(0, 0.5^2), factors ~ N(0, 1)
LATENT_FACTORS = (
    0  # tried by default when > 0; 2 factors lost on BIC on the 500-task bench (docs/adaptive.md)
)
LOG_K_SD = 0.5  # log consistency ~ N(0, 0.5^2): pins the product k_j a_t's scale on the tasks' side
SINGLE = "all tasks"
# Relative objective change at which L-BFGS-B stops: ~0.01 log-likelihood units at this size,
# far below what moves an ability or a difficulty visibly.
FTOL = 1e-7


class CalibrationError(ValueError):
    """The cells cannot be calibrated (too few campaigns, malformed columns)."""


@dataclass(frozen=True)
class Calibration:
    """A fitted item bank: per-task (a, b), per-campaign abilities, the ability prior, s."""

    task_ids: tuple[str, ...]
    task_domains: tuple[str, ...]
    dimensions: tuple[str, ...]  # (SINGLE,) or domain names
    task_dimension: np.ndarray  # (tasks,) index into dimensions
    discrimination: np.ndarray  # a, (tasks,)
    difficulty: np.ndarray  # b, (tasks,)
    discrimination_se: np.ndarray
    difficulty_se: np.ndarray
    residual_sd: float  # typical s_j (geometric mean over campaigns)
    campaigns: tuple[str, ...]
    abilities: np.ndarray  # (campaigns, dimensions)
    consistency: np.ndarray  # k_j, (campaigns,)
    residual_sds: np.ndarray  # s_j, (campaigns,)
    ability_mean: np.ndarray  # prior for a new campaign, (dimensions + factors,)
    ability_cov: np.ndarray  # (dimensions + factors, dimensions + factors)
    log_consistency_prior: tuple[float, float]  # (mean, sd) of log k for a new campaign
    log_residual_prior: tuple[float, float]  # (mean, sd) of log s for a new campaign
    log_likelihood: float
    n_parameters: int
    n_cells: int
    bic: float
    dimension_note: str
    seconds: float = 0.0
    alternatives: dict[str, float] = field(default_factory=dict)  # model choice -> BIC
    loadings: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (tasks, factors)
    factors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (campaigns, factors)

    @property
    def n_factors(self) -> int:
        return int(self.loadings.shape[1]) if self.loadings.ndim == 2 else 0

    @property
    def n_tasks(self) -> int:
        return len(self.task_ids)

    def task_index(self) -> dict[str, int]:
        return {task_id: i for i, task_id in enumerate(self.task_ids)}

    def negative_discrimination(self) -> list[str]:
        """Tasks whose fitted discrimination is below zero: better campaigns do worse on them."""
        return [t for t, a in zip(self.task_ids, self.discrimination) if a < 0]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (lists and numbers) for storage outside the engine."""
        return {
            "task_ids": list(self.task_ids),
            "task_domains": list(self.task_domains),
            "dimensions": list(self.dimensions),
            "task_dimension": [int(d) for d in self.task_dimension],
            "discrimination": [float(x) for x in self.discrimination],
            "difficulty": [float(x) for x in self.difficulty],
            "discrimination_se": [float(x) for x in self.discrimination_se],
            "difficulty_se": [float(x) for x in self.difficulty_se],
            "residual_sd": float(self.residual_sd),
            "campaigns": list(self.campaigns),
            "abilities": [[float(x) for x in row] for row in self.abilities],
            "consistency": [float(x) for x in self.consistency],
            "residual_sds": [float(x) for x in self.residual_sds],
            "log_consistency_prior": [float(x) for x in self.log_consistency_prior],
            "log_residual_prior": [float(x) for x in self.log_residual_prior],
            "ability_mean": [float(x) for x in self.ability_mean],
            "ability_cov": [[float(x) for x in row] for row in self.ability_cov],
            "log_likelihood": float(self.log_likelihood),
            "n_parameters": int(self.n_parameters),
            "n_cells": int(self.n_cells),
            "bic": float(self.bic),
            "dimension_note": self.dimension_note,
            "seconds": float(self.seconds),
            "alternatives": {k: float(v) for k, v in self.alternatives.items()},
            "loadings": [[float(x) for x in row] for row in self.loadings] if self.n_factors else [],
            "factors": [[float(x) for x in row] for row in self.factors] if self.n_factors else [],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        """Inverse of ``to_dict``."""
        dims = len(data["ability_mean"])
        return cls(
            task_ids=tuple(data["task_ids"]),
            task_domains=tuple(data["task_domains"]),
            dimensions=tuple(data["dimensions"]),
            task_dimension=np.asarray(data["task_dimension"], dtype=np.int64),
            discrimination=np.asarray(data["discrimination"], dtype=np.float64),
            difficulty=np.asarray(data["difficulty"], dtype=np.float64),
            discrimination_se=np.asarray(data["discrimination_se"], dtype=np.float64),
            difficulty_se=np.asarray(data["difficulty_se"], dtype=np.float64),
            residual_sd=float(data["residual_sd"]),
            campaigns=tuple(data["campaigns"]),
            abilities=np.asarray(data["abilities"], dtype=np.float64).reshape(-1, len(data["dimensions"])),
            consistency=np.asarray(data["consistency"], dtype=np.float64),
            residual_sds=np.asarray(data["residual_sds"], dtype=np.float64),
            log_consistency_prior=(
                float(data["log_consistency_prior"][0]),
                float(data["log_consistency_prior"][1]),
            ),
            log_residual_prior=(float(data["log_residual_prior"][0]), float(data["log_residual_prior"][1])),
            ability_mean=np.asarray(data["ability_mean"], dtype=np.float64),
            ability_cov=np.asarray(data["ability_cov"], dtype=np.float64).reshape(dims, dims),
            log_likelihood=float(data["log_likelihood"]),
            n_parameters=int(data["n_parameters"]),
            n_cells=int(data["n_cells"]),
            bic=float(data["bic"]),
            dimension_note=str(data["dimension_note"]),
            seconds=float(data.get("seconds", 0.0)),
            alternatives=dict(data.get("alternatives", {})),
            loadings=_matrix(data.get("loadings"), len(data["task_ids"])),
            factors=_matrix(data.get("factors"), len(data["campaigns"])),
        )


def _matrix(rows: Any, height: int) -> np.ndarray:
    if not rows or not rows[0]:
        return np.zeros((height, 0))
    return np.asarray(rows, dtype=np.float64).reshape(height, -1)


@dataclass(frozen=True)
class _Cells:
    campaign: np.ndarray
    task: np.ndarray
    n: np.ndarray
    c: np.ndarray
    campaigns: tuple[str, ...]
    task_ids: tuple[str, ...]
    task_domains: tuple[str, ...]


def _cells(frame: pd.DataFrame) -> _Cells:
    missing = [col for col in ("campaign", "task_id", "domain", "n", "c") if col not in frame.columns]
    if missing:
        raise CalibrationError(f"cells: missing column(s) {', '.join(missing)}")
    table = frame[frame["n"] > 0].copy()
    if ((table["c"] < 0) | (table["c"] > table["n"])).any():
        raise CalibrationError("cells: every c must be between 0 and n")
    table["campaign"] = table["campaign"].astype(str)
    table["task_id"] = table["task_id"].astype(str)
    campaigns = tuple(sorted(table["campaign"].unique()))
    domains = table.groupby("task_id")["domain"].first()
    task_ids = tuple(sorted(domains.index))
    if len(campaigns) < MIN_CAMPAIGNS:
        raise CalibrationError(
            f"cells: {len(campaigns)} campaign(s) with done attempts; calibration needs at least {MIN_CAMPAIGNS}"
        )
    campaign_index = {name: i for i, name in enumerate(campaigns)}
    task_index = {task_id: i for i, task_id in enumerate(task_ids)}
    return _Cells(
        campaign=table["campaign"].map(campaign_index).to_numpy(np.int64),
        task=table["task_id"].map(task_index).to_numpy(np.int64),
        n=table["n"].to_numpy(np.float64),
        c=table["c"].to_numpy(np.float64),
        campaigns=campaigns,
        task_ids=task_ids,
        task_domains=tuple(str(domains[t]) for t in task_ids),
    )


@dataclass(frozen=True)
class _Layout:
    """Where each parameter block sits in the optimiser's vector."""

    J: int
    T: int
    D: int
    K: int  # latent factors beyond the named dimensions

    @property
    def size(self) -> int:
        return self.J * self.D + 2 * self.T + 2 * self.J + self.T * self.K + self.J * self.K

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        """x split into theta, a, b, log_k, log_s, loadings (T x K) and factors (J x K)."""
        J, T, D, K = self.J, self.T, self.D, self.K
        at = 0
        blocks = []
        for width in (J * D, T, T, J, J, T * K, J * K):
            blocks.append(x[at : at + width])
            at += width
        theta, a, b, log_k, log_s, loadings, factors = blocks
        return theta, a, b, log_k, log_s, loadings.reshape(T, K), factors.reshape(J, K)


def _initial(cells: _Cells, layout: _Layout) -> np.ndarray:
    """Abilities from campaign pass rates, difficulties from task pass rates, a = 1, s = 0.5."""
    J, T, D, K = layout.J, layout.T, layout.D, layout.K

    def logit_rate(index: np.ndarray, size: int) -> np.ndarray:
        passes = np.bincount(index, weights=cells.c, minlength=size)
        trials = np.bincount(index, weights=cells.n, minlength=size)
        rate = (passes + 0.5) / (trials + 1.0)
        return np.log(rate / (1.0 - rate))

    campaign_logit = logit_rate(cells.campaign, J)
    spread = campaign_logit.std() or 1.0
    theta = np.repeat(((campaign_logit - campaign_logit.mean()) / spread)[:, None], D, axis=1)
    b = -logit_rate(cells.task, T)
    a = np.ones(T)
    # Factors start small and not at zero (zero is a saddle point of the product).
    rng = np.random.default_rng(0)
    loadings = 0.1 * rng.standard_normal(T * K)
    factors = 0.1 * rng.standard_normal(J * K)
    return np.concatenate([theta.ravel(), a, b, np.zeros(J), np.full(J, LOG_S_MEAN), loadings, factors])


def _linear(
    cells: _Cells, layout: _Layout, task_dimension: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per cell: the linear predictor, the campaign's k, centred ability, ability slot and s."""
    theta, a, b, log_k, log_s, loadings, factors = layout.unpack(x)
    slot = cells.campaign * layout.D + task_dimension[cells.task]
    k_cell = np.exp(log_k)[cells.campaign]
    centred = theta[slot] - b[cells.task]
    latent = (loadings[cells.task] * factors[cells.campaign]).sum(axis=1) if layout.K else 0.0
    inner = a[cells.task] * centred + latent
    return k_cell * inner, k_cell, centred, slot, np.exp(log_s)[cells.campaign]


def _fit(
    cells: _Cells, task_dimension: np.ndarray, layout: _Layout, start: np.ndarray | None = None
) -> tuple[np.ndarray, float, bool]:
    J, T, D, K = layout.J, layout.T, layout.D, layout.K

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        theta, a, b, log_k, log_s, loadings, factors = layout.unpack(x)
        eta, k_cell, centred, slot, s_cell = _linear(cells, layout, task_dimension, x)
        a_cell = a[cells.task]
        terms = cell_terms(eta, s_cell, cells.n, cells.c, QUADRATURE, second=False)
        value = -terms.log_lik.sum()
        value += 0.5 * (theta @ theta) / THETA_SD**2
        value += 0.5 * ((a - A_MEAN) ** 2).sum() / A_SD**2 + 0.5 * (b @ b) / B_SD**2
        value += 0.5 * (log_k @ log_k) / LOG_K_SD**2
        value += 0.5 * ((log_s - LOG_S_MEAN) ** 2).sum() / LOG_S_SD**2
        g = terms.d_eta
        gk = g * k_cell
        grad = [
            -np.bincount(slot, weights=gk * a_cell, minlength=J * D) + theta / THETA_SD**2,
            -np.bincount(cells.task, weights=gk * centred, minlength=T) + (a - A_MEAN) / A_SD**2,
            np.bincount(cells.task, weights=gk * a_cell, minlength=T) + b / B_SD**2,
            -np.bincount(cells.campaign, weights=g * eta, minlength=J) + log_k / LOG_K_SD**2,
            -np.bincount(cells.campaign, weights=terms.d_s * s_cell, minlength=J)
            + (log_s - LOG_S_MEAN) / LOG_S_SD**2,
        ]
        if K:
            value += 0.5 * (loadings * loadings).sum() / LOADING_SD**2 + 0.5 * (factors * factors).sum()
            grad_loadings = np.stack(
                [
                    -np.bincount(cells.task, weights=gk * factors[cells.campaign, f], minlength=T)
                    for f in range(K)
                ],
                axis=1,
            )
            grad_factors = np.stack(
                [
                    -np.bincount(cells.campaign, weights=gk * loadings[cells.task, f], minlength=J)
                    for f in range(K)
                ],
                axis=1,
            )
            grad.append((grad_loadings + loadings / LOADING_SD**2).ravel())
            grad.append((grad_factors + factors).ravel())
        return float(value), np.concatenate(grad)

    x0 = _initial(cells, layout) if start is None else start
    bounds = (
        [(-8.0, 8.0)] * (J * D)
        + [(-6.0, 8.0)] * T
        + [(-12.0, 12.0)] * T
        + [(-2.5, 2.5)] * J
        + [(math.log(0.02), 1.5)] * J
        + [(-5.0, 5.0)] * (T * K + J * K)
    )
    result = minimize(
        objective,
        x0,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": 3000, "maxcor": 20, "ftol": FTOL},
    )
    return result.x, float(-result.fun), bool(result.success)


def _item_standard_errors(
    cells: _Cells, x: np.ndarray, task_dimension: np.ndarray, layout: _Layout
) -> tuple[np.ndarray, np.ndarray]:
    """Per-task SE of (a, b) from the 2x2 observed information with everything else held at the fit."""
    T = layout.T
    _, a, _, _, _, _, _ = layout.unpack(x)
    eta, k_cell, centred, _, s_cell = _linear(cells, layout, task_dimension, x)
    a_cell = a[cells.task]
    terms = cell_terms(eta, s_cell, cells.n, cells.c, QUADRATURE)
    w = -terms.d2_eta  # observed information in eta (>= 0 up to quadrature error)
    g = terms.d_eta
    # eta = k a (theta - b): d/da = k centred, d/db = -k a; d2 eta / da db = -k.
    i_aa = np.bincount(cells.task, weights=w * (k_cell * centred) ** 2, minlength=T) + 1 / A_SD**2
    i_bb = np.bincount(cells.task, weights=w * (k_cell * a_cell) ** 2, minlength=T) + 1 / B_SD**2
    i_ab = np.bincount(cells.task, weights=-w * k_cell**2 * centred * a_cell + g * k_cell, minlength=T)
    det = i_aa * i_bb - i_ab**2
    safe = np.where(det > 1e-12, det, np.nan)
    return np.sqrt(np.abs(i_bb / safe)), np.sqrt(np.abs(i_aa / safe))


def _ability_prior(abilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of the calibration's abilities, shrunk towards equal correlation.

    This is the prior of a new campaign's ability: with a few campaigns the sample covariance is
    noisy, so it is blended (one part in four) with the matrix of the same variances and the
    average correlation, and never narrower than a tenth of the fitted scale.
    """
    mean = abilities.mean(axis=0)
    J, D = abilities.shape
    sample = np.cov(abilities, rowvar=False).reshape(D, D) if J > 1 else np.eye(D)
    variances = np.clip(np.diag(sample), 0.1, None)
    sd = np.sqrt(variances)
    if D > 1:
        correlation = sample / np.outer(
            np.sqrt(np.clip(np.diag(sample), 1e-12, None)), np.sqrt(np.clip(np.diag(sample), 1e-12, None))
        )
        off = correlation[~np.eye(D, dtype=bool)]
        target = np.full((D, D), float(np.clip(off.mean(), 0.0, 0.95)))
        np.fill_diagonal(target, 1.0)
        blended = 0.75 * np.clip(correlation, -1, 1) + 0.25 * target
        np.fill_diagonal(blended, 1.0)
        cov = blended * np.outer(sd, sd)
    else:
        cov = np.diag(variances)
    # Sampling error of the mean of J abilities: a new campaign is one more draw, not the mean.
    cov = cov * (1.0 + 1.0 / max(J, 1)) * PRIOR_WIDENING**2
    return mean, cov


def _spread_prior(values: np.ndarray) -> tuple[float, float]:
    """(mean, sd) of a per-campaign log parameter, the sd inflated like the ability prior and >= 0.15."""
    sd = float(values.std(ddof=1)) if values.size > 1 else 0.5
    return float(values.mean()), max(sd * math.sqrt(1.0 + 1.0 / max(values.size, 1)), 0.15) * PRIOR_WIDENING


def _fit_dimensions(
    cells: _Cells, by_domain: bool, factors: int = 0, warm: Calibration | None = None
) -> Calibration:
    if by_domain:
        dimensions = tuple(sorted(set(cells.task_domains)))
        lookup = {name: i for i, name in enumerate(dimensions)}
        task_dimension = np.asarray([lookup[d] for d in cells.task_domains], dtype=np.int64)
    else:
        dimensions = (SINGLE,)
        task_dimension = np.zeros(len(cells.task_ids), dtype=np.int64)
    J, T, D = len(cells.campaigns), len(cells.task_ids), len(dimensions)
    layout = _Layout(J=J, T=T, D=D, K=factors)
    start = None
    if warm is not None:  # a simpler fit: its abilities copied to every dimension, small factors
        theta0 = (
            np.repeat(warm.abilities[:, :1], D, axis=1) if warm.abilities.shape[1] != D else warm.abilities
        )
        fresh = _initial(cells, layout)
        _, _, _, _, _, loadings0, factors0 = layout.unpack(fresh)
        start = np.concatenate(
            [
                theta0.ravel(),
                warm.discrimination,
                warm.difficulty,
                np.log(warm.consistency),
                np.log(warm.residual_sds),
                loadings0.ravel(),
                factors0.ravel(),
            ]
        )
    x, _, _ = _fit(cells, task_dimension, layout, start)
    theta_flat, a, b, log_k, log_s, loadings, latent = layout.unpack(x)
    theta = theta_flat.reshape(J, D)
    eta, _, _, _, s_cell = _linear(cells, layout, task_dimension, x)
    log_lik = float(cell_terms(eta, s_cell, cells.n, cells.c, QUADRATURE).log_lik.sum())
    k = layout.size
    bic = -2.0 * log_lik + k * math.log(max(len(cells.n), 1))
    se_a, se_b = _item_standard_errors(cells, x, task_dimension, layout)
    mean, cov = _ability_prior(np.concatenate([theta, latent], axis=1))
    return Calibration(
        task_ids=cells.task_ids,
        task_domains=cells.task_domains,
        dimensions=dimensions,
        task_dimension=task_dimension,
        discrimination=a,
        difficulty=b,
        discrimination_se=se_a,
        difficulty_se=se_b,
        residual_sd=float(np.exp(log_s.mean())),
        campaigns=cells.campaigns,
        abilities=theta,
        consistency=np.exp(log_k),
        residual_sds=np.exp(log_s),
        ability_mean=mean,
        ability_cov=cov,
        log_consistency_prior=_spread_prior(log_k),
        log_residual_prior=_spread_prior(log_s),
        log_likelihood=log_lik,
        n_parameters=k,
        n_cells=len(cells.n),
        bic=bic,
        dimension_note="",
        loadings=loadings,
        factors=latent,
    )


def domains_supported(cells: pd.DataFrame) -> tuple[bool, str]:
    """Whether the data allow one ability per domain, and why (not)."""
    table = cells[cells["n"] > 0]
    domains = table.groupby("domain")
    if domains.ngroups < 2:
        return False, "one domain only"
    for domain, group in domains:
        tasks, campaigns = group["task_id"].nunique(), group["campaign"].nunique()
        if tasks < MIN_TASKS_PER_DOMAIN:
            return False, f"domain {domain} has {tasks} calibrated task(s) (< {MIN_TASKS_PER_DOMAIN})"
        if campaigns < MIN_CAMPAIGNS_PER_DOMAIN:
            return False, f"domain {domain} has {campaigns} campaign(s) (< {MIN_CAMPAIGNS_PER_DOMAIN})"
    return True, f"{domains.ngroups} domains, each with ≥ {MIN_TASKS_PER_DOMAIN} tasks"


def _label(cal: Calibration) -> str:
    named = "one per domain" if len(cal.dimensions) > 1 else "one ability"
    return f"{named} + {cal.n_factors} latent factor(s)" if cal.n_factors else named


def calibrate(cells: pd.DataFrame, *, dimensions: str = "auto", factors: int | None = None) -> Calibration:
    """Fit the model on cells (columns campaign, task_id, domain, n, c).

    ``dimensions``: auto | single | domain. ``factors``: latent factors beyond the named
    dimensions (None: try LATENT_FACTORS on the better of single / per-domain and keep it if
    its BIC is lower).
    """
    started = time.perf_counter()
    if dimensions not in ("auto", "single", "domain"):
        raise CalibrationError(f"dimensions: must be auto, single or domain, got {dimensions!r}")
    parsed = _cells(cells)
    supported, why = domains_supported(cells)
    if dimensions == "domain" and not supported:
        raise CalibrationError(f"dimensions: one per domain is not supported by the data ({why})")
    candidates: list[Calibration] = []
    first = factors or 0
    if dimensions in ("auto", "single"):
        candidates.append(_fit_dimensions(parsed, by_domain=False, factors=first))
    if dimensions == "domain" or (dimensions == "auto" and supported):
        candidates.append(
            _fit_dimensions(parsed, by_domain=True, factors=first, warm=candidates[0] if candidates else None)
        )
    best = min(candidates, key=lambda cal: cal.bic)
    if factors is None and LATENT_FACTORS and len(parsed.campaigns) > LATENT_FACTORS + 2:
        candidates.append(
            _fit_dimensions(parsed, by_domain=len(best.dimensions) > 1, factors=LATENT_FACTORS, warm=best)
        )
        best = min(candidates, key=lambda cal: cal.bic)
    alternatives = {_label(cal): cal.bic for cal in candidates}
    ranked = ", ".join(
        f"{label} {bic:.0f}" for label, bic in sorted(alternatives.items(), key=lambda kv: kv[1])
    )
    if len(best.dimensions) == 1 and dimensions == "auto" and not supported:
        why_named = f"one per domain is not supported ({why})"
    elif len(best.dimensions) > 1:
        why_named = why
    else:
        why_named = "asked for" if dimensions == "single" else "lower BIC than one per domain"
    note = f"{_label(best)} ({why_named}); BIC: {ranked}"
    return replace(
        best, dimension_note=note, alternatives=alternatives, seconds=time.perf_counter() - started
    )


def cells_frame(rows: Sequence[tuple[str, str, str, int, int]]) -> pd.DataFrame:
    """A cells table from (campaign, task_id, domain, n, c) tuples."""
    return pd.DataFrame(list(rows), columns=["campaign", "task_id", "domain", "n", "c"])
