"""The dashboard's own reads: external scores beside the leaderboard.

Figures come from apps.figures.selectors and attempts from apps.attempts.selectors; this module
only holds what the dashboard owns.
"""

from __future__ import annotations

from apps.campaigns.models import Campaign
from apps.dashboard.models import ExternalScore


def external_scores(*, campaigns: list[Campaign]) -> dict[int, dict[str, float]]:
    """Published scores users entered, by campaign pk then benchmark name (one query)."""
    by_campaign: dict[int, dict[str, float]] = {}
    for score in ExternalScore.objects.filter(campaign__in=[c.pk for c in campaigns]):
        by_campaign.setdefault(score.campaign_id, {})[score.benchmark] = score.score
    return by_campaign
