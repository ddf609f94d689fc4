"""The outbound URL policy at create and edit time: a 400 naming the field, nothing stored (issue 27 item 1).

The deployment default (TB_OUTBOUND_ALLOWED_HOSTS unset: "*") lets any public host through and
refuses loopback, private and link-local (cloud metadata) addresses; the test configuration lists
loopback, so each test here sets the policy it means.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.agents.models import AgentConfig
from apps.campaigns.models import Campaign
from tests.api.conftest import error_of

pytestmark = pytest.mark.django_db

HOLD = "retail/ticket_hold_carrier_exception"
REDIS = "http://127.0.0.1:6379/v1"
METADATA = "http://169.254.169.254/latest/meta-data"
LOOPBACK = "host 127.0.0.1 is a loopback address; outbound requests to it are refused unless TB_OUTBOUND_ALLOWED_HOSTS lists it"
LINK_LOCAL = (
    "host 169.254.169.254 is a link-local address (cloud metadata services live there); outbound requests "
    "to it are refused unless TB_OUTBOUND_ALLOWED_HOSTS lists it"
)
AGENT = {"name": "probe", "kind": "openai", "model": "m", "api_key_env": "", "parameters": {}}


@pytest.fixture
def public_only(settings):
    settings.OUTBOUND_ALLOWED_HOSTS = ["*"]
    return settings


@pytest.mark.parametrize(("url", "problem"), [(REDIS, LOOPBACK), (METADATA, LINK_LOCAL)])
def test_agent_base_url_inside_the_network_is_a_400_naming_the_field(
    api_for, alice, public_only, url, problem
):
    response = api_for(alice).post("/api/agents/", {**AGENT, "base_url": url}, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"] == {"base_url": [problem]}
    assert AgentConfig.objects.filter(name="probe").count() == 0


def test_agent_edit_to_an_internal_base_url_is_a_400(api_for, alice, public_only):
    client = api_for(alice)
    created = client.post("/api/agents/", {**AGENT, "base_url": "https://8.8.8.8/v1"}, format="json")
    agent_id = created.json()["id"]

    response = client.patch(f"/api/agents/{agent_id}/", {"base_url": METADATA}, format="json")

    assert created.status_code == 201
    assert response.status_code == 400
    assert error_of(response)["details"] == {"base_url": [LINK_LOCAL]}
    assert AgentConfig.objects.get(pk=agent_id).base_url == "https://8.8.8.8/v1"


def test_a_listed_internal_endpoint_is_accepted(api_for, alice, settings):
    settings.OUTBOUND_ALLOWED_HOSTS = ["*", "127.0.0.1"]

    response = api_for(alice).post("/api/agents/", {**AGENT, "base_url": REDIS}, format="json")

    assert response.status_code == 201


def test_a_host_off_a_narrow_allow_list_is_refused(api_for, alice, settings):
    settings.OUTBOUND_ALLOWED_HOSTS = ["api.openai.com", "*.openai.azure.com"]

    response = api_for(alice).post("/api/agents/", {**AGENT, "base_url": "https://8.8.8.8/v1"}, format="json")

    assert error_of(response)["details"] == {
        "base_url": ["host 8.8.8.8 is not in TB_OUTBOUND_ALLOWED_HOSTS (api.openai.com, *.openai.azure.com)"]
    }


@pytest.mark.parametrize(
    ("role", "what", "url", "problem"),
    [("judge", "judge", METADATA, LINK_LOCAL), ("user_simulator", "user simulator", REDIS, LOOPBACK)],
)
def test_evaluator_base_url_on_post_campaigns_is_a_400_naming_the_field(
    client, alice, team_a, starter_suite, public_only, role, what, url, problem
):
    client.force_login(alice)
    evaluator = {"kind": "llm", "model": "m", "base_url": url, "api_key_env": ""}
    if role == "user_simulator":
        evaluator["prompt"] = "Play the customer: {query} {user_context}; say {stop_token} when done."
    body = {
        "name": "probe campaign",
        "team": team_a.pk,
        "agent_spec": "golden",
        "suite": starter_suite.pk,
        "task_ids": [HOLD],
        "n_attempts": 1,
        role: evaluator,
    }

    response = client.post("/api/campaigns/", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["error"]["details"] == {role: [f"{what}: base_url: {problem}"]}
    assert Campaign.objects.filter(name="probe campaign").count() == 0


def test_launch_page_puts_a_refused_judge_base_url_on_its_field(
    client, alice, team_a, starter_suite, public_only
):
    client.force_login(alice)
    response = client.post(
        reverse("campaigns:launch"),
        {
            "name": "launched at redis",
            "team": team_a.pk,
            "agent": "spec:golden",
            "suite": starter_suite.pk,
            "domains": "retail",
            "n_attempts": 1,
            "seed": 0,
            "user_kind": "scripted",
            "judge_kind": "llm",
            "judge_model": "judge-model",
            "judge_base_url": REDIS,
            "judge_api_key_env": "",
            "judge_prompt": "Answer yes or no on the first line.",
        },
    )

    assert response.status_code == 200
    assert response.context["form"].errors["judge_base_url"] == [f"judge: base_url: {LOOPBACK}"]
    assert Campaign.objects.filter(name="launched at redis").count() == 0


def test_admin_agent_form_refuses_an_internal_base_url(public_only):
    from apps.agents.admin import AgentConfigForm

    form = AgentConfigForm(
        data={
            "name": "admin probe",
            "kind": "openai",
            "model": "m",
            "base_url": METADATA,
            "max_concurrency": 4,
        }
    )

    assert form.is_valid() is False
    assert form.errors["base_url"] == [f"base_url: {LINK_LOCAL}"]
