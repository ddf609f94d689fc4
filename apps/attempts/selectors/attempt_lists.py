"""The attempt list the API pages through, and one attempt of it, among the campaigns a caller may see.

Visibility is a campaign queryset the caller passes (campaigns.selectors.campaigns_visible_to):
it becomes a subquery, so a page is one query however many campaigns a user sees.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection
from django.db.models import QuerySet

from apps.attempts.models import Attempt


def _visible(campaigns: QuerySet) -> QuerySet[Attempt]:
    # The signature digest lives in the attempt's AttemptSignature row: joined, not a query per row.
    return Attempt.objects.select_related("task__domain", "failure_signature").filter(
        campaign__in=campaigns.values("pk")
    )


def listed_attempts(
    *,
    campaigns: QuerySet,
    columns: Sequence[str],
    campaign_id: int | None = None,
    task: str = "",
    status: str = "",
    verdict: str = "",
    category: str = "",
    clean_looking: bool | None = None,
) -> QuerySet[Attempt]:
    """The campaigns' attempts matching every filter given, with only ``columns`` loaded, ordered by
    campaign, task id and index (unevaluated: the caller paginates it).

    ``task`` is a stable task id (e.g. retail/…) or a task pk; ``category`` keeps the attempts whose
    failure categories include it.
    """
    attempts = _visible(campaigns)
    if campaign_id is not None:
        attempts = attempts.filter(campaign_id=campaign_id)
    if task:
        attempts = (
            attempts.filter(task_id=int(task))
            if task.isdigit() and len(task) < 18
            else attempts.filter(task__task_id=task)
        )
    if status:
        attempts = attempts.filter(status=status)
    if verdict:
        attempts = attempts.filter(verdict=verdict)
    if category:
        if connection.features.supports_json_field_contains:
            attempts = attempts.filter(categories__contains=[category])
        else:
            # SQLite has no JSON containment; the JSON text of a list of known names is matched exactly quoted.
            attempts = attempts.filter(categories__icontains=f'"{category}"')
    if clean_looking is not None:
        attempts = attempts.filter(clean_looking=clean_looking)
    return attempts.only(*columns).order_by("campaign_id", "task__task_id", "index")


def visible_attempt(*, pk: int, campaigns: QuerySet) -> Attempt | None:
    """The attempt with its task, domain and signature row, if it belongs to one of the campaigns (one query)."""
    return _visible(campaigns).filter(pk=pk).first()
