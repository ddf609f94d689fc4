"""A campaign's SummaryRevision is bumped by the database on every write that changes one of its
TaskSummary rows — a count, updated_at or signatures_at, whatever the write path — and on nothing
else: the triage caches (cluster index, pages) are keyed by it (summary_stamps.campaigns_revision_stamp).
On SQLite here; on PostgreSQL (statement-level triggers) in the integration run."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from apps.attempts.models import SummaryRevision, TaskSummary
from apps.attempts.selectors.summary_stamps import campaigns_revision_stamp
from apps.campaigns.services import campaign_start
from tests.campaigns.conftest import drain


def _revisions(*campaigns) -> list[int]:
    found = dict(SummaryRevision.objects.values_list("campaign_id", "revision"))
    return [found.get(campaign.pk, 0) for campaign in campaigns]


def _exercise_every_write_path(make_campaign) -> list[tuple[str, list[int]]]:
    """(step, [revision of a, revision of b]) after each kind of write to a's summaries."""
    a, b = make_campaign(tasks=2), make_campaign(tasks=2)
    task_ids = list(a.tasks.order_by("pk").values_list("pk", flat=True))
    seen = [("start", _revisions(a, b))]
    TaskSummary.objects.bulk_create([TaskSummary(campaign=a, task_id=pk) for pk in task_ids])
    seen.append(("insert two rows (one statement)", _revisions(a, b)))
    stamp = timezone.now() - timedelta(days=1)
    TaskSummary.objects.filter(campaign=a).update(n_done=2, n_pass=1, updated_at=stamp)
    seen.append(("update counts", _revisions(a, b)))
    TaskSummary.objects.filter(campaign=a).update(n_done=2, n_pass=1, updated_at=stamp)
    seen.append(("same values again", _revisions(a, b)))
    TaskSummary.objects.filter(campaign=a).update(signatures_at=timezone.now())
    seen.append(("signatures_at only (a backfill)", _revisions(a, b)))
    TaskSummary.objects.filter(campaign=a).update(updated_at=timezone.now())
    seen.append(("updated_at only (a recount with equal counts)", _revisions(a, b)))
    rows = list(TaskSummary.objects.filter(campaign=a))
    for row in rows:
        row.agent_cost = Decimal("0.25")
    TaskSummary.objects.bulk_update(rows, ["agent_cost"])
    seen.append(("bulk_update of a cost", _revisions(a, b)))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE campaigns_tasksummary SET n_unjudged = 1 WHERE campaign_id = %s", [a.pk])
    seen.append(("raw SQL", _revisions(a, b)))
    TaskSummary.objects.filter(campaign=a).delete()
    seen.append(("delete", _revisions(a, b)))
    return seen


@pytest.mark.django_db
def test_every_write_that_changes_a_summary_row_bumps_its_campaign_and_nothing_else_does(make_campaign):
    seen = _exercise_every_write_path(make_campaign)

    # SQLite's triggers are per row: two rows inserted or changed in one statement bump twice.
    assert seen == [
        ("start", [0, 0]),
        ("insert two rows (one statement)", [2, 0]),
        ("update counts", [4, 0]),
        ("same values again", [4, 0]),
        ("signatures_at only (a backfill)", [6, 0]),
        ("updated_at only (a recount with equal counts)", [8, 0]),
        ("bulk_update of a cost", [10, 0]),
        ("raw SQL", [12, 0]),
        ("delete", [14, 0]),
    ]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_postgresql_bumps_once_per_statement_and_campaign(make_campaign):
    seen = _exercise_every_write_path(make_campaign)

    assert seen == [
        ("start", [0, 0]),
        ("insert two rows (one statement)", [1, 0]),
        ("update counts", [2, 0]),
        ("same values again", [2, 0]),
        ("signatures_at only (a backfill)", [3, 0]),
        ("updated_at only (a recount with equal counts)", [4, 0]),
        ("bulk_update of a cost", [5, 0]),
        ("raw SQL", [6, 0]),
        ("delete", [7, 0]),
    ]


@pytest.mark.django_db
def test_recording_attempts_changes_the_stamp_of_every_scope_holding_the_campaign(make_campaign):
    campaign, other = make_campaign(tasks=2, n=2), make_campaign(tasks=1, n=1)
    campaign_start(campaign=campaign)
    before = {
        "both": campaigns_revision_stamp([campaign.pk, other.pk]),
        "other": campaigns_revision_stamp([other.pk]),
    }

    drain(campaign)

    assert campaigns_revision_stamp([other.pk, campaign.pk]) != before["both"]
    assert campaigns_revision_stamp([other.pk]) == before["other"]
    assert campaigns_revision_stamp([campaign.pk, other.pk]) == campaigns_revision_stamp(
        [other.pk, campaign.pk]
    )
