"""Every attempt of an endpoint agent stores what the endpoint said about the model that answered."""

from __future__ import annotations

import pytest

from apps.agents.models import AgentConfig
from apps.attempts.models import Attempt
from apps.campaigns.services import campaign_start
from tests.campaigns.conftest import drain
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint():
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=1)).start()
    yield server
    server.stop()


def test_attempt_stores_response_model_fingerprint_and_named_headers(
    make_campaign, endpoint, settings, monkeypatch
):
    from apps.campaigns import services

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)
    settings.PROVIDER_HEADERS = ["x-model-version"]
    endpoint.system_fingerprint = "fp_123"
    endpoint.reported_models["probe-model"] = "probe-model-0613"
    endpoint.response_headers = {"X-Model-Version": "v7", "X-Request-Id": "changes-every-time"}
    agent = AgentConfig.objects.create(
        name="endpoint agent",
        kind=AgentConfig.Kind.OPENAI,
        model="probe-model",
        base_url=endpoint.base_url,
        parameters={"retry": {"max_retries": 1, "base_delay_s": 0.01, "max_delay_s": 0.02}},
    )
    campaign = make_campaign(agent, tasks=1, n=2)

    campaign_start(campaign=campaign)
    drain(campaign)

    providers = list(
        Attempt.objects.filter(campaign=campaign).order_by("index").values_list("provider", flat=True)
    )
    assert (
        providers
        == [
            [
                {
                    "model": "probe-model-0613",
                    "system_fingerprint": "fp_123",
                    "headers": {"x-model-version": "v7"},
                    "calls": 2,
                }
            ]
        ]
        * 2
    )


def test_simulated_agents_store_no_provider_identity(make_campaign, monkeypatch):
    from apps.campaigns import services

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)
    campaign = make_campaign("sim:steady", tasks=1, n=1)
    campaign_start(campaign=campaign)
    drain(campaign)
    assert list(Attempt.objects.filter(campaign=campaign).values_list("provider", flat=True)) == [[]]
