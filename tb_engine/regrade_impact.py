"""The re-grade impact report's figures (issue 29): what a re-grade would change, before it is applied.

Per campaign, pass@1, all-N and cost per dependable task at the verdicts of record and at the
re-graded ones — computed by ``metrics.campaign.campaign_metrics``, the function the stored figures
use, so a Δ here is the change the figures pages will show once the re-grade is applied — and the
ranking of the campaigns by all-N (the default leaderboard's order, pass@1 breaking ties), with
the pairs whose order the re-grade reverses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tb_engine.metrics.campaign import campaign_metrics

FLIP_KINDS = ("pass→fail", "fail→pass", "→unjudged", "unjudged→pass", "unjudged→fail")


def flip_kind(before: str, after: str) -> str:
    """The kind of a verdict change ("" when the verdict stays)."""
    if before == after:
        return ""
    if after == "unjudged":
        return "→unjudged"
    return f"{before}→{after}"


@dataclass(frozen=True)
class PairCounts:
    """One (campaign, task): judged attempts n and passes c, at the verdicts of record and re-graded."""

    n_before: int = 0
    c_before: int = 0
    n_after: int = 0
    c_after: int = 0
    unjudged_before: int = 0
    unjudged_after: int = 0


def _figures(
    counts: Mapping[str, PairCounts], *, after: bool, n_attempts: int, agent_cost: float | None
) -> dict[str, Any]:
    rows = [
        {
            "task_id": task_id,
            "n": pair.n_after if after else pair.n_before,
            "c": pair.c_after if after else pair.c_before,
            "unjudged": pair.unjudged_after if after else pair.unjudged_before,
        }
        for task_id, pair in sorted(counts.items())
    ]
    table = pd.DataFrame(rows, columns=["task_id", "n", "c", "unjudged"])
    # The cost sits on one row: costs() sums the column, and only the campaign total matters.
    table["agent_cost"] = [agent_cost or 0.0] + [0.0] * (len(table) - 1) if len(table) else []
    metrics = campaign_metrics(table, n_attempts=n_attempts, ks=[1], replicates=10)
    cost = metrics["cost"]["cost_per_dependable_task"] if agent_cost is not None else None
    return {
        "pass_at_1": metrics["pass_at_1"]["value"],
        "all_n": metrics["all_n"]["value"],
        "all_n_count": metrics["all_n"]["count"],
        "cost_per_dependable_task": cost,
    }


def _delta(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def campaign_impact(
    counts: Mapping[str, PairCounts], *, n_attempts: int, agent_cost: float | None
) -> dict[str, Any]:
    """One campaign's figures before and after, and their changes."""
    before = _figures(counts, after=False, n_attempts=n_attempts, agent_cost=agent_cost)
    after = _figures(counts, after=True, n_attempts=n_attempts, agent_cost=agent_cost)
    return {
        "before": before,
        "after": after,
        "delta": {key: _delta(before[key], after[key]) for key in before},
    }


def _order(figures: Mapping[str, Mapping[str, Any]]) -> list[str]:
    def key(name: str) -> tuple[float, float, str]:
        row = figures[name]
        return (-(row["all_n"] or 0.0), -(row["pass_at_1"] or 0.0), name)

    return sorted(figures, key=key)


def rank_changes(impacts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Ranks by all-N before and after (1 = top), and the pairs whose order the re-grade reverses."""
    before = _order({name: impact["before"] for name, impact in impacts.items()})
    after = _order({name: impact["after"] for name, impact in impacts.items()})
    rank_before = {name: i + 1 for i, name in enumerate(before)}
    rank_after = {name: i + 1 for i, name in enumerate(after)}
    reversals = [
        (x, y)
        for x in before
        for y in before
        if rank_before[x] < rank_before[y] and rank_after[x] > rank_after[y]
    ]
    return {
        "ranks": {name: {"before": rank_before[name], "after": rank_after[name]} for name in before},
        "reversals": reversals,
    }
