"""How many attempts each campaign has, and how many of them ended done or in an infra error."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Q

from apps.attempts.models import Attempt


def attempt_status_counts(*, campaign_ids: Iterable[int]) -> list[dict[str, Any]]:
    """One row {campaign_id, total, done, infra} per campaign that has attempts (one query)."""
    rows = (
        Attempt.objects.filter(campaign_id__in=list(campaign_ids))
        .order_by()
        .values("campaign_id")
        .annotate(
            total=Count("id"),
            done=Count("id", filter=Q(status=Attempt.Status.DONE)),
            infra=Count("id", filter=Q(status=Attempt.Status.INFRA_ERROR)),
        )
    )
    return [dict(row) for row in rows]
