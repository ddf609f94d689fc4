"""Which tasks behave like broken ones across campaigns: failed by everyone, or failed more by the better campaigns.

Input is a long table, one row per (campaign, task) with n (done attempts) and c (passes); rows with
n = 0 carry no evidence and are ignored. A task's success rate in a campaign is c / n; a campaign's
*rest score* for task t is its mean success rate over its other tasks (pass@1 without t). The
*item–rest correlation* of t is Pearson's r between its success rate and the rest score across the
campaigns that ran it. A discriminating task has r > 0 (better campaigns pass it more); r < 0 means
the campaigns that are better overall fail it more — a task whose golden answer is likely wrong or
whose wording rewards a mistake.

With a handful of campaigns r is noisy (four campaigns give r < 0 for about half of all tasks by
chance), so each r comes with a one-sided permutation p-value: the share of re-pairings of the
task's rates with the campaigns' rest scores whose r is at most the observed one (every permutation
up to seven campaigns, else 2,000 drawn with a fixed seed). Callers flag r < 0 with a small p.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

# Fewer campaigns than this give no evidence either way (r of two points is always ±1).
MIN_CAMPAIGNS = 3
# Up to this many campaigns the permutation test enumerates every permutation (7! = 5,040).
EXACT_UP_TO = 7
PERMUTATIONS = 2000


@dataclass(frozen=True)
class ItemRest:
    task: str
    r: float | None  # None: fewer than MIN_CAMPAIGNS campaigns, or a constant rate or rest score
    campaigns: int  # campaigns that ran the task (n > 0)
    rate: float  # mean success rate over those campaigns
    p_value: float | None = None  # one-sided: P(r_permuted <= r) under random pairing


def _matrix(table: pd.DataFrame) -> pd.DataFrame:
    ran = table[table["n"] > 0]
    rates = ran.assign(rate=ran["c"] / ran["n"])
    return rates.pivot_table(index="campaign", columns="task", values="rate", aggfunc="mean")


def _permutation_p(x: np.ndarray, y: np.ndarray, r: float, seed: int) -> float:
    """Share of re-pairings of x with y whose correlation is at most r (the observed pairing included)."""
    k = len(x)
    if k <= EXACT_UP_TO:
        orders = np.array(list(itertools.permutations(range(k))))
    else:
        rng = np.random.default_rng(seed)
        orders = np.argsort(rng.random((PERMUTATIONS, k)), axis=1)
    dx, dy = x - x.mean(), y - y.mean()
    # Permuting x keeps its spread, so only the cross term changes.
    scale = float(np.sqrt((dx * dx).sum() * (dy * dy).sum()))
    permuted = (dx[orders] @ dy) / scale
    return float(np.mean(permuted <= r + 1e-12))


def item_rest_correlations(
    table: pd.DataFrame, *, min_campaigns: int = MIN_CAMPAIGNS, seed: int = 0
) -> list[ItemRest]:
    """Item–rest correlation per task (columns campaign, task, n, c), with its permutation p-value, in task order."""
    if table.empty:
        return []
    matrix = _matrix(table)
    rates = matrix.to_numpy(dtype=np.float64)
    ran = ~np.isnan(rates)
    filled = np.where(ran, rates, 0.0)
    per_campaign = ran.sum(axis=1, keepdims=True)
    totals = filled.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        rest = np.where(ran & (per_campaign > 1), (totals - filled) / (per_campaign - 1), np.nan)
    usable = ran & ~np.isnan(rest)
    out = []
    for j, task in enumerate(matrix.columns):
        mask = usable[:, j]
        x, y = rates[mask, j], rest[mask, j]
        r, p = None, None
        if mask.sum() >= min_campaigns:
            dx, dy = x - x.mean(), y - y.mean()
            denominator = float(np.sqrt((dx * dx).sum() * (dy * dy).sum()))
            if denominator > 1e-12:
                r = float((dx * dy).sum() / denominator)
                p = _permutation_p(x, y, r, seed + j)
        count = int(ran[:, j].sum())
        out.append(ItemRest(str(task), r, count, float(np.nanmean(rates[:, j])) if count else 0.0, p))
    return out


def failed_everywhere(table: pd.DataFrame, *, min_campaigns: int = MIN_CAMPAIGNS) -> dict[str, int]:
    """Tasks no campaign passed once, over at least ``min_campaigns`` campaigns that ran them: task -> campaigns."""
    ran = table[table["n"] > 0]
    grouped = ran.groupby("task").agg(campaigns=("campaign", "nunique"), passes=("c", "sum"))
    hits = grouped[(grouped["passes"] == 0) & (grouped["campaigns"] >= min_campaigns)]
    return {str(task): int(row.campaigns) for task, row in hits.iterrows()}
