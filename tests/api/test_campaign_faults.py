"""The fault plan through the API: created, stored normalised, read back; a bad plan names its field."""

from __future__ import annotations

import pytest

from apps.campaigns.models import Campaign
from tests.api.conftest import error_of
from tests.api.test_campaigns import _body

pytestmark = pytest.mark.django_db


def test_create_with_a_fault_plan_stores_and_returns_it(api_for, alice, starter_suite, team_a):
    plan = {"kinds": ["error_after_commit"], "at_calls": [0], "seed": 5}
    client = api_for(alice)

    response = client.post("/api/campaigns/", _body(starter_suite, team_a, fault_plan=plan), format="json")

    assert response.status_code == 201
    stored = Campaign.objects.get(pk=response.json()["id"]).fault_plan
    assert stored == {
        "kinds": ["error_after_commit"],
        "rate": 0.0,
        "at_calls": [0],
        "tools": "writes",
        "tool_names": [],
        "seed": 5,
        "slow_ms": 200.0,
        "timeout_s": 30.0,
    }
    assert response.json()["fault_plan"] == stored
    assert client.get(f"/api/campaigns/{response.json()['id']}/").json()["fault_plan"] == stored


def test_create_without_a_plan_reads_back_empty(api_for, alice, starter_suite, team_a):
    response = api_for(alice).post("/api/campaigns/", _body(starter_suite, team_a), format="json")

    assert response.status_code == 201
    assert response.json()["fault_plan"] == {}


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"kinds": ["gremlins"]}, "kinds: unknown gremlins"),
        ({"kinds": ["slow_reply"], "rate": 2}, "rate: must be between 0 and 1, got 2.0"),
        ({"kinds": ["slow_reply"], "tools": "named"}, "tool_names: name the tools when tools is 'named'"),
        ({"kinds": ["slow_reply"], "colour": "red"}, "unknown field(s): colour"),
    ],
)
def test_a_bad_plan_is_a_400_naming_the_field(api_for, alice, starter_suite, team_a, plan, message):
    response = api_for(alice).post(
        "/api/campaigns/", _body(starter_suite, team_a, fault_plan=plan), format="json"
    )

    assert response.status_code == 400
    details = error_of(response)["details"]["fault_plan"]
    assert [detail.split(" (known")[0] for detail in details] == [message]
    assert Campaign.objects.count() == 0
