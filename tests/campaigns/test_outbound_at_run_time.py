"""A stored endpoint the outbound policy refuses never gets a request when its attempt runs (issue 27 item 1).

Rows written before the policy (or by hand) are not checked at create time; the engine's client
checks every connection. Attempts run in this process (drain) against the scripted server on
127.0.0.1, which this test's policy does not list.
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


def test_an_attempt_at_a_refused_host_is_an_infra_error_and_sends_nothing(
    make_campaign, endpoint, settings, monkeypatch
):
    settings.ATTEMPT_MAX_RETRIES = 0
    monkeypatch.setenv("TB_OUTBOUND_ALLOWED_HOSTS", "*")  # what a deployment has: loopback not listed
    agent = AgentConfig.objects.create(  # stored without the create-time check, like an older row
        name="inside",
        kind=AgentConfig.Kind.OPENAI,
        model="m",
        base_url=endpoint.base_url,
        parameters={"retry": {"max_retries": 0, "base_delay_s": 0.0}},
    )
    campaign = make_campaign(agent, tasks=1, n=1)
    campaign.tasks.set(campaign.suite.tasks.filter(task_id=TASK_ID))

    campaign_start(campaign=campaign)
    drain(campaign)

    attempt = Attempt.objects.get(campaign=campaign)
    assert attempt.status == "infra_error"
    assert "outbound policy: host 127.0.0.1 is a loopback address" in attempt.error_detail
    assert endpoint.requests == []
