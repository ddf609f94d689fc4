"""Reads a re-grade (apps.regrade) needs of the attempt record: stored results and gradings."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Sum

from apps.attempts.models import Attempt, TaskSummary

# What grading decided, as stored in the result (the rest of it — transcript, effects — is the
# attempt's behaviour, which a re-grade never changes).
GRADING_KEYS = ("verdict", "categories", "clean_looking", "diff", "checks", "rubrics", "task_hash")


@dataclass(frozen=True)
class StoredAttempt:
    id: int
    campaign_id: int
    task_id: int
    status: str
    verdict: str
    result: dict[str, Any]


def attempts_to_regrade(*, campaign_ids: list[int], chunk_size: int = 2000) -> Iterator[StoredAttempt]:
    """Every attempt of the campaigns with its stored result, task by task (one streamed query)."""
    rows = (
        Attempt.objects.filter(campaign_id__in=campaign_ids)
        .order_by("task_id", "campaign_id", "index")
        .values_list("pk", "campaign_id", "task_id", "status", "verdict", "result")
    )
    for pk, campaign_id, task_id, status, verdict, result in rows.iterator(chunk_size=chunk_size):
        yield StoredAttempt(pk, campaign_id, task_id, status, verdict, result or {})


def attempt_gradings(*, attempt_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The grading each attempt carries now (GRADING_KEYS of its result), by attempt id."""
    found: dict[int, dict[str, Any]] = {}
    ids = list(attempt_ids)
    for start in range(0, len(ids), 2000):
        rows = Attempt.objects.filter(pk__in=ids[start : start + 2000]).values_list("pk", "verdict", "result")
        for pk, verdict, result in rows:
            grading = {key: (result or {}).get(key) for key in GRADING_KEYS}
            grading["verdict"] = verdict
            found[pk] = grading
    return found


def campaign_agent_costs(*, campaign_ids: list[int]) -> dict[int, float | None]:
    """Each campaign's billed agent cost (None when nothing of it is priced)."""
    rows = (
        TaskSummary.objects.filter(campaign_id__in=campaign_ids)
        .values("campaign_id")
        .annotate(cost=Sum("agent_cost"), unpriced=Sum("unpriced_attempts"), judged=Sum("n_done"))
    )
    costs: dict[int, float | None] = dict.fromkeys(campaign_ids)
    for row in rows:
        cost = row["cost"] or Decimal(0)
        unpriced_only = not cost and (row["unpriced"] or 0) > 0
        costs[row["campaign_id"]] = None if unpriced_only else float(cost)
    return costs
