"""Stamps of the attempt record for caches: a value that changes whenever an attempt of the scope finishes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Sum

from apps.attempts.models import TaskSummary


@dataclass(frozen=True)
class SummaryStamp:
    """The campaigns' per-task summaries in four numbers: any finished attempt changes at least one."""

    latest: datetime | None  # the newest summary's updated_at (None without summaries)
    signed: datetime | None  # the newest signatures_at (a signature backfill; None before any)
    rows: int
    done: int | None
    passed: int | None


def summary_stamp(*, campaign_ids: Sequence[int]) -> SummaryStamp:
    """The stamp of the campaigns' task summaries, for caches of what is computed from their attempts (one query)."""
    row = TaskSummary.objects.filter(campaign_id__in=campaign_ids).aggregate(
        latest=Max("updated_at"),
        signed=Max("signatures_at"),
        rows=Count("id"),
        done=Sum("n_done"),
        passed=Sum("n_pass"),
    )
    return SummaryStamp(
        latest=row["latest"], signed=row["signed"], rows=row["rows"], done=row["done"], passed=row["passed"]
    )
