"""Agent configurations (never a key) and price sheets."""

from __future__ import annotations

import pytest

from apps.agents.models import AgentConfig, PriceSheet
from apps.agents.services import agent_config_for
from tests.api.conftest import error_of

pytestmark = pytest.mark.django_db

OPENAI_AGENT = {
    "name": "gpt endpoint",
    "kind": "openai",
    "model": "gpt-4.1-mini",
    "base_url": "http://127.0.0.1:9000/v1",
    "api_key_env": "TB_KEY_OPENAI",
    "parameters": {"temperature": 0.2},
    "max_concurrency": 4,
}


def test_operator_creates_an_agent_with_an_env_var_name(api_for, alice):
    response = api_for(alice).post("/api/agents/", OPENAI_AGENT, format="json")

    assert response.status_code == 201
    agent = AgentConfig.objects.get(name="gpt endpoint")
    assert (agent.kind, agent.model, agent.api_key_env, agent.parameters, agent.max_concurrency) == (
        "openai",
        "gpt-4.1-mini",
        "TB_KEY_OPENAI",
        {"temperature": 0.2},
        4,
    )
    assert response.json()["is_simulation"] is False


def test_agent_body_with_api_key_is_rejected_and_nothing_stored(api_for, alice):
    response = api_for(alice).post("/api/agents/", {**OPENAI_AGENT, "api_key": "sk-secret"}, format="json")

    assert response.status_code == 400
    error = error_of(response)
    assert list(error["details"]) == ["api_key"]
    assert "environment variable" in error["message"]
    assert "sk-secret" not in response.content.decode()
    assert AgentConfig.objects.filter(name="gpt endpoint").count() == 0


def test_agent_key_hidden_in_parameters_headers_is_rejected(api_for, alice):
    body = {**OPENAI_AGENT, "parameters": {"headers": {"Authorization": "Bearer sk-secret"}}}

    response = api_for(alice).post("/api/agents/", body, format="json")

    assert response.status_code == 400
    assert list(error_of(response)["details"]) == ["parameters.headers.Authorization"]


def test_agent_api_key_env_must_be_a_variable_name(api_for, alice):
    response = api_for(alice).post(
        "/api/agents/", {**OPENAI_AGENT, "api_key_env": "sk-live 123"}, format="json"
    )

    assert response.status_code == 400
    assert error_of(response)["details"] == {
        "api_key_env": ["must be an environment variable name like TB_KEY_OPENAI, not a key"]
    }


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "AWS_SECRET_ACCESS_KEY"])
def test_agent_api_key_env_outside_the_allow_list_is_refused_on_create(api_for, alice, name):
    response = api_for(alice).post("/api/agents/", {**OPENAI_AGENT, "api_key_env": name}, format="json")

    assert response.status_code == 400
    assert list(error_of(response)["details"]) == ["api_key_env"]
    assert AgentConfig.objects.filter(name="gpt endpoint").count() == 0


def test_agent_api_key_env_outside_the_allow_list_is_refused_on_edit(api_for, alice):
    agent = AgentConfig.objects.create(name="draft agent", kind="openai", model="a", api_key_env="TB_KEY_A")

    response = api_for(alice).patch(f"/api/agents/{agent.pk}/", {"api_key_env": "SECRET_KEY"}, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"] == {
        "api_key_env": ["'SECRET_KEY' is one of the worker's own settings and is never sent to an endpoint"]
    }
    agent.refresh_from_db()
    assert agent.api_key_env == "TB_KEY_A"


def test_administrator_widens_the_allow_list_by_setting(api_for, alice, settings):
    settings.API_KEY_ENV_ALLOWED = ["TB_KEY_*", "OPENAI_API_KEY"]
    client = api_for(alice)

    allowed = client.post("/api/agents/", {**OPENAI_AGENT, "api_key_env": "OPENAI_API_KEY"}, format="json")
    refused = client.post(
        "/api/agents/", {**OPENAI_AGENT, "name": "other", "api_key_env": "ANTHROPIC_API_KEY"}, format="json"
    )

    assert allowed.status_code == 201
    assert error_of(refused)["details"] == {
        "api_key_env": [
            "'ANTHROPIC_API_KEY' is not an allowed key variable; allowed: TB_KEY_*, OPENAI_API_KEY "
            "(TB_API_KEY_ENV_ALLOWED)"
        ]
    }


def test_agent_options_are_accepted_and_stored(api_for, alice):
    parameters = {"temperature": 0.2, "end_marker": "###DONE###", "max_attempt_tokens": 5000}

    response = api_for(alice).post("/api/agents/", {**OPENAI_AGENT, "parameters": parameters}, format="json")

    assert response.status_code == 201
    assert AgentConfig.objects.get(name="gpt endpoint").parameters == parameters


@pytest.mark.parametrize(
    ("parameters", "field"),
    [
        ({"max_attempt_tokens": "lots"}, "parameters.max_attempt_tokens"),
        ({"end_marker": ""}, "parameters.end_marker"),
        ({"temprature": 0.2}, "parameters.temprature"),
        ({"temperature": "hot"}, "parameters.temperature"),
        ({"retry": {"max_retries": "x"}}, "parameters.retry.max_retries"),
    ],
)
def test_agent_parameters_its_kind_cannot_run_are_a_400_naming_the_field(api_for, alice, parameters, field):
    client = api_for(alice)
    agent = AgentConfig.objects.create(name="draft agent", kind="openai", model="a")

    created = client.post("/api/agents/", {**OPENAI_AGENT, "parameters": parameters}, format="json")
    edited = client.patch(f"/api/agents/{agent.pk}/", {"parameters": parameters}, format="json")

    assert (created.status_code, list(error_of(created)["details"])) == (400, [field])
    assert (edited.status_code, list(error_of(edited)["details"])) == (400, [field])


def test_simulated_agent_takes_only_a_persona_switch(api_for, alice):
    client = api_for(alice)
    base = {"kind": "sim", "persona": "steady"}

    wrong = client.post(
        "/api/agents/", {**base, "name": "a", "parameters": {"end_marker": "x"}}, format="json"
    )
    switch = {"switch_at": "2999-01-01T00:00:00+00:00", "switch_to": "cautious"}
    right = client.post("/api/agents/", {**base, "name": "b", "parameters": switch}, format="json")
    typo = client.post(
        "/api/agents/", {**base, "name": "c", "parameters": {**switch, "switch_to": "stedy"}}, format="json"
    )

    assert error_of(wrong)["details"] == {
        "parameters.end_marker": ["unknown parameter; simulated agents take switch_at and switch_to"]
    }
    assert right.status_code == 201
    assert list(error_of(typo)["details"]) == ["parameters.switch_to"]
    golden = client.post(
        "/api/agents/", {"name": "g", "kind": "golden", "parameters": {"x": 1}}, format="json"
    )
    assert error_of(golden)["details"] == {
        "parameters": ["agents of kind 'golden' take no parameters, got x"]
    }


def test_simulated_agent_needs_a_known_persona(api_for, alice):
    client = api_for(alice)

    missing = client.post("/api/agents/", {"name": "sim", "kind": "sim"}, format="json")
    created = client.post("/api/agents/", {"name": "sim", "kind": "sim", "persona": "steady"}, format="json")

    assert error_of(missing)["details"] == {"persona": ["required for simulated agents"]}
    assert (created.status_code, created.json()["is_simulation"]) == (201, True)


def test_agent_name_must_be_unique(api_for, alice):
    agent_config_for("golden")

    response = api_for(alice).post(
        "/api/agents/", {"name": "golden (harness self-check)", "kind": "golden"}, format="json"
    )

    assert error_of(response)["details"] == {"name": ["an agent configuration with this name exists"]}


def test_operator_updates_an_unused_agent(api_for, alice):
    agent = AgentConfig.objects.create(name="draft agent", kind="openai", model="a")

    response = api_for(alice).patch(
        f"/api/agents/{agent.pk}/", {"model": "b", "max_concurrency": 2}, format="json"
    )

    assert response.status_code == 200
    agent.refresh_from_db()
    assert (agent.model, agent.max_concurrency) == ("b", 2)


def test_agent_used_by_a_campaign_keeps_its_behaviour(api_for, alice, make_campaign):
    campaign = make_campaign("sim:careless", tasks=1, n=1)
    client = api_for(alice)

    refused = client.patch(f"/api/agents/{campaign.agent_id}/", {"persona": "steady"}, format="json")
    renamed = client.patch(
        f"/api/agents/{campaign.agent_id}/", {"name": "careless v1", "max_concurrency": 3}, format="json"
    )

    assert refused.status_code == 409
    assert error_of(refused)["message"].endswith(
        "persona cannot change (create a new agent configuration instead)"
    )
    assert (renamed.status_code, renamed.json()["name"], renamed.json()["persona"]) == (
        200,
        "careless v1",
        "careless",
    )


def test_agent_patch_with_api_key_is_rejected(api_for, alice):
    agent = AgentConfig.objects.create(name="draft agent", kind="openai", model="a")

    response = api_for(alice).patch(f"/api/agents/{agent.pk}/", {"API-KEY": "sk-1"}, format="json")

    assert response.status_code == 400
    assert list(error_of(response)["details"]) == ["API-KEY"]


def test_viewer_reads_agents_without_any_secret_field(api_for, bob):
    AgentConfig.objects.create(**dict(OPENAI_AGENT.items()))

    row = api_for(bob).get("/api/agents/").json()["results"][0]

    assert row["api_key_env"] == "TB_KEY_OPENAI"
    assert [key for key in row if "key" in key] == ["api_key_env"]


PRICES = {
    "name": "March list",
    "source": "vendor page, 2025-03-01",
    "effective_date": "2025-03-01",
    "prices": {"gpt-4.1-mini": {"input": "0.4", "cached_input": "0.1", "output": "1.6"}},
}


def test_operator_creates_a_price_sheet(api_for, alice, bob):
    created = api_for(alice).post("/api/price-sheets/", PRICES, format="json")

    assert created.status_code == 201
    sheet = PriceSheet.objects.get(name="March list")
    assert sheet.prices == {
        "gpt-4.1-mini": {"input": "0.400000", "cached_input": "0.100000", "output": "1.600000"}
    }
    read = api_for(bob).get(f"/api/price-sheets/{sheet.pk}/").json()
    assert (read["source"], read["effective_date"]) == ("vendor page, 2025-03-01", "2025-03-01")


def test_price_sheet_rejects_negative_prices_naming_the_model(api_for, alice):
    body = {**PRICES, "prices": {"gpt-4.1-mini": {"input": "-1", "output": "1"}}}

    response = api_for(alice).post("/api/price-sheets/", body, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"] == {
        "prices": {"gpt-4.1-mini": {"input": ["Ensure this value is greater than or equal to 0."]}}
    }
    assert PriceSheet.objects.count() == 0


def test_price_sheet_needs_at_least_one_model(api_for, alice):
    response = api_for(alice).post("/api/price-sheets/", {**PRICES, "prices": {}}, format="json")

    assert error_of(response)["details"] == {"prices": ["This dictionary may not be empty."]}


def test_triager_cannot_create_price_sheets(api_for, trish):
    response = api_for(trish).post("/api/price-sheets/", PRICES, format="json")

    assert response.status_code == 403
    assert PriceSheet.objects.count() == 0
