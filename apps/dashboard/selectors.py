"""The dashboard's own reads: external scores beside the leaderboard, an attempt's neighbours.

Figures come from apps.figures.selectors; this module only holds what the dashboard owns or
alone shows.
"""

from __future__ import annotations

from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.dashboard.models import ExternalScore


def external_scores(*, campaigns: list[Campaign]) -> dict[int, dict[str, float]]:
    """Published scores users entered, by campaign pk then benchmark name (one query)."""
    by_campaign: dict[int, dict[str, float]] = {}
    for score in ExternalScore.objects.filter(campaign__in=[c.pk for c in campaigns]):
        by_campaign.setdefault(score.campaign_id, {})[score.benchmark] = score.score
    return by_campaign


def attempt_neighbours(attempt: Attempt) -> tuple[int | None, int | None]:
    """Ids of the previous and next attempt (by index) of the same campaign and task (one query)."""
    siblings = list(
        Attempt.objects.filter(campaign_id=attempt.campaign_id, task_id=attempt.task_id)
        .order_by("index")
        .values_list("id", "index")
    )
    before = [pk for pk, index in siblings if index < attempt.index]
    after = [pk for pk, index in siblings if index > attempt.index]
    return (before[-1] if before else None, after[0] if after else None)
