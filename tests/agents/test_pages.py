"""The agent and price-sheet pages: who may do what, the rules the services keep, query counts."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.agents.models import AgentConfig, PriceSheet
from apps.agents.services import agent_config_create

pytestmark = pytest.mark.django_db

PRICES = "model-a, 1, 0.5, 4, 4\nmodel-b, 0.2, 0.1, 0.8, 0.8"


def _agent(name: str, team) -> AgentConfig:
    return agent_config_create(
        name=name, kind="openai", model="m", base_url="https://api.example.com/v1", team=team
    )


def test_viewers_see_their_teams_agents_operators_create_outsiders_get_404(
    client, bob, alice, erin, team_a, team_b
):
    ours, theirs = _agent("Ours", team_a), _agent("Theirs", team_b)
    client.force_login(bob)
    listing = client.get("/agents/").content.decode()
    assert "Ours" in listing and "Theirs" not in listing
    assert client.get(f"/agents/{theirs.pk}/").status_code == 404
    assert client.get("/agents/new/").status_code == 403  # viewer
    assert client.post(f"/agents/{ours.pk}/test/").status_code == 403
    client.force_login(alice)
    response = client.post(
        "/agents/new/",
        {
            "name": "New one",
            "team": team_a.pk,
            "model": "gpt-x",
            "base_url": "https://api.example.com/v1",
            "api_key_env": "TB_KEY_X",
            "temperature": "0.2",
            "max_concurrency": "8",
            "extra_parameters": '{"seed": 7}',
        },
    )
    created = AgentConfig.objects.get(name="New one")
    assert response.status_code == 302 and response["Location"] == f"/agents/{created.pk}/"
    assert created.parameters == {"seed": 7, "temperature": 0.2}
    assert (created.team, created.api_key_env, created.max_concurrency) == (team_a, "TB_KEY_X", 8)


def test_an_agent_in_use_keeps_its_behaviour_and_the_page_says_why(client, alice, team_a, make_campaign):
    campaign = make_campaign("sim:steady", tasks=1, n=1)
    agent = _agent("Used", team_a)
    campaign.agent = agent
    campaign.save(update_fields=["agent"])
    client.force_login(alice)
    data = {
        "name": "Used",
        "team": team_a.pk,
        "model": "other-model",
        "base_url": agent.base_url,
        "max_concurrency": 256,
    }
    page = client.post(f"/agents/{agent.pk}/", data).content.decode()
    assert "is used by campaigns; model cannot change" in page
    agent.refresh_from_db()
    assert agent.model == "m"
    data["model"], data["max_concurrency"] = "m", 4  # not a behaviour field: fine
    assert client.post(f"/agents/{agent.pk}/", data).status_code == 302
    agent.refresh_from_db()
    assert agent.max_concurrency == 4


def test_price_sheets_are_created_and_edited_until_a_campaign_uses_them(client, bob, alice, make_campaign):
    client.force_login(alice)
    response = client.post(
        "/price-sheets/new/",
        {"name": "Q3", "source": "vendor list", "effective_date": "2026-07-01", "prices": PRICES},
    )
    sheet = PriceSheet.objects.get(name="Q3")
    assert response["Location"] == f"/price-sheets/{sheet.pk}/"
    assert float(sheet.prices["model-a"]["output"]) == 4.0 and sheet.effective_date == date(2026, 7, 1)
    edited = {
        "name": "Q3",
        "source": "vendor list",
        "effective_date": "2026-07-02",
        "prices": "model-a, 2, 1, 8, 8",
    }
    assert client.post(f"/price-sheets/{sheet.pk}/", edited).status_code == 302
    sheet.refresh_from_db()
    assert list(sheet.prices) == ["model-a"] and float(sheet.prices["model-a"]["input"]) == 2.0
    bad = client.post(
        "/price-sheets/new/", {**edited, "name": "Bad", "prices": "model-a, 1, 2"}
    ).content.decode()
    assert "expected a model and 4 prices, got 3 values" in bad

    campaign = make_campaign("sim:steady", tasks=1, n=1)
    campaign.price_sheet = sheet
    campaign.save(update_fields=["price_sheet"])
    page = client.post(
        f"/price-sheets/{sheet.pk}/", {**edited, "prices": "model-a, 9, 9, 9, 9"}
    ).content.decode()
    assert 'id="sheet-in-use"' in page and 'id="price-sheet-form"' not in page
    sheet.refresh_from_db()
    assert float(sheet.prices["model-a"]["input"]) == 2.0
    client.force_login(bob)
    assert client.get("/price-sheets/new/").status_code == 403
    assert client.get(f"/price-sheets/{sheet.pk}/").status_code == 200


def test_the_agent_list_reads_a_constant_number_of_queries(client, bob, team_a):
    client.force_login(bob)
    _agent("One", team_a)
    with CaptureQueriesContext(connection) as one:
        client.get("/agents/")
    _agent("Two", team_a)
    _agent("Three", team_a)
    with CaptureQueriesContext(connection) as three:
        client.get("/agents/")
    assert len(three) == len(one)
