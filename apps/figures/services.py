"""Writes of the figures app: compute a campaign's stored figures ahead of the first page that shows them.

A page stores what it had to compute (apps.figures.tables.cached), so this is not needed for
correctness: it moves the work from the first viewer after a change to the moment of the change
(a finished campaign, an import, an upgrade), so that viewer — a fresh server process included —
reads stored rows.
"""

from __future__ import annotations

from collections.abc import Iterable

from apps.campaigns.models import Campaign
from apps.figures import noise
from apps.figures import selectors as figures

__all__ = ["figures_refresh"]


def figures_refresh(*, campaign_ids: Iterable[int]) -> int:
    """Compute and store the figures every dashboard page reads per campaign at its current summaries.

    Side effects: StoredFigure rows (per-task table, figures over every task, pass^k curves,
    per-domain figures, noise floors) of each campaign whose stored row is missing or older than its
    summaries, and the default leaderboard of each of their teams (every campaign of the team but
    harness checks, by all-N); nothing where the rows are current. Returns the number of campaigns read.
    """
    campaigns = list(Campaign.objects.filter(pk__in=list(campaign_ids)).select_related("price_sheet"))
    tables = figures.per_task_tables(campaigns)
    figures.preload_campaign_figures(tables, campaigns, "figures", "curves", "domains")
    for campaign in campaigns:
        figures.campaign_figures(tables, campaign)
        figures.pass_hat_curves(tables, campaign)
        figures.domain_figures(tables, campaign)
        noise.campaign_noise(tables, campaign)
    for team_id in sorted({c.team_id for c in campaigns}):
        # The leaderboard a member of the team opens first: every campaign of the team but the
        # harness checks, over every task, ranked by all-N (its default sort). Its bands and
        # reversals span the team's campaigns, so they are stored per set, not per campaign.
        ranked = [
            c
            for c in Campaign.objects.filter(team_id=team_id).select_related("agent")
            if not c.is_harness_check
        ]
        figures.leaderboard_rows(ranked, rank_by=figures.rank_metric("alln"))
    return len(campaigns)
