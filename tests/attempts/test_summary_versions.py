"""A campaign's SummaryVersion is bumped by the database on every write that changes a count of one of
its TaskSummary rows — whatever the write path — and on nothing else: the figures' caches are keyed by
it (apps.attempts.selectors.summary_stamps). On SQLite here; on PostgreSQL (statement-level triggers)
in the integration run."""

from __future__ import annotations

import pytest

from apps.attempts.selectors.summary_stamps import campaign_summary_stamps
from apps.campaigns.services import campaign_start
from tests.attempts.summary_writes import exercise_every_write_path
from tests.campaigns.conftest import drain


@pytest.mark.django_db
def test_every_count_changing_write_bumps_its_campaign_and_nothing_else_does(make_campaign):
    seen = exercise_every_write_path(make_campaign, "version")

    # SQLite's triggers are per row: two rows inserted or changed in one statement bump twice.
    assert seen == [
        ("start", [0, 0]),
        ("insert two rows (one statement)", [2, 0]),
        ("update counts", [4, 0]),
        ("same values again", [4, 0]),
        ("signatures_at only (a backfill)", [4, 0]),
        ("updated_at only (a recount with equal counts)", [4, 0]),
        ("bulk_update of a cost", [6, 0]),
        ("raw SQL", [8, 0]),
        ("delete", [10, 0]),
    ]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_postgresql_bumps_once_per_statement_and_campaign(make_campaign):
    seen = exercise_every_write_path(make_campaign, "version")

    assert seen == [
        ("start", [0, 0]),
        ("insert two rows (one statement)", [1, 0]),
        ("update counts", [2, 0]),
        ("same values again", [2, 0]),
        ("signatures_at only (a backfill)", [2, 0]),
        ("updated_at only (a recount with equal counts)", [2, 0]),
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
