"""Every kind of write to a campaign's TaskSummary rows, with both trigger-kept counters read after each:
SummaryVersion (counts only, migration 0005) and SummaryRevision (counts, updated_at and
signatures_at, migration 0006). test_summary_versions and test_summary_revisions assert their own."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.db import connection
from django.utils import timezone

from apps.attempts.models import SummaryRevision, SummaryVersion, TaskSummary

COUNTERS = {"version": SummaryVersion, "revision": SummaryRevision}


def _read(counter: str, *campaigns) -> list[int]:
    found = dict(COUNTERS[counter].objects.values_list("campaign_id", counter))
    return [found.get(campaign.pk, 0) for campaign in campaigns]


def exercise_every_write_path(make_campaign, counter: str) -> list[tuple[str, list[int]]]:
    """(step, [counter of a, counter of b]) after each kind of write to a's summaries; ``counter`` is
    "version" or "revision"."""
    a, b = make_campaign(tasks=2), make_campaign(tasks=2)
    task_ids = list(a.tasks.order_by("pk").values_list("pk", flat=True))
    seen = [("start", _read(counter, a, b))]
    TaskSummary.objects.bulk_create([TaskSummary(campaign=a, task_id=pk) for pk in task_ids])
    seen.append(("insert two rows (one statement)", _read(counter, a, b)))
    stamp = timezone.now() - timedelta(days=1)
    TaskSummary.objects.filter(campaign=a).update(n_done=2, n_pass=1, updated_at=stamp)
    seen.append(("update counts", _read(counter, a, b)))
    TaskSummary.objects.filter(campaign=a).update(n_done=2, n_pass=1, updated_at=stamp)
    seen.append(("same values again", _read(counter, a, b)))
    TaskSummary.objects.filter(campaign=a).update(signatures_at=timezone.now())
    seen.append(("signatures_at only (a backfill)", _read(counter, a, b)))
    TaskSummary.objects.filter(campaign=a).update(updated_at=timezone.now())
    seen.append(("updated_at only (a recount with equal counts)", _read(counter, a, b)))
    rows = list(TaskSummary.objects.filter(campaign=a))
    for row in rows:
        row.agent_cost = Decimal("0.25")
    TaskSummary.objects.bulk_update(rows, ["agent_cost"])
    seen.append(("bulk_update of a cost", _read(counter, a, b)))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE campaigns_tasksummary SET n_unjudged = 1 WHERE campaign_id = %s", [a.pk])
    seen.append(("raw SQL", _read(counter, a, b)))
    TaskSummary.objects.filter(campaign=a).delete()
    seen.append(("delete", _read(counter, a, b)))
    return seen
