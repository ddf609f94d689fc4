"""A campaign's SummaryVersion is bumped by the database on every write that changes a count of one of
its TaskSummary rows — whatever the write path — and on nothing else: the figures' caches are keyed by
it (apps.attempts.selectors.summary_stamps). On SQLite here; on PostgreSQL (statement-level triggers)
in the integration run."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from apps.attempts.models import SummaryVersion, TaskSummary
from apps.attempts.selectors.summary_stamps import campaign_summary_stamps
from apps.campaigns.services import campaign_start
from tests.campaigns.conftest import drain


def _versions(*campaigns) -> list[int]:
    found = dict(SummaryVersion.objects.values_list("campaign_id", "version"))
    return [found.get(campaign.pk, 0) for campaign in campaigns]


def _exercise_every_write_path(make_campaign) -> list[tuple[str, list[int]]]:
    """(step, [version of a, version of b]) after each kind of write to a's summaries."""
    a, b = make_campaign(tasks=2), make_campaign(tasks=2)
    task_ids = list(a.tasks.order_by("pk").values_list("pk", flat=True))
    seen = [("start", _versions(a, b))]
    TaskSummary.objects.bulk_create([TaskSummary(campaign=a, task_id=pk) for pk in task_ids])
    seen.append(("insert two rows (one statement)", _versions(a, b)))
    TaskSummary.objects.filter(campaign=a).update(n_done=2, n_pass=1)
    seen.append(("update counts", _versions(a, b)))
    TaskSummary.objects.filter(campaign=a).update(n_done=2, n_pass=1)
    seen.append(("same counts again", _versions(a, b)))
    TaskSummary.objects.filter(campaign=a).update(signatures_at=timezone.now(), updated_at=timezone.now())
    seen.append(("signatures_at and updated_at only", _versions(a, b)))
    rows = list(TaskSummary.objects.filter(campaign=a))
    for row in rows:
        row.agent_cost = Decimal("0.25")
    TaskSummary.objects.bulk_update(rows, ["agent_cost"])
    seen.append(("bulk_update of a cost", _versions(a, b)))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE campaigns_tasksummary SET n_unjudged = 1 WHERE campaign_id = %s", [a.pk])
    seen.append(("raw SQL", _versions(a, b)))
    TaskSummary.objects.filter(campaign=a).delete()
    seen.append(("delete", _versions(a, b)))
    return seen


@pytest.mark.django_db
def test_every_count_changing_write_bumps_its_campaign_and_nothing_else_does(make_campaign):
    seen = _exercise_every_write_path(make_campaign)

    # SQLite's triggers are per row: two rows inserted or changed in one statement bump twice.
    assert seen == [
        ("start", [0, 0]),
        ("insert two rows (one statement)", [2, 0]),
        ("update counts", [4, 0]),
        ("same counts again", [4, 0]),
        ("signatures_at and updated_at only", [4, 0]),
        ("bulk_update of a cost", [6, 0]),
        ("raw SQL", [8, 0]),
        ("delete", [10, 0]),
    ]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_postgresql_bumps_once_per_statement_and_campaign(make_campaign):
    seen = _exercise_every_write_path(make_campaign)

    assert seen == [
        ("start", [0, 0]),
        ("insert two rows (one statement)", [1, 0]),
        ("update counts", [2, 0]),
        ("same counts again", [2, 0]),
        ("signatures_at and updated_at only", [2, 0]),
        ("bulk_update of a cost", [3, 0]),
        ("raw SQL", [4, 0]),
        ("delete", [5, 0]),
    ]


@pytest.mark.django_db
def test_recording_attempts_changes_the_stamp_pages_key_figures_by(make_campaign):
    campaign, other = make_campaign(tasks=2, n=2), make_campaign(tasks=1, n=1)
    campaign_start(campaign=campaign)
    before = campaign_summary_stamps([campaign.pk, other.pk])

    drain(campaign)
    after = campaign_summary_stamps([campaign.pk, other.pk])

    assert after[campaign.pk] != before[campaign.pk]
    assert after[other.pk] == before[other.pk]
    assert campaign_summary_stamps([campaign.pk]) == {campaign.pk: after[campaign.pk]}
