"""A campaign's SummaryRevision is bumped by the database on every write that changes one of its
TaskSummary rows — a count, updated_at or signatures_at, whatever the write path — and on nothing
else: the triage caches (cluster index, pages) are keyed by it (summary_stamps.campaigns_revision_stamp).
On SQLite here; on PostgreSQL (statement-level triggers) in the integration run."""

from __future__ import annotations

import pytest

from apps.attempts.selectors.summary_stamps import campaigns_revision_stamp
from apps.campaigns.services import campaign_start
from tests.attempts.summary_writes import exercise_every_write_path
from tests.campaigns.conftest import drain


@pytest.mark.django_db
def test_every_write_that_changes_a_summary_row_bumps_its_campaign_and_nothing_else_does(make_campaign):
    seen = exercise_every_write_path(make_campaign, "revision")

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
    seen = exercise_every_write_path(make_campaign, "revision")

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
