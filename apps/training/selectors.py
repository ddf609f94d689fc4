"""Training pools (SPEC §6), the selectors other apps read: per-task Beta posteriors of a base campaign,
the learning zone or a band of the base pass rate, the reference-campaign filter, the pool file.

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
    MetricsInputError,
    learning_zone,
    posterior_params,
    success_rate,
)
from tb_engine.training.pool import POOL_FORMAT


class EvaluationOnlyRefused(Exception):
    """The base campaign's suite is evaluation-only and no override was given."""


@dataclass(frozen=True)
class Thresholds:
    lo: float = LEARNING_ZONE_LO
    hi: float = LEARNING_ZONE_HI
    q: float = LEARNING_ZONE_Q


SELECT_ZONE = "zone"  # SPEC §6: P(lo < p < hi) >= q under the task's Beta posterior
SELECT_BAND = (
    "band"  # ThinkingBox-Training: the base policy's observed pass rate c/n inside [band_lo, band_hi]
)
SELECTION_METHODS = (SELECT_ZONE, SELECT_BAND)
BAND_LO, BAND_HI = LEARNING_ZONE_LO, LEARNING_ZONE_HI


@dataclass(frozen=True)
class Selection:
    """How the pool is chosen from the base campaign: learning zone or a difficulty band, and optionally
    only tasks a reference campaign solved at least once (an unsolvable task teaches nothing)."""

    method: str = SELECT_ZONE
    band_lo: float = BAND_LO
    band_hi: float = BAND_HI
    reference: Campaign | None = None

    def __post_init__(self) -> None:
        if self.method not in SELECTION_METHODS:
            raise MetricsInputError(f"select: {self.method!r} is not one of {', '.join(SELECTION_METHODS)}")
        if not 0.0 <= self.band_lo <= self.band_hi <= 1.0:
            raise MetricsInputError(
                f"band: need 0 <= band_lo <= band_hi <= 1, got {self.band_lo:g}..{self.band_hi:g}"
            )


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


def selection_table(
    campaign: Campaign, thresholds: Thresholds = Thresholds(), selection: Selection = Selection()
) -> pd.DataFrame:
    """The posterior table plus the base pass rate, band membership, the reference campaign's c/n per task
    (matched by task id; -1 when it did not run the task) and ``selected``: in the zone or in the band
    (per ``selection.method``) and, with a reference, solved by it at least once."""
    table = posterior_table(campaign, thresholds)
    table["rate"] = [
        success_rate(int(n), int(c)) if n else float("nan") for n, c in zip(table["n"], table["c"])
    ]
    table["in_band"] = (
        (table["n"] > 0) & (table["rate"] >= selection.band_lo) & (table["rate"] <= selection.band_hi)
    )
    chosen = table["in_zone"] if selection.method == SELECT_ZONE else table["in_band"]
    if selection.reference is None:
        table["ref_n"], table["ref_c"] = -1, -1
        table["ref_solved"] = True
    else:
        ref = per_task_table(selection.reference)
        counts = {t: (int(n), int(c)) for t, n, c in zip(ref["task_id"], ref["n"], ref["c"])}
        table["ref_n"] = [counts.get(t, (-1, -1))[0] for t in table["task_id"]]
        table["ref_c"] = [counts.get(t, (-1, -1))[1] for t in table["task_id"]]
        table["ref_solved"] = table["ref_c"] >= 1
    table["selected"] = chosen & table["ref_solved"]
    return table


def training_pool(
    campaign: Campaign,
    thresholds: Thresholds = Thresholds(),
    selection: Selection = Selection(),
    *,
    allow_evaluation_only: bool = False,
) -> dict[str, Any]:
    """The pool document (JSON-ready): the selected tasks with posterior summaries, plus provenance."""
    refuse_evaluation_only(campaign, allow_evaluation_only=allow_evaluation_only)
    table = selection_table(campaign, thresholds, selection)
    chosen = table[table["selected"]]
    reference = selection.reference
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
        "selection": {
            "method": selection.method,
            "band": {"lo": selection.band_lo, "hi": selection.band_hi, "of": "base pass rate c/n"},
            "reference_campaign": None
            if reference is None
            else {"id": reference.pk, "name": reference.name, "agent": reference.agent.name},
            "unsolved_by_reference": int((~table["ref_solved"]).sum()),
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
                "pass_rate": float(row["rate"]),
                **({"reference": {"n": int(row["ref_n"]), "c": int(row["ref_c"])}} if reference else {}),
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
    """How many tasks would be in the zone pool for each q (p_zone does not depend on q), reference applied."""
    solved = table["ref_solved"] if "ref_solved" in table else True
    return [int(((table["p_zone"] >= q) & solved).sum()) for q in qs]
