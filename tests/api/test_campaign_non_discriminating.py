"""The campaign API keeps non-discriminating tasks by default, accepts the option that excludes them, and states it."""

from __future__ import annotations

import pytest

from apps.agents.services import agent_config_for
from apps.campaigns.models import Campaign
from apps.suites.models import Task
from tests.api.conftest import error_of

pytestmark = pytest.mark.django_db

IDLE = "retail/ticket_hold_carrier_exception"
OTHER = "travel/cancel_flexible_full_refund"


@pytest.fixture
def idle_task(starter_suite):
    Task.objects.filter(suite=starter_suite, task_id=IDLE).update(
        validation=Task.Validation.NON_DISCRIMINATING
    )


def _body(suite, team, **overrides) -> dict:
    body = {
        "name": "API run",
        "team": team.pk,
        "agent": agent_config_for("golden").pk,
        "suite": suite.pk,
        "task_ids": [IDLE, OTHER],
        "n_attempts": 3,
    }
    return body | overrides


def test_create_keeps_a_named_non_discriminating_task_by_default(
    api_for, alice, starter_suite, team_a, idle_task
):
    response = api_for(alice).post("/api/campaigns/", _body(starter_suite, team_a), format="json")

    assert response.status_code == 201
    data = response.json()
    assert (
        data["task_count"],
        data["exclude_non_discriminating"],
        data["non_discriminating_excluded"],
        data["non_discriminating_included"],
        data["non_discriminating"],
    ) == (2, False, 0, 1, "includes 1 non-discriminating task")


def test_create_accepts_the_option_and_the_detail_states_it(
    api_for, alice, bob, starter_suite, team_a, idle_task
):
    body = _body(starter_suite, team_a, exclude_non_discriminating=True)

    created = api_for(alice).post("/api/campaigns/", body, format="json")
    detail = api_for(bob).get(f"/api/campaigns/{created.json()['id']}/")

    assert created.status_code == 201
    campaign = Campaign.objects.get(pk=created.json()["id"])
    assert list(campaign.tasks.values_list("task_id", flat=True)) == [OTHER]
    data = detail.json()
    assert (
        data["task_count"],
        data["exclude_non_discriminating"],
        data["non_discriminating_excluded"],
        data["non_discriminating_included"],
        data["non_discriminating"],
    ) == (1, True, 1, 0, "non-discriminating tasks excluded (1)")


def test_create_with_the_option_and_only_such_tasks_is_a_task_ids_error(
    api_for, alice, starter_suite, team_a, idle_task
):
    body = _body(starter_suite, team_a, task_ids=[IDLE], exclude_non_discriminating=True)

    response = api_for(alice).post("/api/campaigns/", body, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"] == {
        "task_ids": ["no gradable tasks selected from suite starter (1 non-discriminating left out)"]
    }


def test_campaign_list_states_it_without_a_query_per_campaign(api_for, bob, make_campaign, starter_suite):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    first = starter_suite.tasks.order_by("task_id").first()  # one of make_campaign's tasks
    Task.objects.filter(pk=first.pk).update(validation=Task.Validation.NON_DISCRIMINATING)
    make_campaign(tasks=3)
    client = api_for(bob)
    with CaptureQueriesContext(connection) as one:
        client.get("/api/campaigns/")
    make_campaign(tasks=3)
    make_campaign(tasks=3, exclude_non_discriminating=True)

    with CaptureQueriesContext(connection) as three:
        response = client.get("/api/campaigns/")

    assert len(three.captured_queries) == len(one.captured_queries)
    notes = sorted(row["non_discriminating"] for row in response.json()["results"])
    assert notes == ["includes 1 non-discriminating task"] * 2 + ["non-discriminating tasks excluded (1)"]
