"""Agents belong to a team: operators edit only their teams' agents (administrators any), and
other teams' agents are neither listed, shown, edited nor launched with, in the API and on pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from apps.agents.models import AgentConfig
from tests.api.conftest import api_for, error_of  # noqa: F401 (api_for is a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def agents(team_a, team_b):
    """One agent of each team and one shared."""
    return {
        "a": AgentConfig.objects.create(name="team a agent", kind="openai", model="m", team=team_a),
        "b": AgentConfig.objects.create(name="team b agent", kind="openai", model="m", team=team_b),
        "shared": AgentConfig.objects.create(name="shared agent", kind="openai", model="m"),
    }


@pytest.fixture
def bert(make_user, team_b):
    return make_user("bert", role="operator", teams=[team_b])


def test_api_lists_and_shows_shared_agents_and_the_teams_own_only(api_for, alice, agents):
    client = api_for(alice)

    listed = [row["name"] for row in client.get("/api/agents/").json()["results"]]
    other = client.get(f"/api/agents/{agents['b'].pk}/")

    assert listed == ["shared agent", "team a agent"]
    assert other.status_code == 404


def test_api_operator_edit_of_another_teams_agent_is_a_404_and_changes_nothing(api_for, bert, agents):
    response = api_for(bert).patch(f"/api/agents/{agents['a'].pk}/", {"max_concurrency": 1}, format="json")

    assert response.status_code == 404
    assert AgentConfig.objects.get(pk=agents["a"].pk).max_concurrency == 256


def test_api_operator_edit_of_a_shared_agent_is_a_403(api_for, alice, agents):
    response = api_for(alice).patch(
        f"/api/agents/{agents['shared'].pk}/", {"max_concurrency": 1}, format="json"
    )

    assert (response.status_code, error_of(response)["message"]) == (
        403,
        "a shared agent: only administrators edit it",
    )
    assert AgentConfig.objects.get(pk=agents["shared"].pk).max_concurrency == 256


def test_api_operator_edits_their_teams_agent_and_admin_edits_any(api_for, alice, admin_user_persona, agents):
    own = api_for(alice).patch(f"/api/agents/{agents['a'].pk}/", {"max_concurrency": 2}, format="json")
    by_admin = api_for(admin_user_persona).patch(
        f"/api/agents/{agents['b'].pk}/", {"max_concurrency": 3}, format="json"
    )

    assert (own.status_code, own.json()["max_concurrency"]) == (200, 2)
    assert (by_admin.status_code, by_admin.json()["max_concurrency"]) == (200, 3)


def test_api_new_agent_belongs_to_the_operators_team_and_never_to_another(api_for, alice, team_a, team_b):
    client = api_for(alice)

    made = client.post("/api/agents/", {"name": "mine", "kind": "golden"}, format="json")
    foreign = client.post(
        "/api/agents/", {"name": "theirs", "kind": "golden", "team": team_b.pk}, format="json"
    )
    shared = client.post("/api/agents/", {"name": "ours", "kind": "golden", "team": None}, format="json")

    assert (made.status_code, made.json()["team"]) == (201, team_a.pk)
    assert (foreign.status_code, error_of(foreign)["details"]) == (400, {"team": ["not one of your teams"]})
    assert (shared.status_code, error_of(shared)["details"]) == (
        400,
        {"team": ["only administrators make shared agents"]},
    )


def test_api_campaign_with_another_teams_agent_is_refused(api_for, bert, agents, team_b, starter_suite):
    response = api_for(bert).post(
        "/api/campaigns/",
        {
            "name": "borrowed",
            "team": team_b.pk,
            "agent": agents["a"].pk,
            "suite": starter_suite.pk,
            "n_attempts": 1,
        },
        format="json",
    )

    assert (response.status_code, error_of(response)["details"]) == (
        400,
        {"agent": ["Invalid pk - object does not exist."]},
    )


def test_launch_page_offers_and_accepts_only_shared_agents_and_the_teams_own(client, bert, agents):
    client.force_login(bert)

    page = client.get("/campaigns/new/")
    offered = [label for _, group in page.context["form"].fields["agent"].choices for _, label in group]
    posted = client.post("/campaigns/new/", {"name": "borrowed", "agent": f"pk:{agents['a'].pk}"})

    assert [name for name in offered if "agent" in name] == ["shared agent", "team b agent"]
    assert posted.context["form"].errors["agent"] == [
        f"Select a valid choice. pk:{agents['a'].pk} is not one of the available choices."
    ]


def test_admin_page_of_another_teams_agent_is_a_404_for_a_staff_operator(client, bert, agents):
    bert.is_staff = True
    bert.save()
    bert.user_permissions.add(
        *Permission.objects.filter(codename__in=["change_agentconfig", "view_agentconfig"])
    )
    client.force_login(bert)

    other = client.post(f"/admin/agents/agentconfig/{agents['a'].pk}/change/", {"name": "taken over"})
    shared = client.post(f"/admin/agents/agentconfig/{agents['shared'].pk}/change/", {"name": "taken over"})
    own = client.get(f"/admin/agents/agentconfig/{agents['b'].pk}/change/")

    assert (other.status_code, shared.status_code, own.status_code) == (404, 403, 200)
    assert set(AgentConfig.objects.values_list("name", flat=True)) == {
        "team a agent",
        "team b agent",
        "shared agent",
    }


@pytest.mark.django_db(transaction=True)
def test_migration_gives_an_agent_to_the_one_team_that_uses_it_and_leaves_the_rest_shared():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    old = executor.migrate([("agents", "0002_harness_check_agents")]).apps
    try:
        user = old.get_model("auth", "User").objects.create(username="old-owner")
        teams = [old.get_model("core", "Team").objects.create(name=n, slug=n) for n in ("one", "two")]
        suite = old.get_model("suites", "Suite").objects.create(name="s", version="1", content_hash="s")
        agent = old.get_model("agents", "AgentConfig").objects
        only_one, both, unused = (agent.create(name=n, kind="golden") for n in ("only one", "both", "unused"))
        for number, (team, used) in enumerate([(teams[0], only_one), (teams[0], both), (teams[1], both)]):
            old.get_model("campaigns", "Campaign").objects.create(
                name=f"c{number}", team=team, owner=user, agent=used, suite=suite, harness_version="h"
            )

        MigrationExecutor(connection).migrate(latest)

        assert dict(AgentConfig.objects.values_list("name", "team__name")) == {
            "only one": "one",
            "both": None,
            "unused": None,
        }
    finally:
        MigrationExecutor(connection).migrate(latest)
