"""Triage lists flag the tasks whose validation says non-discriminating (campaigns run them by default)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.suites.models import Task
from tests.triage.conftest import T1, T3

pytestmark = pytest.mark.django_db

FLAG = '<span class="badge task-flag"'


def _row_of(html: str, marker: str) -> str:
    return html.split(marker, 1)[1].split("</tr>", 1)[0]


def test_queue_rows_flag_a_non_discriminating_task_and_only_it(client, bob, attempts_campaign):
    campaign = attempts_campaign([(T1, 0, "fail", [], True), (T3, 0, "fail", [], True)])
    Task.objects.filter(task_id=T1).update(validation=Task.Validation.NON_DISCRIMINATING)
    idle, other = (campaign.attempts.get(task__task_id=task_id).pk for task_id in (T1, T3))
    client.force_login(bob)

    html = client.get("/triage/?view=list").content.decode()

    assert FLAG in _row_of(html, f'data-attempt="{idle}"')
    assert FLAG not in _row_of(html, f'data-attempt="{other}"')


def test_queue_flag_costs_no_query_per_row(client, bob, attempts_campaign):
    one = attempts_campaign([(T1, 0, "fail", [], True)], name="one")
    three = attempts_campaign([(T1, i, "fail", [], True) for i in range(3)], name="three")
    Task.objects.filter(task_id=T1).update(validation=Task.Validation.NON_DISCRIMINATING)
    client.force_login(bob)
    for campaign in (one, three):  # warm the session and each scope's cached cluster index
        client.get(f"/triage/?c={campaign.pk}&view=list")

    counts, flags = [], []
    for campaign in (one, three):
        with CaptureQueriesContext(connection) as captured:
            html = client.get(f"/triage/?c={campaign.pk}&view=list").content.decode()
        counts.append(len(captured))
        flags.append(html.count(FLAG))

    assert (counts[0], flags) == (counts[1], [1, 3])


def test_suspect_tasks_page_flags_a_non_discriminating_task(client, bob, attempts_campaign):
    attempts_campaign([(T1, 0, "fail", [], True)])
    Task.objects.filter(task_id=T1).update(
        validation=Task.Validation.NON_DISCRIMINATING, validation_detail="a do-nothing attempt passes"
    )
    client.force_login(bob)

    html = client.get("/triage/suspects/?status=all").content.decode()

    assert FLAG in _row_of(html, f'<tr data-task="{T1}">')
