"""Stamps of the attempt record for caches: a value that changes whenever an attempt of the scope finishes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.models import Model

from apps.attempts.models import SummaryRevision, SummaryVersion, campaign_model


def campaign_summary_stamps(campaign_ids: Iterable[int]) -> dict[int, str]:
    """Per campaign a token that changes whenever a count of one of its summaries, or its suite, changes
    (one query over the campaigns' rows, whatever the number of attempts).

    The summary part is the campaign's SummaryVersion, which database triggers bump on every write
    that changes a counted column (models.SummaryVersion); a campaign whose counts never changed since
    the triggers exist reads version 0. The suite's updated_at is in it because a table carries each
    task's domain and tags, which a suite revision (suites.services.suite_store, which saves the
    suite) rewrites in place — tags are not part of the suite's content hash.

    Written as SQL: every figure page reads it (the leaderboard twice), and building the ORM's
    subquery was 11% of a warm leaderboard request's Python (cProfile, 20 campaigns) for a
    three-table join.
    """
    ids = [int(pk) for pk in campaign_ids]
    if not ids:
        return {}
    stamps = {
        pk: f"v{summary_version or 0}|suite:{_timestamp(suite_updated_at):.6f}"
        for pk, summary_version, suite_updated_at in _counter_rows(ids, SummaryVersion, "version")
    }
    return {pk: stamps.get(pk, "empty") for pk in ids}


def campaigns_revision_stamp(campaign_ids: Iterable[int]) -> str:
    """One token for the campaigns' summaries that changes whenever any write changes one of their rows
    — a count, updated_at (every recount: a recorded, re-graded or cancelled attempt) or signatures_at
    (a signature backfill) — or their suite is revised (one query over one row per campaign, whatever
    the number of attempts or summaries).

    The per-campaign part is SummaryRevision (database triggers, migration attempts 0006); a campaign
    whose summaries never changed since the triggers exist reads revision 0. The triage caches (the
    clusters and the suspect queue) key on it instead of an aggregate over every summary row of the
    scope (50,700 rows at 100 campaigns, per request).
    """
    ids = sorted({int(pk) for pk in campaign_ids})
    if not ids:
        return "none"
    found = "|".join(
        f"{pk}:r{revision or 0}:{_timestamp(updated_at):.6f}"
        for pk, revision, updated_at in _counter_rows(ids, SummaryRevision, "revision")
    )
    return "rev:" + hashlib.sha1(found.encode()).hexdigest()


def _counter_rows(ids: list[int], counter: type[Model], column: str) -> list[tuple[int, int | None, Any]]:
    """(campaign id, its trigger-kept counter or None before the first bump, its suite's updated_at)
    per campaign, in id order: one query over the campaigns, their suites and the counter table."""
    campaign = campaign_model()
    suite = campaign._meta.get_field("suite").related_model
    sql = (
        f"SELECT c.id, k.{column}, s.updated_at FROM {campaign._meta.db_table} c "
        f"JOIN {suite._meta.db_table} s ON s.id = c.suite_id "
        f"LEFT JOIN {counter._meta.db_table} k ON k.campaign_id = c.id "
        f"WHERE c.id IN ({', '.join(['%s'] * len(ids))}) ORDER BY c.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, ids)
        return cursor.fetchall()


def _timestamp(value: datetime | str) -> float:
    """A raw cursor's datetime: aware from psycopg, ISO text from SQLite (stored in UTC)."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()
    return value.timestamp()
