"""Attempts planner: how many tasks x attempts detect a given difference in pass@1, and what it costs.

The model is the one behind the noise floor (tb_engine.metrics.noise). Two campaigns A and B run T
tasks with N attempts each; the paired estimate of Δpass@1 averages per-task differences, whose
variance has two parts:

    Var(Δ̂) = (σ²_task + 2 σ²_att / N) / T        MDD(T, N) = (1.96 + 0.84) sqrt(Var(Δ̂))

* σ²_att, the per-attempt variance: mean over tasks of E_post[p(1 - p)] under Beta(1 + c, 1 + n - c)
  (one attempt is a Bernoulli draw; two campaigns contribute one such term each);
* σ²_task, how much the true per-task difference varies between tasks: 0 for a rerun or drift
  check of one configuration (a change that shifts every task alike is the smallest one can
  detect), and for an A/B of two configurations estimated from campaign pairs that ran the same
  tasks, as var_t(d̂_t) minus the attempt noise inside it (clipped at 0).

At the pilot's own (T, N) and σ²_task = 0 the MDD equals the campaign's rerun floor for pass@1.
pass^k and all-N are not planned: their definitions change with N.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tb_engine.metrics.noise import MDD_FACTOR

ATTEMPT_OPTIONS = (1, 2, 3, 5, 10, 20, 50)
MODES = ("drift", "ab")


def _posterior_bernoulli_variance(n: np.ndarray, c: np.ndarray) -> np.ndarray:
    """E[p(1 - p)] for p ~ Beta(1 + c, 1 + n - c)."""
    a, b = 1.0 + c, 1.0 + n - c
    return a * b / ((a + b) * (a + b + 1.0))


def attempt_variance(per_task: pd.DataFrame) -> float | None:
    """σ²_att of one campaign: mean over tasks with a done attempt of E_post[p(1 - p)]."""
    frame = per_task[per_task["n"] > 0]
    if frame.empty:
        return None
    n, c = frame["n"].to_numpy(dtype=np.float64), frame["c"].to_numpy(dtype=np.float64)
    return float(_posterior_bernoulli_variance(n, c).mean())


def task_difference_variance(a: pd.DataFrame, b: pd.DataFrame) -> float | None:
    """σ²_task of a pair on their shared tasks: var_t(d̂_t) - mean_t(within-task noise of d̂_t), >= 0."""
    merged = a[["task_id", "n", "c"]].merge(b[["task_id", "n", "c"]], on="task_id", suffixes=("_a", "_b"))
    merged = merged[(merged["n_a"] > 0) & (merged["n_b"] > 0)]
    if len(merged) < 2:
        return None
    n_a, c_a = merged["n_a"].to_numpy(dtype=np.float64), merged["c_a"].to_numpy(dtype=np.float64)
    n_b, c_b = merged["n_b"].to_numpy(dtype=np.float64), merged["c_b"].to_numpy(dtype=np.float64)
    d = c_a / n_a - c_b / n_b
    noise = _posterior_bernoulli_variance(n_a, c_a) / n_a + _posterior_bernoulli_variance(n_b, c_b) / n_b
    return max(0.0, float(np.var(d, ddof=1)) - float(noise.mean()))


@dataclass(frozen=True)
class VarianceComponents:
    """What the plan is computed from: σ²_att (mean over campaigns), σ²_task (mean over pairs, None without a pair)."""

    attempt: float | None
    task: float | None
    campaigns: int
    pairs: int


def variance_components(tables: Sequence[pd.DataFrame]) -> VarianceComponents:
    """σ²_att averaged over the campaigns, σ²_task averaged over every pair that shares two tasks or more."""
    attempts = [v for v in (attempt_variance(t) for t in tables) if v is not None]
    pairs = [
        v
        for i in range(len(tables))
        for j in range(i + 1, len(tables))
        if (v := task_difference_variance(tables[i], tables[j])) is not None
    ]
    return VarianceComponents(
        attempt=float(np.mean(attempts)) if attempts else None,
        task=float(np.mean(pairs)) if pairs else None,
        campaigns=len(tables),
        pairs=len(pairs),
    )


def mdd(
    tasks: int, attempts: int, *, attempt_var: float, task_var: float, factor: float = MDD_FACTOR
) -> float:
    """MDD of Δpass@1 (a share) for T tasks x N attempts in each of the two campaigns."""
    return factor * math.sqrt((task_var + 2.0 * attempt_var / attempts) / tasks)


def tasks_needed(
    target: float, attempts: int, *, attempt_var: float, task_var: float, factor: float = MDD_FACTOR
) -> int:
    """Smallest T whose MDD at N attempts is at most ``target`` (a share > 0)."""
    if target <= 0:
        raise ValueError(f"target: must be a positive difference, got {target!r}")
    return max(1, math.ceil(factor**2 * (task_var + 2.0 * attempt_var / attempts) / target**2 - 1e-9))


@dataclass(frozen=True)
class PlanRow:
    """One N: tasks needed for the target, whether the suite has them, the MDD with every task, the cost."""

    attempts: int
    tasks_needed: int
    feasible: bool  # tasks_needed <= tasks available
    tasks_used: int  # tasks_needed, capped at the tasks available
    mdd_with_all_tasks: float  # MDD at N with every available task
    attempts_per_campaign: int  # tasks_used x N
    cost_per_campaign: float | None  # attempts_per_campaign x cost per attempt (None: unpriced)


def plan(
    target: float,
    *,
    attempt_var: float,
    task_var: float,
    tasks_available: int,
    cost_per_attempt: float | None,
    attempt_options: Iterable[int] = ATTEMPT_OPTIONS,
    factor: float = MDD_FACTOR,
) -> list[PlanRow]:
    """A row per N in ``attempt_options`` (sorted, distinct); the cheapest feasible row reaches the target at least cost."""
    rows = []
    for attempts in sorted({int(a) for a in attempt_options if int(a) >= 1}):
        needed = tasks_needed(target, attempts, attempt_var=attempt_var, task_var=task_var, factor=factor)
        used = min(needed, tasks_available)
        rows.append(
            PlanRow(
                attempts=attempts,
                tasks_needed=needed,
                feasible=needed <= tasks_available,
                tasks_used=used,
                mdd_with_all_tasks=mdd(
                    max(tasks_available, 1),
                    attempts,
                    attempt_var=attempt_var,
                    task_var=task_var,
                    factor=factor,
                ),
                attempts_per_campaign=used * attempts,
                cost_per_campaign=None if cost_per_attempt is None else used * attempts * cost_per_attempt,
            )
        )
    return rows


def cheapest(rows: Sequence[PlanRow]) -> PlanRow | None:
    """The feasible row with the fewest attempts per campaign (None when no N reaches the target)."""
    feasible = [row for row in rows if row.feasible]
    return min(feasible, key=lambda row: (row.attempts_per_campaign, row.attempts)) if feasible else None
