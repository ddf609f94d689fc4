"""Writes of the dashboard: the external benchmark scores users enter beside the leaderboard."""

from __future__ import annotations

from apps.campaigns.models import Campaign
from apps.dashboard.models import ExternalScore


def external_score_save(*, campaign: Campaign, benchmark: str, score: float, actor) -> ExternalScore:
    """Store the published `score` of `campaign` on `benchmark`, replacing an earlier one; records who entered it.

    Side effects: creates or updates one ExternalScore row. The caller checks that `actor` may see
    the campaign and holds the operator role.
    """
    entry, _ = ExternalScore.objects.update_or_create(
        campaign=campaign, benchmark=benchmark, defaults={"score": score, "entered_by": actor}
    )
    return entry
