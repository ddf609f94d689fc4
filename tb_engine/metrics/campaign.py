"""Campaign figures of SPEC §5 over a per-task (n, c) table.

The input is one row per task: ``task_id``, ``domain``, optional ``tags`` (list),
``n`` (attempts with status done), ``c`` (passing attempts among them) and optional
``infra_errors``, ``billed_attempts``, ``agent_cost``, ``eval_cost`` and token
columns. ``n_attempts`` is the campaign's N (attempts planned per task).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from tb_engine.metrics.bootstrap import DEFAULT_REPLICATES, bootstrap_means
from tb_engine.metrics.estimators import pass_at_k, pass_hat_k, pass_hat_k_plugin, success_rate

TOKEN_COLUMNS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")


class MetricsInputError(ValueError):
    """The per-task table is malformed; the message names the row, task id and field."""


def _where(index: Hashable, task_id: Any) -> str:
    return f"per_task row {index} (task_id {task_id!r})"


def validate_per_task(per_task: pd.DataFrame, *, n_attempts: int) -> pd.DataFrame:
    """Check columns and counts; return a copy with integer n, c, infra_errors and unjudged (default 0)."""
    if isinstance(n_attempts, bool) or int(n_attempts) != n_attempts or n_attempts < 1:
        raise MetricsInputError(f"n_attempts: must be a positive integer, got {n_attempts!r}")
    missing = [col for col in ("task_id", "n", "c") if col not in per_task.columns]
    if missing:
        raise MetricsInputError(f"per_task: missing column(s) {', '.join(missing)}")
    table = per_task.reset_index(drop=True).copy()
    if "infra_errors" not in table.columns:
        table["infra_errors"] = 0
    if "unjudged" not in table.columns:
        table["unjudged"] = 0  # done but a rubric unanswered (SPEC §2): excluded from n, counted as coverage
    duplicated = table["task_id"][table["task_id"].duplicated()]
    if len(duplicated):
        first = duplicated.index[0]
        raise MetricsInputError(f"{_where(first, table.at[first, 'task_id'])}: task_id: duplicate task id")
    for col in ("n", "c", "infra_errors", "unjudged"):
        table[col] = _counts_column(table, col)
    # Row rules, first offending row first (within a row, c > n before n > N); vectorised because
    # a leaderboard validates a few thousand rows per page load.
    n, c = table["n"].to_numpy(), table["c"].to_numpy()
    bad = (c > n) | (n > n_attempts)
    if bad.any():
        index = int(np.argmax(bad))
        where = _where(table.index[index], table.at[table.index[index], "task_id"])
        if c[index] > n[index]:
            raise MetricsInputError(f"{where}: c: {c[index]} passes exceed n = {n[index]} done attempts")
        raise MetricsInputError(f"{where}: n: {n[index]} done attempts exceed N = {n_attempts}")
    return table


def _counts_column(table: pd.DataFrame, col: str) -> pd.Series:
    """The column as int64 after checking every value is a non-negative integer (first bad row named)."""
    column = table[col]
    if pd.api.types.is_integer_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype):
        negative = column.to_numpy() < 0
        if not negative.any():
            return column.astype(np.int64)
    for index, value in column.items():
        if pd.isna(value) or float(value) != int(value) or int(value) < 0:
            raise MetricsInputError(
                f"{_where(index, table.at[index, 'task_id'])}: {col}: must be a non-negative integer, got {value!r}"
            )
    return column.astype(np.int64)


def _ks(ks: Iterable[int] | None, n_attempts: int) -> list[int]:
    chosen = (1, 5, 10, n_attempts) if ks is None else tuple(ks)
    for k in chosen:
        if isinstance(k, bool) or int(k) != k or k < 1:
            raise MetricsInputError(f"ks: each k must be a positive integer, got {k!r}")
    # k > N can never be estimated (no task has more than N attempts), so it is not listed.
    return sorted({int(k) for k in chosen if k <= n_attempts})


def _number(value: float) -> float | None:
    return None if value is None or np.isnan(value) else float(value)


def _estimate(values: np.ndarray, lo: float, hi: float, task_ids: np.ndarray) -> dict[str, Any]:
    eligible = ~np.isnan(values)
    return {
        "value": _number(float(np.mean(values[eligible]))) if eligible.any() else None,
        "lo": _number(lo),
        "hi": _number(hi),
        "tasks": int(eligible.sum()),
        "excluded": [str(t) for t in task_ids[~eligible]],
    }


def _ratio(numerator: float, denominator: float) -> float | None:
    return None if denominator == 0 else float(numerator) / float(denominator)


def coverage(table: pd.DataFrame, *, n_attempts: int) -> dict[str, Any]:
    """Complete/incomplete tasks, missing attempts, infra errors and unjudged attempts (SPEC §2, §5 coverage)."""
    n = table["n"].to_numpy()
    incomplete = table["task_id"][n < n_attempts]
    return {
        "tasks": int(len(table)),
        "complete_tasks": int((n == n_attempts).sum()),
        "incomplete_tasks": [str(t) for t in incomplete],
        "done_attempts": int(n.sum()),
        "planned_attempts": int(n_attempts * len(table)),
        "missing_attempts": int((n_attempts - n).sum()),
        "infra_errors": int(table["infra_errors"].sum()),
        "unjudged": int(table["unjudged"].sum()),
    }


def _bound(values: np.ndarray) -> float | None:
    return _number(float(np.mean(values))) if len(values) else None


def coverage_bounds(table: pd.DataFrame, *, n_attempts: int, ks: Iterable[int]) -> dict[str, Any]:
    """pass@1, all-N and pass^k if every missing attempt had failed (lo) or passed (hi).

    A task's missing attempts are the N - n planned attempts without a verdict (infra errors,
    unjudged, never run). Filling them in both ways gives every task its full N, so the bounds are
    over all tasks: a task with 1 passing attempt and 19 infra errors (N = 20) reads all-20 in
    [0, 1], pass^1 in [0.05, 1] and pass^20 in [0, 1], never as dependable. With nothing missing,
    lo == hi.
    """
    n = table["n"].to_numpy()
    c = table["c"].to_numpy()
    missing = n_attempts - n
    full = np.full(len(table), n_attempts)
    failed, passed = c, c + missing  # passes with every missing attempt failed / passed
    result: dict[str, Any] = {
        "missing_attempts": int(missing.sum()),
        "pass_at_1": {"lo": _bound(failed / n_attempts), "hi": _bound(passed / n_attempts)},
        "all_n": {
            "lo": _bound((failed == n_attempts).astype(np.float64)),
            "hi": _bound((passed == n_attempts).astype(np.float64)),
        },
        "pass_hat_k": {},
    }
    for k in ks:
        result["pass_hat_k"][k] = {
            "lo": _bound(pass_hat_k(full, failed, k)) if len(table) else None,
            "hi": _bound(pass_hat_k(full, passed, k)) if len(table) else None,
        }
    return result


def costs(table: pd.DataFrame, *, all_n_count: int) -> dict[str, Any]:
    """Agent cost and evaluation overhead kept apart; per attempt, per success, per dependable task."""
    if "billed_attempts" in table.columns:
        billed = int(table["billed_attempts"].sum())
    else:
        # Infra errors and unjudged attempts are billed too (SPEC §5: campaign cost includes them).
        uncounted = sum(int(table[col].sum()) for col in ("infra_errors", "unjudged") if col in table.columns)
        billed = int(table["n"].sum()) + uncounted
    agent = float(table["agent_cost"].sum()) if "agent_cost" in table.columns else None
    evaluation = float(table["eval_cost"].sum()) if "eval_cost" in table.columns else None
    successes = int(table["c"].sum())
    result: dict[str, Any] = {
        "agent_cost": agent,
        "eval_cost": evaluation,
        "billed_attempts": billed,
        "successes": successes,
        "cost_per_attempt": None if agent is None else _ratio(agent, billed),
        "cost_per_success": None if agent is None else _ratio(agent, successes),
        "cost_per_dependable_task": None if agent is None else _ratio(agent, all_n_count),
        "eval_cost_per_attempt": None if evaluation is None else _ratio(evaluation, billed),
        "tokens": {col: int(table[col].sum()) for col in TOKEN_COLUMNS if col in table.columns},
    }
    return result


def campaign_metrics(
    per_task: pd.DataFrame,
    *,
    n_attempts: int,
    ks: Iterable[int] | None = None,
    seed: int = 0,
    replicates: int = DEFAULT_REPLICATES,
) -> dict[str, Any]:
    """Every SPEC §5 figure of one campaign, with 95% task-bootstrap intervals."""
    table = validate_per_task(per_task, n_attempts=n_attempts)
    ks_list = _ks(ks, n_attempts)
    task_ids = table["task_id"].to_numpy()
    n = table["n"].to_numpy()
    c = table["c"].to_numpy()

    dependable = ((c == n) & (n == n_attempts)).astype(np.float64)
    discovered = (c >= 1).astype(np.float64)
    columns = [success_rate(n, c), dependable, discovered, discovered - dependable]
    columns += [pass_at_k(n, c, k) for k in ks_list]
    columns += [pass_hat_k(n, c, k) for k in ks_list]
    values = np.column_stack(columns) if len(table) else np.zeros((0, len(columns)))
    lo, hi = bootstrap_means(values, replicates=replicates, seed=seed)

    all_n_count = int(dependable.sum())
    gap = _estimate(values[:, 3], lo[3], hi[3], task_ids)
    result: dict[str, Any] = {
        "n_attempts": int(n_attempts),
        "ks": ks_list,
        "seed": seed,
        "coverage": coverage(table, n_attempts=n_attempts),
        "pass_at_1": _estimate(values[:, 0], lo[0], hi[0], task_ids),
        "all_n": {**_estimate(values[:, 1], lo[1], hi[1], task_ids), "count": all_n_count},
        "pass_at_n_observed": _estimate(values[:, 2], lo[2], hi[2], task_ids),
        "gap_pp": {key: (None if gap[key] is None else 100.0 * gap[key]) for key in ("value", "lo", "hi")},
        "pass_at_k": {},
        "pass_hat_k": {},
        "pass_hat_k_plugin": {},
    }
    for offset, k in enumerate(ks_list):
        j = 4 + offset
        result["pass_at_k"][k] = _estimate(values[:, j], lo[j], hi[j], task_ids)
        j = 4 + len(ks_list) + offset
        result["pass_hat_k"][k] = _estimate(values[:, j], lo[j], hi[j], task_ids)
        # Over the same tasks as the unbiased pass^k beside it (n_t >= k), never over more.
        plugin = np.where(n >= k, pass_hat_k_plugin(n, c, k), np.nan) if len(table) else np.zeros(0)
        result["pass_hat_k_plugin"][k] = (
            _number(float(np.nanmean(plugin))) if np.any(~np.isnan(plugin)) else None
        )
    result["coverage_bounds"] = coverage_bounds(table, n_attempts=n_attempts, ks=ks_list)
    result["cost"] = costs(table, all_n_count=all_n_count)
    return result


def slice_metrics(
    per_task: pd.DataFrame,
    by: str = "domain",
    *,
    n_attempts: int,
    ks: Iterable[int] | None = None,
    seed: int = 0,
    replicates: int = DEFAULT_REPLICATES,
) -> dict[str, dict[str, Any]]:
    """campaign_metrics per slice value; ``by="tags"`` puts a task in every tag it carries."""
    if by not in per_task.columns:
        raise MetricsInputError(f"slice_metrics: by: per_task has no column {by!r}")
    table = per_task.reset_index(drop=True)
    if by == "tags":
        table = table.assign(
            tags=table["tags"].apply(lambda tags: list(tags) if isinstance(tags, (list, tuple, set)) else [])
        )
        table = table.explode("tags").dropna(subset=["tags"])
    groups: dict[str, dict[str, Any]] = {}
    for value, group in table.groupby(by, sort=True):
        groups[str(value)] = campaign_metrics(
            group.reset_index(drop=True), n_attempts=n_attempts, ks=ks, seed=seed, replicates=replicates
        )
    return groups
