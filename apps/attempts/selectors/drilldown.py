"""The attempt drilldown's reads: the attempt with what its page shows beside it, its neighbours,
and the stored result for the raw download. The drilldown's attempt is read visible-only (the
viewer's teams, core.access); for the others visibility is the caller's (core.access filters them)."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.attempts.models import Attempt


def raw_result_attempts() -> QuerySet[Attempt]:
    """Attempts with only what the raw-result download needs: the id, the campaign and the stored result."""
    return Attempt.objects.only("id", "campaign_id", "result")


def attempt_neighbours(*, attempt: Attempt) -> tuple[int | None, int | None]:
    """Ids of the previous and next attempt (by index) of the same campaign and task (one query)."""
    siblings = list(
        Attempt.objects.filter(campaign_id=attempt.campaign_id, task_id=attempt.task_id)
        .order_by("index")
        .values_list("id", "index")
    )
    before = [pk for pk, index in siblings if index < attempt.index]
    after = [pk for pk, index in siblings if index > attempt.index]
    return (before[-1] if before else None, after[0] if after else None)
