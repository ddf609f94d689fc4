"""Calibrating the item response model (``model.py``) on stored campaigns of one suite.

Fit: maximum a posteriori of all parameters at once — abilities theta (campaigns x dimensions),
discriminations a and difficulties b (tasks), the random-effect spread s — with weak priors
that only pin the scale and keep sparse tasks finite: theta ~ N(0, 1) per dimension,
a ~ N(1, 1) (negative values allowed, so a task where better campaigns do worse shows up as
such), b ~ N(0, 3^2), log s ~ N(log 0.5, 1). The optimiser is SciPy's L-BFGS-B
(``scipy.optimize.minimize``) on the exact gradient of the quadrature likelihood; nothing here
is a hand-rolled optimiser. Measured: 16 campaigns x 500 tasks (8,000 cells) fit in about a
second per dimension choice on one core (bench/adaptive.py prints the figure).

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
from collections.abc import Sequence
from dataclasses import dataclass, field
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
    ability_mean: np.ndarray  # prior for a new campaign, (dimensions,)
    ability_cov: np.ndarray  # (dimensions, dimensions)
    log_consistency_prior: tuple[float, float]  # (mean, sd) of log k for a new campaign
    log_residual_prior: tuple[float, float]  # (mean, sd) of log s for a new campaign
    log_likelihood: float
    n_parameters: int
    n_cells: int
    bic: float
    dimension_note: str
    seconds: float = 0.0
    alternatives: dict[str, float] = field(default_factory=dict)  # dimension choice -> BIC

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
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        """Inverse of ``to_dict``."""
        dims = len(data["dimensions"])
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
            abilities=np.asarray(data["abilities"], dtype=np.float64).reshape(-1, dims),
            consistency=np.asarray(data["consistency"], dtype=np.float64),
            residual_sds=np.asarray(data["residual_sds"], dtype=np.float64),
            log_consistency_prior=(float(data["log_consistency_prior"][0]), float(data["log_consistency_prior"][1])),
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
        )


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


def _initial(cells: _Cells, dims: int, task_dimension: np.ndarray) -> np.ndarray:
    """Abilities from campaign pass rates, difficulties from task pass rates, a = 1, s = 0.5."""
    J, T = len(cells.campaigns), len(cells.task_ids)

    def logit_rate(index: np.ndarray, size: int) -> np.ndarray:
        passes = np.bincount(index, weights=cells.c, minlength=size)
        trials = np.bincount(index, weights=cells.n, minlength=size)
        rate = (passes + 0.5) / (trials + 1.0)
        return np.log(rate / (1.0 - rate))

    campaign_logit = logit_rate(cells.campaign, J)
    spread = campaign_logit.std() or 1.0
    theta = np.repeat(((campaign_logit - campaign_logit.mean()) / spread)[:, None], dims, axis=1)
    b = -logit_rate(cells.task, T)
    a = np.ones(T)
    return np.concatenate([theta.ravel(), a, b, np.zeros(J), np.full(J, LOG_S_MEAN)])


def _unpack(x: np.ndarray, J: int, T: int, dims: int):
    n_theta = J * dims
    theta = x[:n_theta]
    a = x[n_theta : n_theta + T]
    b = x[n_theta + T : n_theta + 2 * T]
    log_k = x[n_theta + 2 * T : n_theta + 2 * T + J]
    log_s = x[n_theta + 2 * T + J :]
    return theta, a, b, log_k, log_s


def _fit(
    cells: _Cells, task_dimension: np.ndarray, dims: int, start: np.ndarray | None = None
) -> tuple[np.ndarray, float, bool]:
    J, T = len(cells.campaigns), len(cells.task_ids)
    cell_dim = task_dimension[cells.task]
    theta_slot = cells.campaign * dims + cell_dim
    n_theta = J * dims

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        theta, a, b, log_k, log_s = _unpack(x, J, T, dims)
        k_cell = np.exp(log_k)[cells.campaign]
        s_cell = np.exp(log_s)[cells.campaign]
        a_cell, b_cell = a[cells.task], b[cells.task]
        centred = theta[theta_slot] - b_cell
        eta = k_cell * a_cell * centred
        terms = cell_terms(eta, s_cell, cells.n, cells.c, QUADRATURE, second=False)
        value = -terms.log_lik.sum()
        value += 0.5 * (theta @ theta) / THETA_SD**2
        value += 0.5 * ((a - A_MEAN) ** 2).sum() / A_SD**2 + 0.5 * (b @ b) / B_SD**2
        value += 0.5 * (log_k @ log_k) / LOG_K_SD**2
        value += 0.5 * ((log_s - LOG_S_MEAN) ** 2).sum() / LOG_S_SD**2
        g = terms.d_eta
        grad_theta = -np.bincount(theta_slot, weights=g * k_cell * a_cell, minlength=n_theta) + theta / THETA_SD**2
        grad_a = -np.bincount(cells.task, weights=g * k_cell * centred, minlength=T) + (a - A_MEAN) / A_SD**2
        grad_b = np.bincount(cells.task, weights=g * k_cell * a_cell, minlength=T) + b / B_SD**2
        grad_k = -np.bincount(cells.campaign, weights=g * eta, minlength=J) + log_k / LOG_K_SD**2
        grad_s = (
            -np.bincount(cells.campaign, weights=terms.d_s * s_cell, minlength=J)
            + (log_s - LOG_S_MEAN) / LOG_S_SD**2
        )
        return float(value), np.concatenate([grad_theta, grad_a, grad_b, grad_k, grad_s])

    x0 = _initial(cells, dims, task_dimension) if start is None else start
    bounds = (
        [(-8.0, 8.0)] * n_theta
        + [(-6.0, 8.0)] * T
        + [(-12.0, 12.0)] * T
        + [(-2.5, 2.5)] * J
        + [(math.log(0.02), 1.5)] * J
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
    cells: _Cells, x: np.ndarray, task_dimension: np.ndarray, dims: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-task SE of (a, b) from the 2x2 observed information with abilities and s held at the fit."""
    J, T = len(cells.campaigns), len(cells.task_ids)
    theta, a, b, log_k, log_s = _unpack(x, J, T, dims)
    k_cell = np.exp(log_k)[cells.campaign]
    centred = theta[cells.campaign * dims + task_dimension[cells.task]] - b[cells.task]
    a_cell = a[cells.task]
    terms = cell_terms(k_cell * a_cell * centred, np.exp(log_s)[cells.campaign], cells.n, cells.c, QUADRATURE)
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
        correlation = sample / np.outer(np.sqrt(np.clip(np.diag(sample), 1e-12, None)), np.sqrt(np.clip(np.diag(sample), 1e-12, None)))
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


def _fit_dimensions(cells: _Cells, by_domain: bool, single: Calibration | None = None) -> Calibration:
    if by_domain:
        dimensions = tuple(sorted(set(cells.task_domains)))
        lookup = {name: i for i, name in enumerate(dimensions)}
        task_dimension = np.asarray([lookup[d] for d in cells.task_domains], dtype=np.int64)
    else:
        dimensions = (SINGLE,)
        task_dimension = np.zeros(len(cells.task_ids), dtype=np.int64)
    dims = len(dimensions)
    start = None
    if single is not None:  # the single-ability fit, its ability copied to every domain
        theta0 = np.repeat(single.abilities, dims, axis=1).ravel()
        start = np.concatenate(
            [
                theta0,
                single.discrimination,
                single.difficulty,
                np.log(single.consistency),
                np.log(single.residual_sds),
            ]
        )
    x, log_posterior, _ = _fit(cells, task_dimension, dims, start)
    J, T = len(cells.campaigns), len(cells.task_ids)
    theta_flat, a, b, log_k, log_s = _unpack(x, J, T, dims)
    theta = theta_flat.reshape(J, dims)
    cell_eta = (
        np.exp(log_k)[cells.campaign]
        * a[cells.task]
        * (theta_flat[cells.campaign * dims + task_dimension[cells.task]] - b[cells.task])
    )
    log_lik = float(
        cell_terms(cell_eta, np.exp(log_s)[cells.campaign], cells.n, cells.c, QUADRATURE).log_lik.sum()
    )
    k = J * dims + 2 * T + 2 * J
    bic = -2.0 * log_lik + k * math.log(max(len(cells.n), 1))
    se_a, se_b = _item_standard_errors(cells, x, task_dimension, dims)
    mean, cov = _ability_prior(theta)
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


def calibrate(cells: pd.DataFrame, *, dimensions: str = "auto") -> Calibration:
    """Fit the model on cells (columns campaign, task_id, domain, n, c); dimensions auto | single | domain."""
    import time

    started = time.perf_counter()
    if dimensions not in ("auto", "single", "domain"):
        raise CalibrationError(f"dimensions: must be auto, single or domain, got {dimensions!r}")
    parsed = _cells(cells)
    supported, why = domains_supported(cells)
    if dimensions == "domain" and not supported:
        raise CalibrationError(f"dimensions: one per domain is not supported by the data ({why})")
    candidates: list[Calibration] = []
    if dimensions in ("auto", "single"):
        candidates.append(_fit_dimensions(parsed, by_domain=False))
    if dimensions == "domain" or (dimensions == "auto" and supported):
        candidates.append(_fit_dimensions(parsed, by_domain=True, single=candidates[0] if candidates else None))
    best = min(candidates, key=lambda cal: cal.bic)
    alternatives = {", ".join(cal.dimensions) if len(cal.dimensions) > 1 else SINGLE: cal.bic for cal in candidates}
    if len(best.dimensions) > 1:
        note = f"one ability per domain ({why}); BIC {best.bic:.0f} against {min(alternatives.values()) if len(candidates) == 1 else candidates[0].bic:.0f} for a single one"
    elif dimensions == "single":
        note = "a single ability (asked for)"
    elif supported:
        note = f"a single ability: its BIC {best.bic:.0f} beats one per domain ({candidates[-1].bic:.0f})"
    else:
        note = f"a single ability: one per domain is not supported ({why})"
    return _replace(best, dimension_note=note, alternatives=alternatives, seconds=time.perf_counter() - started)


def _replace(cal: Calibration, **changes: Any) -> Calibration:
    from dataclasses import replace

    return replace(cal, **changes)


def cells_frame(rows: Sequence[tuple[str, str, str, int, int]]) -> pd.DataFrame:
    """A cells table from (campaign, task_id, domain, n, c) tuples."""
    return pd.DataFrame(list(rows), columns=["campaign", "task_id", "domain", "n", "c"])
