"""Reads worth a name for calibrations and adaptive campaigns."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.adaptive.models import AdaptiveState, Calibration
from apps.campaigns.models import Campaign
from apps.core.access import teams_for


def calibrations_visible_to(user, *, suite=None) -> QuerySet[Calibration]:
    """Calibrations of the user's teams (all for superusers), newest version first."""
    queryset = Calibration.objects.select_related("suite", "team").order_by(
        "suite__name", "team__name", "-version"
    )
    if suite is not None:
        queryset = queryset.filter(suite=suite)
    if user.is_superuser:
        return queryset
    return queryset.filter(team__in=teams_for(user))


def latest_calibration(*, suite, team) -> Calibration | None:
    """The suite's newest calibration for the team, or None."""
    return Calibration.objects.filter(suite=suite, team=team).order_by("-version").first()


def adaptive_states(campaigns: list[Campaign]) -> dict[int, AdaptiveState]:
    """Campaign id -> its adaptive dispatcher's state (one query)."""
    return {
        state.campaign_id: state
        for state in AdaptiveState.objects.filter(campaign__in=campaigns).select_related("calibration")
    }
