"""One task's attempts across campaigns: the strip of verdicts behind a task's c/n."""

from __future__ import annotations

from collections.abc import Iterable

from apps.attempts.models import Attempt

# What a strip shows of each attempt: never the result JSON, which is where an attempt's bytes are.
STRIP_COLUMNS = (
    "id",
    "campaign_id",
    "index",
    "status",
    "verdict",
    "termination",
    "categories",
    "clean_looking",
)


def task_attempts(*, task_id: int, campaign_ids: Iterable[int]) -> list[Attempt]:
    """The task's attempts in the campaigns, by campaign then index, with STRIP_COLUMNS only (one query)."""
    return list(
        Attempt.objects.filter(task_id=task_id, campaign_id__in=list(campaign_ids))
        .only(*STRIP_COLUMNS)
        .order_by("campaign_id", "index")
    )
