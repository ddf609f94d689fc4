"""The dashboard's own reads: external scores beside the leaderboard; the common ground of campaigns
that ran different tests (apps.dashboard.common_ground).

Figures come from apps.figures.selectors and attempts from apps.attempts.selectors; this module
only holds what the dashboard owns.
"""

from __future__ import annotations

from django.db import connection

from apps.campaigns.models import Campaign
from apps.dashboard.common_ground import CommonGround, GroundRow, common_ground, ranked_order
from apps.dashboard.decide import DEFAULT_BUDGET, DEFAULT_TARGET_PERCENT, Candidate, Decision, decide
from apps.dashboard.models import ExternalScore
from apps.dashboard.verdict import compare_verdict

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_TARGET_PERCENT",
    "Candidate",
    "CommonGround",
    "Decision",
    "GroundRow",
    "common_ground",
    "compare_verdict",
    "decide",
    "external_scores",
    "ranked_order",
]


def external_scores(*, campaigns: list[Campaign]) -> dict[int, dict[str, float]]:
    """Published scores users entered, by campaign pk then benchmark name (one query)."""
    by_campaign: dict[int, dict[str, float]] = {}
    ids = [c.pk for c in campaigns]
    if not ids:
        return by_campaign
    # Written as SQL: read on every leaderboard request, where compiling the ORM query cost more
    # Python than the read cost PostgreSQL. One score per campaign and benchmark (a unique pair).
    table = ExternalScore._meta
    sql = (
        f'SELECT "campaign_id", "benchmark", "score" FROM "{table.db_table}" '
        f'WHERE "campaign_id" IN ({", ".join(["%s"] * len(ids))})'
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, ids)
        for campaign_id, benchmark, score in cursor.fetchall():
            by_campaign.setdefault(campaign_id, {})[benchmark] = score
    return by_campaign
