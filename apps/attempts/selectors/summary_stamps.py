"""Stamps of the attempt record for caches: a value that changes whenever an attempt of the scope finishes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Sum

from apps.attempts.models import TaskSummary, campaign_model
from apps.attempts.selectors.task_summaries import STAMPED_COLUMNS


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


def campaign_summary_stamps(campaign_ids: Iterable[int]) -> dict[int, str]:
    """Per campaign a token that changes whenever one of its summaries, or its suite, changes (one query).

    Besides max(updated_at) and the row count it folds in the sums of the counted columns:
    summary_refresh updates rows with bulk_update, which does not touch auto_now fields, so
    updated_at alone would miss a re-graded attempt. The suite's updated_at is in it because a
    table carries each task's domain and tags, which a suite revision (suites.services.suite_store,
    which saves the suite) rewrites in place — tags are not part of the suite's content hash.
    """
    ids = list(campaign_ids)
    sums = {f"sum_{name}": Sum(f"summaries__{name}") for name in STAMPED_COLUMNS}
    rows = (
        campaign_model()
        .objects.filter(pk__in=ids)
        .order_by()
        .values("pk", "suite__updated_at")
        .annotate(latest=Max("summaries__updated_at"), rows=Count("summaries__id"), **sums)
    )
    stamps = {}
    for typed_row in rows:
        row: dict[str, Any] = dict(
            typed_row
        )  # a plain dict: the plugin types the row without the **sums keys
        counts = "empty"
        if row["rows"]:
            parts = [f"{row['latest'].timestamp():.6f}", str(row["rows"])]
            parts += [str(row[f"sum_{name}"]) for name in STAMPED_COLUMNS]
            counts = "-".join(parts)
        stamps[row["pk"]] = f"{counts}|suite:{row['suite__updated_at'].timestamp():.6f}"
    return {pk: stamps.get(pk, "empty") for pk in ids}
