"""Issue 30: a first-time user sets up the agent under test from pages, tests it and launches with it.

Real Chromium against the live server; the agent is an OpenAI-compatible endpoint played by the
scripted server on 127.0.0.1. The key is only ever an environment variable's value: the pages take
and show its name, and the value appears in no page and no stored row.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.agents.models import AgentConfig
from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from tests.support.browser import signed_in_page
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET = "sk-test-never-shown-4242"
TASK = "retail/ticket_hold_carrier_exception"


@pytest.fixture
def endpoint(settings, monkeypatch):
    """The scripted endpoint, loopback allowed as a deployment would list a local gateway, and the key variable set."""
    settings.OUTBOUND_ALLOWED_HOSTS = ["*", "127.0.0.1"]
    monkeypatch.setenv("TB_KEY_SCRIPTED", SECRET)
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=1)).start()
    try:
        yield server
    finally:
        server.stop()


def test_first_time_user_creates_tests_and_launches_an_agent_from_pages(
    live_server, client, alice, starter_suite, endpoint
):
    seen_html: list[str] = []
    with signed_in_page(live_server, client, alice) as page:
        page.goto(f"{live_server.url}/campaigns/new/")
        page.click("#agent-setup a:has-text('Set up an OpenAI-compatible agent')")
        expect(page.locator("#key-variables")).to_contain_text("TB_KEY_SCRIPTED")  # allowed and set here
        page.fill("#id_name", "Scripted gateway")
        page.fill("#id_model", "scripted-model")
        page.fill("#id_base_url", endpoint.base_url)
        page.fill("#id_api_key_env", "TB_KEY_SCRIPTED")
        page.fill("#id_max_tokens", "256")
        seen_html.append(page.content())
        page.click("#agent-form button[type=submit]")
        expect(page.locator(".message")).to_contain_text("Agent Scripted gateway saved")
        seen_html.append(page.content())

        page.click("#test-connection")
        expect(page.locator(".message")).to_contain_text("Connected: scripted-model answered")
        seen_html.append(page.content())
        assert len(endpoint.requests_for("scripted-model")) == 1  # one real call

        page.click("#launch-with-agent")
        agent = AgentConfig.objects.get(name="Scripted gateway")
        assert page.locator("#id_agent").input_value() == f"pk:{agent.pk}"
        page.fill("#id_name", "First scripted run")
        page.select_option("#id_suite", str(starter_suite.pk))
        page.select_option("#id_tasks", label=TASK)
        page.fill("#id_n_attempts", "1")
        page.click("#launch-form button[type=submit]")
        page.wait_for_url("**/campaigns/*/")
        seen_html.append(page.content())
        page.goto(f"{live_server.url}/agents/")
        seen_html.append(page.content())
        assert page.errors == []

    campaign = Campaign.objects.get(name="First scripted run")
    assert campaign.agent_id == agent.pk
    assert agent.api_key_env == "TB_KEY_SCRIPTED" and agent.parameters == {"max_tokens": 256}
    assert agent.team.name == alice.teams.first().name
    assert Attempt.objects.filter(campaign=campaign).count() == 1
    assert all(SECRET not in html for html in seen_html)
    assert SECRET not in repr(list(AgentConfig.objects.values()))


def test_a_key_typed_where_its_variable_name_goes_is_refused_and_never_stored(
    live_server, client, alice, endpoint
):
    with signed_in_page(live_server, client, alice) as page:
        page.goto(f"{live_server.url}/agents/new/")
        page.fill("#id_name", "Pasted key")
        page.fill("#id_model", "scripted-model")
        page.fill("#id_base_url", endpoint.base_url)
        page.fill("#id_api_key_env", SECRET)
        page.click("#agent-form button[type=submit]")
        expect(page.locator("#agent-form .errorlist")).to_contain_text("This looks like a key")
        page.fill("#id_api_key_env", "OPENAI_KEY")
        page.click("#agent-form button[type=submit]")
        expect(page.locator("#agent-form .errorlist")).to_contain_text("is not an allowed key variable")
        assert page.errors == []
    assert not AgentConfig.objects.filter(name="Pasted key").exists()
