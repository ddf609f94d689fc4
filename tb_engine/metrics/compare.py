"""Comparing campaigns (SPEC §5): paired comparison, reversals, rank correlation; learning zone (§6)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from tb_engine.metrics.bootstrap import (
    DEFAULT_REPLICATES,
    percentile_interval,
    replicate_means,
    replicate_sd,
    resample_counts,
)
from tb_engine.metrics.campaign import MetricsInputError, validate_per_task
from tb_engine.metrics.estimators import success_rate
from tb_engine.metrics.noise import MDD_FACTOR
from tb_engine.metrics.posterior import (
    LEARNING_ZONE_HI,
    LEARNING_ZONE_LO,
    LEARNING_ZONE_Q,
    prob_a_beats_b,
    prob_between,
)


def _number(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _delta(value: float | None, lo: float, hi: float, se: float) -> dict[str, Any]:
    """A paired difference with its 95% interval, SE(Δ) and the noise floor MDD = (1.96 + 0.84) SE(Δ)."""
    se_value = _number(se)
    return {
        "value": value,
        "lo": _number(lo),
        "hi": _number(hi),
        "se": se_value,
        "mdd": None if se_value is None else MDD_FACTOR * se_value,
    }


def paired_comparison(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    n_attempts: int,
    seed: int = 0,
    replicates: int = DEFAULT_REPLICATES,
) -> dict[str, Any]:
    """Campaign A minus campaign B on their shared tasks, with a paired task bootstrap."""
    table_a = validate_per_task(a, n_attempts=n_attempts)
    table_b = validate_per_task(b, n_attempts=n_attempts)
    merged = table_a[["task_id", "n", "c"]].merge(
        table_b[["task_id", "n", "c"]], on="task_id", suffixes=("_a", "_b"), how="inner"
    )
    merged = merged.sort_values("task_id", kind="stable").reset_index(drop=True)
    only_a = sorted(set(table_a["task_id"]) - set(merged["task_id"]))
    only_b = sorted(set(table_b["task_id"]) - set(merged["task_id"]))

    rate_a = success_rate(merged["n_a"].to_numpy(), merged["c_a"].to_numpy())
    rate_b = success_rate(merged["n_b"].to_numpy(), merged["c_b"].to_numpy())
    dep_a = ((merged["c_a"] == merged["n_a"]) & (merged["n_a"] == n_attempts)).to_numpy()
    dep_b = ((merged["c_b"] == merged["n_b"]) & (merged["n_b"] == n_attempts)).to_numpy()
    found_a = (merged["c_a"] >= 1).to_numpy()
    found_b = (merged["c_b"] >= 1).to_numpy()

    delta_rate = rate_a - rate_b  # NaN where either side has no done attempt
    delta_dep = dep_a.astype(np.float64) - dep_b.astype(np.float64)
    # The same resampled task sets for both campaigns: that pairing is what narrows the interval.
    counts = resample_counts(len(merged), replicates=replicates, seed=seed)
    values = np.column_stack([delta_rate, delta_dep]) if len(merged) else np.zeros((0, 2))
    means = replicate_means(counts, values)
    lo, hi = percentile_interval(means)
    se = replicate_sd(means)  # SPEC §9: SE(Δ) of the paired task bootstrap; MDD = (1.96 + 0.84) SE

    per_task = []
    for i, (_, row) in enumerate(merged.iterrows()):  # merged has a RangeIndex: i is the row position
        per_task.append(
            {
                "task_id": str(row["task_id"]),
                "n_a": int(row["n_a"]),
                "c_a": int(row["c_a"]),
                "n_b": int(row["n_b"]),
                "c_b": int(row["c_b"]),
                "delta_pass_at_1": _number(delta_rate[i]),
                "dependable_a": bool(dep_a[i]),
                "dependable_b": bool(dep_b[i]),
                "p_a_better": prob_a_beats_b(
                    int(row["n_a"]), int(row["c_a"]), int(row["n_b"]), int(row["c_b"])
                ),
            }
        )

    def mean(values_: np.ndarray) -> float | None:
        kept = values_[~np.isnan(values_)]
        return float(kept.mean()) if kept.size else None

    pass1_a, pass1_b = mean(rate_a), mean(rate_b)
    found_share_a = float(found_a.mean()) if len(merged) else None
    found_share_b = float(found_b.mean()) if len(merged) else None
    sharpening = (
        pass1_a is not None
        and pass1_b is not None
        and found_share_a is not None
        and found_share_b is not None
        and pass1_a > pass1_b
        and found_share_a < found_share_b
    )
    return {
        "tasks": int(len(merged)),
        "only_in_a": only_a,
        "only_in_b": only_b,
        "delta_pass_at_1": _delta(mean(delta_rate), lo[0], hi[0], se[0]),
        "delta_all_n": _delta(mean(delta_dep), lo[1], hi[1], se[1]),
        "pass_at_1": {"a": pass1_a, "b": pass1_b},
        "pass_at_n_observed": {"a": found_share_a, "b": found_share_b},
        "gained": [str(t) for t in merged["task_id"][dep_a & ~dep_b]],
        "lost": [str(t) for t in merged["task_id"][dep_b & ~dep_a]],
        # Higher pass@1 but fewer tasks ever solved: the policy concentrated on what it already could do.
        "sharpening": bool(sharpening),
        "per_task": per_task,
    }


def reversals(campaigns: Mapping[str, tuple[float, float]]) -> list[tuple[str, str]]:
    """Pairs (x, y) with pass@N(x) > pass@N(y) but all-N(x) < all-N(y); input name -> (pass@N, all-N)."""
    names = sorted(campaigns)
    flagged = []
    for x in names:
        for y in names:
            pass_x, all_x = campaigns[x]
            pass_y, all_y = campaigns[y]
            if pass_x > pass_y and all_x < all_y:
                flagged.append((x, y))
    return flagged


def spearman(x: Iterable[float], y: Iterable[float]) -> float | None:
    """Spearman rank correlation with average ranks for ties; pairs with a missing value are dropped."""
    frame = pd.DataFrame({"x": list(x), "y": list(y)}, dtype="float64").dropna()
    if len(frame) < 2:
        return None
    ranks_x = frame["x"].rank(method="average").to_numpy()
    ranks_y = frame["y"].rank(method="average").to_numpy()
    dx, dy = ranks_x - ranks_x.mean(), ranks_y - ranks_y.mean()
    denominator = float(np.sqrt((dx * dx).sum() * (dy * dy).sum()))
    if denominator == 0.0:
        return None  # a constant column has no ranking to correlate
    return float((dx * dy).sum() / denominator)


def learning_zone(
    per_task: pd.DataFrame,
    *,
    lo: float = LEARNING_ZONE_LO,
    hi: float = LEARNING_ZONE_HI,
    q: float = LEARNING_ZONE_Q,
) -> pd.DataFrame:
    """Per task P(lo < p < hi) under Beta(1 + c, 1 + n - c) and whether it reaches q (SPEC §6)."""
    if not 0.0 < q <= 1.0:
        raise MetricsInputError(f"learning_zone: q: must be in (0, 1], got {q!r}")
    if not 0.0 <= lo < hi <= 1.0:
        raise MetricsInputError(f"learning_zone: lo, hi: need 0 <= lo < hi <= 1, got lo={lo!r}, hi={hi!r}")
    n_max = int(per_task["n"].max()) if len(per_task) else 1
    table = validate_per_task(per_task, n_attempts=max(n_max, 1))
    probabilities = [prob_between(int(n), int(c), lo, hi) for n, c in zip(table["n"], table["c"])]
    return pd.DataFrame(
        {
            "task_id": table["task_id"].to_numpy(),
            "n": table["n"].to_numpy(),
            "c": table["c"].to_numpy(),
            "p_zone": probabilities,
            "in_zone": [p >= q for p in probabilities],
        }
    )
