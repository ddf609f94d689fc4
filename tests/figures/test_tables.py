"""Per-task tables: every selected task (zeros when nothing ran), stamps that follow every change, cached loads."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.attempts.selectors.summary_stamps import campaign_summary_stamps
from apps.figures import selectors as figures
from apps.figures.tables import filter_frame, forget_process_figures
from tests.triage.conftest import T1, T2, _seeded_labels, attempts_campaign, flagged  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def test_excluding_tasks_changes_their_stamps_so_cached_figures_never_mix(flagged):
    a, _ = flagged
    t1 = a.tasks.get(task_id=T1).pk

    full = figures.per_task_tables([a])
    kept = figures.per_task_tables([a], exclude=frozenset({t1}))

    assert (len(full.frame(a)), len(kept.frame(a))) == (2, 1)
    assert kept.stamp(a) == full.stamp(a) + f"|without:{t1}"
    assert (
        figures.campaign_figures(full, a).pass_at_1.value,
        figures.campaign_figures(kept, a).pass_at_1.value,
    ) == (0.5, 1.0)


def test_a_task_that_never_ran_is_in_the_table_with_zero_counts(make_campaign):
    campaign = make_campaign("golden", tasks=2, n=3)  # created, never started: no summaries yet

    frame = figures.per_task_table(campaign)

    assert list(frame["n"]) == [0, 0]
    assert list(frame["c"]) == [0, 0]
    assert list(frame["task_id"]) == sorted(campaign.tasks.values_list("task_id", flat=True))
    assert campaign_summary_stamps([campaign.pk]) == {
        campaign.pk: f"v0|suite:{campaign.suite.updated_at.timestamp():.6f}"
    }


def test_tables_cost_one_query_and_a_fresh_process_reads_stored_frames_in_one_more(summaries_campaign):
    campaigns = [summaries_campaign({T1: (2, 1), T2: (2, 2)}, name=f"C{i}", n=2) for i in range(3)]

    with CaptureQueriesContext(connection) as opened:
        first = figures.per_task_tables(campaigns)
    computed = {c.pk: first.frame(c) for c in campaigns}  # computed from the summaries, stored
    with CaptureQueriesContext(connection) as warm:
        second = figures.per_task_tables(campaigns)
        warm_frames = {c.pk: second.frame(c) for c in campaigns}
    forget_process_figures()  # a fresh web process: nothing in its cache, the stored rows in the database
    with CaptureQueriesContext(connection) as fresh:
        third = figures.per_task_tables(campaigns)
        stored_frames = {c.pk: third.frame(c) for c in campaigns}

    assert (len(opened), len(warm), len(fresh)) == (1, 1, 2)
    assert second.stamps == first.stamps == third.stamps
    assert all(warm_frames[c.pk].equals(computed[c.pk]) for c in campaigns)
    assert all(stored_frames[c.pk].equals(computed[c.pk]) for c in campaigns)


def test_filter_frame_by_tag_keeps_every_column_even_when_nothing_matches(summaries_campaign):
    campaign = summaries_campaign({T1: (2, 1), T2: (2, 2)}, name="Tags", n=2)
    frame = figures.per_task_table(campaign)

    none = filter_frame(frame, tag="no-such-tag")
    retail = filter_frame(frame, domain="retail")

    assert (len(none), list(none.columns)) == (0, list(frame.columns))
    assert list(retail["task_id"]) == [T1]
