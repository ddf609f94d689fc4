"""Agent options reach the agent, and a key variable the allow-list refuses never leaves the worker.

Attempts run in this process (drain) against the scripted OpenAI-compatible server.
"""

from __future__ import annotations

import pytest

from apps.agents.models import AgentConfig
from apps.attempts.models import Attempt
from apps.campaigns.services import campaign_start
from tests.campaigns.conftest import drain
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = pytest.mark.django_db

TASK_ID = "retail/ticket_hold_carrier_exception"


@pytest.fixture
def endpoint():
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=0)).start()
    yield server
    server.stop()


def _attempt(make_campaign, server, *, parameters: dict, api_key_env: str = "", model: str = "m") -> Attempt:
    agent = AgentConfig.objects.create(
        name=f"agent {model}",
        kind=AgentConfig.Kind.OPENAI,
        model=model,
        base_url=server.base_url,
        api_key_env=api_key_env,
        parameters={"retry": {"max_retries": 0, "base_delay_s": 0.0}, **parameters},
    )
    campaign = make_campaign(agent, tasks=1, n=1)
    campaign.tasks.set(campaign.suite.tasks.filter(task_id=TASK_ID))
    campaign_start(campaign=campaign)
    drain(campaign)
    return Attempt.objects.get(campaign=campaign)


def test_end_marker_ends_the_attempt_as_agent_done_and_is_stripped(make_campaign, endpoint, settings):
    settings.ATTEMPT_MAX_RETRIES = 0
    endpoint.script("marker-model", [{"text": "Your ticket is on hold now. ###DONE###"}])

    attempt = _attempt(make_campaign, endpoint, parameters={"end_marker": "###DONE###"}, model="marker-model")

    assert (attempt.status, attempt.termination) == ("done", "agent_done")
    replies = [m["content"] for m in attempt.result["transcript"]["messages"] if m["role"] == "assistant"]
    assert replies == ["Your ticket is on hold now."]


def test_max_attempt_tokens_is_passed_to_the_agent_not_refused_as_an_endpoint_field(
    make_campaign, endpoint, settings
):
    settings.ATTEMPT_MAX_RETRIES = 0
    endpoint.script(
        "budget-model",
        [
            {
                "tool_calls": [{"name": "get_ticket", "arguments": {"ticket_id": 20}}],
                "usage": {"prompt_tokens": 900},
            }
        ]
        * 5,
    )

    attempt = _attempt(make_campaign, endpoint, parameters={"max_attempt_tokens": 1000}, model="budget-model")

    # Before: infra_error "agent endpoint config: unknown field(s): max_attempt_tokens" on every attempt.
    assert (attempt.status, attempt.termination) == ("done", "agent_error")
    assert attempt.error_detail.endswith("token limit 1000 reached (1856 tokens spent)")
    assert len(endpoint.requests_for("budget-model")) == 2  # the budget stops the third call


def test_refused_key_variable_is_never_sent_and_the_attempt_says_why(
    make_campaign, endpoint, settings, monkeypatch
):
    settings.ATTEMPT_MAX_RETRIES = 0
    monkeypatch.setenv("SECRET_KEY", "the-django-secret")

    attempt = _attempt(make_campaign, endpoint, parameters={}, api_key_env="SECRET_KEY", model="thief")

    assert attempt.status == "infra_error"
    assert "agent api_key_env: 'SECRET_KEY' is one of the worker's own settings" in attempt.error_detail
    assert endpoint.requests == []


def test_allowed_key_variable_is_used(make_campaign, endpoint, settings, monkeypatch):
    settings.ATTEMPT_MAX_RETRIES = 0
    monkeypatch.setenv("TB_KEY_TEST", "sk-test-123")
    endpoint.script("keyed", [{"text": "Done."}])

    attempt = _attempt(make_campaign, endpoint, parameters={}, api_key_env="TB_KEY_TEST", model="keyed")

    assert (attempt.status, attempt.termination) == ("done", "user_done")
    assert len(endpoint.requests_for("keyed")) == 1  # the scripted server never records the key itself
