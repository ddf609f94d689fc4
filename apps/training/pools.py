"""Training pools (SPEC §6): per-task Beta posteriors of a base campaign, the learning zone, the pool file.

The figures come from tb_engine.metrics (learning_zone, posterior_params); this module only reads the
campaign's per-task table and shapes the result. A pool is chosen once from the base policy and kept
fixed: the file records the base campaign and the thresholds as provenance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from apps.campaigns.models import Campaign
from apps.figures.selectors import per_task_table
from tb_engine.metrics import (
    LEARNING_ZONE_HI,
    LEARNING_ZONE_LO,
    LEARNING_ZONE_Q,
    learning_zone,
    posterior_params,
)
from tb_engine.training.pool import POOL_FORMAT


class EvaluationOnlyRefused(Exception):
    """The base campaign's suite is evaluation-only and no override was given."""


@dataclass(frozen=True)
class Thresholds:
    lo: float = LEARNING_ZONE_LO
    hi: float = LEARNING_ZONE_HI
    q: float = LEARNING_ZONE_Q


def refuse_evaluation_only(campaign: Campaign, *, allow_evaluation_only: bool) -> None:
    """Raise EvaluationOnlyRefused (saying why) when the campaign's suite may not be trained on."""
    suite = campaign.suite
    if suite.evaluation_only and not allow_evaluation_only:
        raise EvaluationOnlyRefused(
            f"campaign {campaign.pk} ({campaign.name}) ran suite {suite.name} v{suite.version}, which is evaluation-only: "
            "its licence forbids training on its tasks. Pass --allow-evaluation-only to override."
        )


def posterior_table(campaign: Campaign, thresholds: Thresholds = Thresholds()) -> pd.DataFrame:
    """Per task: n, c, Beta(1 + c, 1 + n − c) parameters and mean, P(lo < p < hi), zone membership."""
    frame = per_task_table(campaign)
    zone = learning_zone(
        frame[["task_id", "domain", "n", "c"]], lo=thresholds.lo, hi=thresholds.hi, q=thresholds.q
    )
    params = [posterior_params(int(n), int(c)) for n, c in zip(zone["n"], zone["c"])]
    zone["domain"] = frame["domain"].to_numpy()
    zone["alpha"] = [a for a, _ in params]
    zone["beta"] = [b for _, b in params]
    zone["mean"] = [a / (a + b) for a, b in params]
    return zone.sort_values("task_id", kind="stable").reset_index(drop=True)


def training_pool(
    campaign: Campaign, thresholds: Thresholds = Thresholds(), *, allow_evaluation_only: bool = False
) -> dict[str, Any]:
    """The pool document (JSON-ready): tasks in the learning zone with posterior summaries, plus provenance."""
    refuse_evaluation_only(campaign, allow_evaluation_only=allow_evaluation_only)
    table = posterior_table(campaign, thresholds)
    chosen = table[table["in_zone"]]
    suite = campaign.suite
    return {
        "format": POOL_FORMAT,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "suite": {
            "name": suite.name,
            "version": suite.version,
            "content_hash": suite.content_hash,
            "evaluation_only": suite.evaluation_only,
        },
        "base_campaign": {
            "id": campaign.pk,
            "name": campaign.name,
            "agent": campaign.agent.name,
            "n_attempts": campaign.n_attempts,
        },
        "thresholds": {
            "lo": thresholds.lo,
            "hi": thresholds.hi,
            "q": thresholds.q,
            "prior": "uniform Beta(1, 1)",
        },
        "allow_evaluation_only": bool(allow_evaluation_only),
        "candidates": len(table),
        "tasks": [
            {
                "task_id": row["task_id"],
                "domain": row["domain"],
                "n": int(row["n"]),
                "c": int(row["c"]),
                "posterior": {
                    "alpha": float(row["alpha"]),
                    "beta": float(row["beta"]),
                    "mean": float(row["mean"]),
                },
                "p_zone": float(row["p_zone"]),
            }
            for row in chosen.to_dict("records")
        ],
    }


def write_pool(pool: dict[str, Any], path: str | Path) -> Path:
    """Write a pool document as indented JSON; returns the path."""
    target = Path(path)
    target.write_text(json.dumps(pool, indent=2, sort_keys=False) + "\n")
    return target


def pool_sizes_by_q(table: pd.DataFrame, qs: list[float]) -> list[int]:
    """How many tasks would be in the pool for each q (the table's p_zone does not depend on q)."""
    return [int((table["p_zone"] >= q).sum()) for q in qs]
