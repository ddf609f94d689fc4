"""Campaign endpoints: create, launch, cancel, resume, progress, list filters and query counts."""

from __future__ import annotations

from datetime import date

import pytest

from apps.agents.services import agent_config_for
from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_start
from tests.api.conftest import error_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_dispatch(monkeypatch):
    """Launched attempts stay queued: no inline worker runs them inside the request."""
    from apps.campaigns import services

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)


def _body(starter_suite, team, **overrides):
    tasks = list(starter_suite.tasks.order_by("task_id").values_list("task_id", flat=True)[:2])
    body = {
        "name": "API run",
        "team": team.pk,
        "agent": agent_config_for("golden").pk,
        "suite": starter_suite.pk,
        "task_ids": tasks,
        "n_attempts": 3,
        "seed": 7,
    }
    return {**body, **overrides}


def test_operator_creates_a_draft_campaign(api_for, alice, starter_suite, team_a):
    response = api_for(alice).post("/api/campaigns/", _body(starter_suite, team_a), format="json")

    assert response.status_code == 201
    data = response.json()
    campaign = Campaign.objects.get(pk=data["id"])
    assert (data["status"], data["task_count"], data["n_attempts"], data["seed"], data["owner"]) == (
        "draft",
        2,
        3,
        7,
        "alice",
    )
    assert campaign.owner == alice and campaign.team == team_a
    assert Attempt.objects.filter(campaign=campaign).count() == 0


def test_create_with_launch_starts_the_campaign(api_for, alice, starter_suite, team_a, no_dispatch):
    response = api_for(alice).post(
        "/api/campaigns/", _body(starter_suite, team_a, launch=True), format="json"
    )

    assert response.status_code == 201
    assert response.json()["status"] == "running"
    assert Attempt.objects.filter(campaign_id=response.json()["id"], status="queued").count() == 6


def test_create_rejects_a_team_the_user_is_not_in(api_for, alice, starter_suite, team_b):
    response = api_for(alice).post("/api/campaigns/", _body(starter_suite, team_b), format="json")

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert error["details"] == {"team": ["not one of your teams"]}
    assert error["message"] == "team: not one of your teams"


def test_create_names_unknown_task_ids(api_for, alice, starter_suite, team_a):
    body = _body(starter_suite, team_a, task_ids=["retail/no_such_task"])

    response = api_for(alice).post("/api/campaigns/", body, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"] == {"task_ids": ["not in suite starter: retail/no_such_task"]}


def test_create_names_every_missing_field(api_for, alice):
    response = api_for(alice).post("/api/campaigns/", {}, format="json")

    assert response.status_code == 400
    assert sorted(error_of(response)["details"]) == ["agent", "name", "suite", "team"]


def test_operator_launches_cancels_and_resumes(api_for, alice, make_campaign, no_dispatch):
    campaign = make_campaign("golden", tasks=2, n=2)
    client = api_for(alice)

    launched = client.post(f"/api/campaigns/{campaign.pk}/launch/")
    cancelled = client.post(f"/api/campaigns/{campaign.pk}/cancel/")
    resumed = client.post(f"/api/campaigns/{campaign.pk}/resume/")

    assert (launched.status_code, launched.json()["attempts"], launched.json()["campaign"]["status"]) == (
        200,
        4,
        "running",
    )
    assert (cancelled.status_code, cancelled.json()["attempts"], cancelled.json()["campaign"]["status"]) == (
        200,
        4,
        "cancelled",
    )
    assert (resumed.status_code, resumed.json()["attempts"], resumed.json()["campaign"]["status"]) == (
        200,
        4,
        "running",
    )
    assert Attempt.objects.filter(campaign=campaign, status="queued").count() == 4


def test_launching_a_running_campaign_is_a_conflict(api_for, alice, make_campaign, no_dispatch):
    campaign = make_campaign("golden", tasks=1, n=1)
    client = api_for(alice)
    client.post(f"/api/campaigns/{campaign.pk}/launch/")

    response = client.post(f"/api/campaigns/{campaign.pk}/launch/")

    assert response.status_code == 409
    assert error_of(response) == {
        "code": "conflict",
        "message": "cannot launch a campaign that is running (only when draft)",
        "details": None,
    }


def test_resuming_a_running_campaign_is_a_conflict(api_for, alice, make_campaign, no_dispatch):
    campaign = make_campaign("golden", tasks=1, n=1)
    client = api_for(alice)
    client.post(f"/api/campaigns/{campaign.pk}/launch/")

    response = client.post(f"/api/campaigns/{campaign.pk}/resume/")

    assert response.status_code == 409
    assert error_of(response)["code"] == "conflict"


def test_progress_counts_finished_attempts(api_for, bob, run_campaign):
    campaign = run_campaign("golden", tasks=2, n=2)

    response = api_for(bob).get(f"/api/campaigns/{campaign.pk}/progress/")

    data = response.json()
    assert (data["status"], data["total"], data["done"], data["passed"], data["queued"], data["percent"]) == (
        "done",
        4,
        4,
        4,
        0,
        100.0,
    )
    assert data["pass_rate"] == 1.0


def test_list_filters_by_status_and_agent(api_for, bob, make_campaign, no_dispatch):
    draft = make_campaign("golden", tasks=1, n=1)
    running = make_campaign("sim:careless", tasks=1, n=1)
    campaign_start(campaign=running)
    client = api_for(bob)

    assert [c["id"] for c in client.get("/api/campaigns/?status=draft").json()["results"]] == [draft.pk]
    assert [c["id"] for c in client.get(f"/api/campaigns/?agent={running.agent_id}").json()["results"]] == [
        running.pk
    ]
    assert error_of(client.get("/api/campaigns/?status=bogus"))["details"] == {
        "status": ['"bogus" is not a valid choice.']
    }


def test_list_marks_simulations(api_for, bob, make_campaign):
    make_campaign("sim:careless", tasks=1, n=1)

    row = api_for(bob).get("/api/campaigns/").json()["results"][0]

    assert (row["agent_name"], row["is_simulation"]) == (
        "sim:careless (simulated persona, not a model)",
        True,
    )


def _add_items(kind: str, make_campaign, count: int, start: int) -> None:
    """`count` more rows of the listed kind (each campaign with its own agent, suite rows with tasks)."""
    from apps.agents.services import price_sheet_create
    from apps.suites.models import Suite

    for number in range(start, start + count):
        if kind == "campaigns":
            make_campaign(("golden", "sim:careless", "sim:steady")[number], tasks=1, n=1)
        elif kind == "agents":
            agent_config_for(("golden", "sim:careless", "sim:steady")[number])
        elif kind == "price-sheets":
            price_sheet_create(
                name=f"sheet {number}",
                source="test",
                effective_date=date(2025, 1, number + 1),
                models={"m": {"input": 1, "output": 2}},
            )
        else:
            Suite.objects.create(name=f"suite-{number}", version="1", content_hash="x")


@pytest.mark.parametrize("kind", ("campaigns", "suites", "agents", "price-sheets"))
def test_list_query_count_is_the_same_for_one_and_three_items(api_for, bob, make_campaign, kind):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = api_for(bob)
    _add_items(kind, make_campaign, 1, 0)
    with CaptureQueriesContext(connection) as one:
        first = client.get(f"/api/{kind}/").json()["count"]
    _add_items(kind, make_campaign, 2, 1)
    with CaptureQueriesContext(connection) as three:
        second = client.get(f"/api/{kind}/").json()["count"]

    assert second == first + 2
    assert len(three) == len(one)
