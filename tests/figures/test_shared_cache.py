"""The figures every viewer shares are cached by data version: computed once, never stale (issue 27 item 11)."""

from __future__ import annotations

import threading
import time

import pytest

from apps.attempts.models import TaskSummary
from apps.figures import selectors as figures
from apps.figures.tables import cached
from tests.triage.conftest import T1, T2

pytestmark = pytest.mark.django_db


def test_a_warm_leaderboard_reads_one_entry_after_the_stamps_query(
    summaries_campaign, django_assert_num_queries
):
    campaigns = [
        summaries_campaign({T1: (4, 4), T2: (4, 1)}, name="Alpha", n=4),
        summaries_campaign({T1: (4, 2), T2: (4, 4)}, name="Beta", n=4),
    ]
    first = figures.leaderboard_rows(campaigns)

    with django_assert_num_queries(1):  # the summary stamps: the data version
        again = figures.leaderboard_rows(campaigns)

    assert [row.figures for row in again] == [row.figures for row in first]
    assert [row.campaign.pk for row in again] == [c.pk for c in campaigns]


def test_the_shared_leaderboard_follows_new_attempts(summaries_campaign):
    alpha = summaries_campaign({T1: (4, 4), T2: (4, 0)}, name="Alpha", n=4)
    before = figures.leaderboard_rows([alpha])[0].figures.pass_at_1.value

    summary = TaskSummary.objects.get(campaign=alpha, task__task_id=T2)
    summary.n_pass = 4
    summary.save()  # what recording an attempt does to its summary
    after = figures.leaderboard_rows([alpha])[0].figures.pass_at_1.value

    assert (before, after) == (0.5, 1.0)


def test_the_shared_leaderboard_follows_a_renamed_campaign(summaries_campaign):
    a = summaries_campaign({T1: (4, 4), T2: (4, 0)}, name="A", n=4)  # found more, dependable on less
    b = summaries_campaign({T1: (4, 3), T2: (4, 3)}, name="B", n=4)
    figures.leaderboard_rows([a, b])

    b.name = "B renamed"
    b.save(update_fields=["name"])
    rows = figures.leaderboard_rows([a, b])

    assert [row.campaign.name for row in rows] == ["A", "B renamed"]
    assert rows[0].reversed_with in ((), ("B renamed",))


def test_concurrent_requests_for_a_cold_figure_compute_it_once():
    calls = []

    def compute():
        calls.append(threading.get_ident())
        time.sleep(0.2)  # a cold bootstrap takes a while; the others must wait for it, not repeat it
        return {"value": 1}

    results = []
    threads = [
        threading.Thread(target=lambda: results.append(cached("figures:test:cold", compute)))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (len(calls), results) == (1, [{"value": 1}] * 8)


def test_the_leaderboard_table_is_shared_by_viewers_and_follows_every_change(
    client, bob, trish, summaries_campaign
):
    alpha = summaries_campaign({T1: (4, 4), T2: (4, 0)}, name="Alpha", n=4)
    client.force_login(bob)
    first = client.get("/leaderboard/", HTTP_HX_REQUEST="true").content.decode()
    client.force_login(trish)
    shared = client.get("/leaderboard/", HTTP_HX_REQUEST="true").content.decode()

    alpha.name = "Alpha renamed"
    alpha.save(update_fields=["name"])
    renamed = client.get("/leaderboard/", HTTP_HX_REQUEST="true").content.decode()
    TaskSummary.objects.filter(campaign=alpha, task__task_id=T2).update(n_pass=4)
    recounted = client.get("/leaderboard/", HTTP_HX_REQUEST="true").content.decode()

    assert shared == first
    assert "Alpha renamed" not in first and "Alpha renamed" in renamed
    assert "50.0%" in renamed and "50.0%" not in recounted and "100.0%" in recounted
