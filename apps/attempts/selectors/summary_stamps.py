"""Stamps of the attempt record for caches: a value that changes whenever an attempt of the scope finishes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, OuterRef, Subquery, Sum

from apps.attempts.models import SummaryVersion, TaskSummary, campaign_model


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
    """Per campaign a token that changes whenever a count of one of its summaries, or its suite, changes
    (one query over the campaigns' rows, whatever the number of attempts).

    The summary part is the campaign's SummaryVersion, which database triggers bump on every write
    that changes a counted column (models.SummaryVersion); a campaign whose counts never changed since
    the triggers exist reads version 0. The suite's updated_at is in it because a table carries each
    task's domain and tags, which a suite revision (suites.services.suite_store, which saves the
    suite) rewrites in place — tags are not part of the suite's content hash.
    """
    ids = list(campaign_ids)
    version = SummaryVersion.objects.filter(campaign_id=OuterRef("pk")).values("version")[:1]
    rows = (
        campaign_model()
        .objects.filter(pk__in=ids)
        .order_by()
        .annotate(summary_version=Subquery(version))
        .values_list("pk", "summary_version", "suite__updated_at")
    )
    stamps = {
        pk: f"v{summary_version or 0}|suite:{suite_updated_at.timestamp():.6f}"
        for pk, summary_version, suite_updated_at in rows
    }
    return {pk: stamps.get(pk, "empty") for pk in ids}
