"""NUL characters (PostgreSQL refuses them in text and jsonb) are stored shown as ␀, and an attempt
whose result cannot be stored still ends (infra error, usage kept) instead of staying running.

Attempts run in this process (drain) against the scripted OpenAI-compatible server; the
PostgreSQL test runs in the integration subset.
"""

from __future__ import annotations

import pytest
from django.db import DataError

from apps.agents.models import AgentConfig
from apps.attempts import attempt_sql
from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_start
from apps.core.text import without_nul
from tests.campaigns.conftest import drain
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

TASK_ID = "retail/ticket_hold_carrier_exception"


@pytest.fixture
def endpoint():
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=0)).start()
    yield server
    server.stop()


def _run(make_campaign, server, model: str) -> Attempt:
    agent = AgentConfig.objects.create(
        name=f"agent {model}",
        kind=AgentConfig.Kind.OPENAI,
        model=model,
        base_url=server.base_url,
        parameters={"retry": {"max_retries": 0, "base_delay_s": 0.0}},
    )
    campaign = make_campaign(agent, tasks=1, n=1)
    campaign.tasks.set(campaign.suite.tasks.filter(task_id=TASK_ID))
    campaign_start(campaign=campaign)
    drain(campaign)
    return Attempt.objects.get(campaign=campaign)


def _replies(attempt: Attempt) -> list[str]:
    return [m["content"] for m in attempt.result["transcript"]["messages"] if m["role"] == "assistant"]


def test_without_nul_replaces_nul_in_keys_and_values_and_leaves_clean_values_alone():
    clean = {"a": ["b", {"c": 1}]}
    assert without_nul(clean) is clean
    assert without_nul({"k\x00": ["v\x00w", 3, None]}) == {"k\u2400": ["v\u2400w", 3, None]}
    assert without_nul("x\x00") == "x\u2400"


@pytest.mark.django_db
def test_reply_with_nul_is_stored_shown_as_the_nul_symbol(make_campaign, endpoint, settings):
    settings.ATTEMPT_MAX_RETRIES = 0
    endpoint.script("nul-model", [{"text": "Your ticket\x00 is on hold."}])

    attempt = _run(make_campaign, endpoint, "nul-model")

    assert attempt.status == "done"
    assert _replies(attempt) == ["Your ticket\u2400 is on hold."]


@pytest.mark.django_db
def test_result_the_database_refuses_ends_the_attempt_as_infra_error_with_its_usage(
    make_campaign, endpoint, settings, monkeypatch
):
    settings.ATTEMPT_MAX_RETRIES = 0
    endpoint.script(
        "usage-model", [{"text": "Done.", "usage": {"prompt_tokens": 700, "completion_tokens": 30}}]
    )
    real = attempt_sql.update_owned
    calls = []

    def refuse_first(**kwargs):
        calls.append(kwargs["values"]["status"])
        if len(calls) == 1:
            raise DataError("unsupported Unicode escape sequence")
        return real(**kwargs)

    monkeypatch.setattr(attempt_sql, "update_owned", refuse_first)

    attempt = _run(make_campaign, endpoint, "usage-model")

    assert (attempt.status, calls) == ("infra_error", ["done", "infra_error"])
    assert attempt.error_detail == (
        "harness error: the result could not be stored: DataError: unsupported Unicode escape sequence"
    )
    assert (attempt.input_tokens, attempt.output_tokens) == (700, 30)
    assert Campaign.objects.get(pk=attempt.campaign_id).status == "done"


@pytest.mark.integration
@pytest.mark.django_db
def test_outcome_with_nul_saves_on_postgresql(make_campaign):
    from apps.attempts.outcomes import AttemptOutcome

    campaign = make_campaign("sim:steady", tasks=1, n=1)
    attempt = Attempt.objects.create(campaign=campaign, task=campaign.tasks.first(), index=0)
    outcome = AttemptOutcome(
        status="done",
        categories=["a\x00"],
        result={"transcript": {"messages": [{"role": "assistant", "content": "a\x00b"}]}},
        error_detail="e\x00",
    )

    Attempt.objects.filter(pk=attempt.pk).update(**outcome.as_fields())  # DataError before

    attempt.refresh_from_db()
    assert (
        attempt.result["transcript"]["messages"][0]["content"],
        attempt.categories,
        attempt.error_detail,
    ) == (
        "a\u2400b",
        ["a\u2400"],
        "e\u2400",
    )
