"""Writes of the figures app: compute a campaign's stored figures ahead of the first page that shows them.

A page stores what it had to compute (apps.figures.tables.cached), so this is not needed for
correctness: it moves the work from the first viewer after a change to the moment of the change
(a finished campaign, an import, an upgrade), so that viewer — a fresh server process included —
reads stored rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from apps.campaigns.models import Campaign
from apps.figures import noise
from apps.figures import selectors as figures
from apps.figures.models import FigureRefresh

__all__ = ["figures_refresh", "figures_refresh_claimed"]

# A claim older than this is a worker that died mid-refresh: the next message may take it over.
CLAIM_EXPIRES = timedelta(minutes=10)


def figures_refresh_claimed(*, campaign_id: int) -> bool:
    """Store a settled campaign's figures unless another worker is storing them now (the Celery task's body).

    Side effects: a FigureRefresh row for the campaign (created if missing), claimed by a conditional
    update, then figures_refresh (StoredFigure rows), then released with refreshed_at set. Returns
    False, doing nothing, when the claim is held or the campaign no longer exists.
    """
    if not Campaign.objects.filter(pk=campaign_id).exists():
        return False
    FigureRefresh.objects.get_or_create(campaign_id=campaign_id)
    now = timezone.now()
    claimed = (
        FigureRefresh.objects.filter(campaign_id=campaign_id)
        .filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - CLAIM_EXPIRES))
        .update(claimed_at=now)
    )
    if not claimed:
        return False
    try:
        figures_refresh(campaign_ids=[campaign_id])
    finally:
        FigureRefresh.objects.filter(campaign_id=campaign_id, claimed_at=now).update(
            claimed_at=None, refreshed_at=timezone.now()
        )
    return True


def figures_refresh(*, campaign_ids: Iterable[int]) -> int:
    """Compute and store the figures every dashboard page reads per campaign at its current summaries.

    Side effects: StoredFigure rows (per-task table, figures over every task, pass^k curves,
    per-domain figures, noise floors) of each campaign whose stored row is missing or older than its
    summaries, then for each of their teams what a member's pages show over all the team's
    campaigns: the default leaderboard (every campaign but harness checks, by all-N), the domain
    rankings and the tasks grid. Nothing where the rows are current. Returns the number of campaigns read.
    """
    ids = list(campaign_ids)
    teams: set[int] = set()
    for start in range(0, len(ids), REFRESH_BATCH):  # bounded memory: a batch's tables at a time
        campaigns = list(Campaign.objects.filter(pk__in=ids[start : start + REFRESH_BATCH]))
        teams.update(c.team_id for c in campaigns)
        tables = figures.per_task_tables(campaigns)
        figures.preload_campaign_figures(tables, campaigns, "figures", "curves", "domains", "noise")
        for campaign in campaigns:
            figures.campaign_figures(tables, campaign)
            figures.pass_hat_curves(tables, campaign)
            figures.domain_figures(tables, campaign)
            noise.campaign_noise(tables, campaign)
    for team_id in sorted(teams):
        _team_figures(team_id)
    return len(ids)


# Campaigns whose tables are held at once while their figures are computed.
REFRESH_BATCH = 20


def _team_figures(team_id: int) -> None:
    """The figures a team member's pages show over all the team's campaigns, in the pages' order
    (newest first): they span the campaigns (bands, rankings, the grid), so they are stored per set."""
    team = list(
        Campaign.objects.filter(team_id=team_id).select_related("agent").order_by("-created_at", "-pk")
    )
    figures.leaderboard_rows([c for c in team if not c.is_harness_check], rank_by=figures.rank_metric("alln"))
    tables = figures.per_task_tables(team)
    figures.preload_campaign_figures(tables, team, "figures")
    finished = [c for c in team if figures.campaign_figures(tables, c).coverage.done_attempts]
    figures.domain_rankings(finished, tables)
    figures.task_grid(team)
