"""Every token billed: a run that ended in an infrastructure error and was re-run (a retry within
the budget, or a resume) stays on the attempt as a superseded run, and the attempt's usage and cost
equal the endpoint's own bill over every call it answered (SPEC §5: infra-error attempts are billed).

Attempts run in this process (drain) against the scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import time
from datetime import date
from decimal import Decimal

import pytest

from apps.agents.models import AgentConfig, PriceSheet
from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_resume, campaign_start
from apps.core.templatetags.core_format import money
from tb_engine.pricing import PriceList, cost_of
from tb_engine.transcript import Usage
from tests.campaigns.conftest import drain
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = pytest.mark.django_db

TASK_ID = "retail/ticket_hold_carrier_exception"
MODEL = "retried-model"
PRICES = {MODEL: {"input": "2.00", "cached_input": "0.50", "output": "8.00"}}


@pytest.fixture
def endpoint():
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=0)).start()
    yield server
    server.stop()


def _campaign(make_campaign, server) -> Campaign:
    agent = AgentConfig.objects.create(
        name="retried agent",
        kind=AgentConfig.Kind.OPENAI,
        model=MODEL,
        base_url=server.base_url,
        parameters={"retry": {"max_retries": 0, "base_delay_s": 0.0}},  # a 500 ends the run at once
    )
    sheet = PriceSheet.objects.create(
        name="retry sheet", source="test", effective_date=date(2026, 1, 1), prices=PRICES
    )
    campaign = make_campaign(agent, tasks=1, n=1, price_sheet=sheet)
    campaign.tasks.set(campaign.suite.tasks.filter(task_id=TASK_ID))
    return campaign


def _golden_steps(campaign: Campaign) -> list[dict]:
    spec = campaign.suite.tasks.get(task_id=TASK_ID).spec
    calls = [
        {"tool_calls": [{"name": c["tool"], "arguments": c["arguments"]}], "usage": usage}
        for c, usage in zip(
            spec["golden"],
            (
                {"prompt_tokens": 900 + 10 * i, "completion_tokens": 40 + i}
                for i in range(len(spec["golden"]))
            ),
            strict=False,
        )
    ]
    reply = {"text": spec["extra"]["golden_reply"], "usage": {"prompt_tokens": 1300, "completion_tokens": 90}}
    return [*calls, reply]


# Run 1: the endpoint answers one call (billed), then fails with a 500: an infrastructure error.
ANSWERED_THEN_FAILED = [
    {
        "tool_calls": [{"name": "get_order", "arguments": {"order_id": "1"}}],
        "usage": {"prompt_tokens": 700, "completion_tokens": 25, "cached_tokens": 100},
    },
    {"status": 500},
]


def _endpoint_cost(server: ScriptedOpenAIServer) -> tuple[dict[str, int], Decimal]:
    billed = server.billed_for(MODEL)
    usage = Usage(billed["prompt_tokens"], billed["cached_tokens"], billed["completion_tokens"], 0)
    return billed, cost_of(usage, MODEL, _sheet())


def _billed_columns(attempt: Attempt) -> dict[str, int]:
    return {
        "prompt_tokens": attempt.input_tokens,
        "completion_tokens": attempt.output_tokens,
        "cached_tokens": attempt.cached_input_tokens,
        "reasoning_tokens": attempt.reasoning_tokens,
    }


def test_retried_run_keeps_the_usage_of_the_run_it_superseded(make_campaign, endpoint, settings):
    settings.ATTEMPT_MAX_RETRIES = 1
    campaign = _campaign(make_campaign, endpoint)
    endpoint.script(MODEL, [*ANSWERED_THEN_FAILED, *_golden_steps(campaign)])
    campaign_start(campaign=campaign)

    assert drain(campaign) == ["retry", "done"]

    attempt = Attempt.objects.get(campaign=campaign)
    billed, cost = _endpoint_cost(endpoint)
    assert (attempt.status, attempt.verdict, attempt.retries) == ("done", "pass", 1)
    assert _billed_columns(attempt) == billed
    assert attempt.agent_cost == cost
    runs = attempt.superseded_runs
    assert [(r["input_tokens"], r["output_tokens"], r["cached_input_tokens"], r["reason"]) for r in runs] == [
        (700, 25, 100, "retry")
    ]
    assert Decimal(runs[0]["agent_cost"]) == cost_of(Usage(700, 100, 25, 0), MODEL, _sheet())
    summary = TaskSummary.objects.get(campaign=campaign)
    assert (summary.input_tokens, summary.output_tokens, summary.agent_cost) == (
        billed["prompt_tokens"],
        billed["completion_tokens"],
        cost,
    )
    assert (summary.n_done, summary.n_pass, summary.n_infra_error) == (1, 1, 0)


def test_attempt_page_shows_superseded_runs_as_billed(make_campaign, endpoint, settings, client, alice):
    settings.ATTEMPT_MAX_RETRIES = 1
    campaign = _campaign(make_campaign, endpoint)
    endpoint.script(MODEL, [*ANSWERED_THEN_FAILED, *_golden_steps(campaign)])
    campaign_start(campaign=campaign)
    drain(campaign)
    attempt = Attempt.objects.get(campaign=campaign)
    client.force_login(alice)

    html = client.get(f"/attempts/{attempt.pk}/").content.decode()

    cost = money(cost_of(Usage(700, 100, 25, 0), MODEL, _sheet()))
    assert (
        f"<summary>1 earlier run ended in an infra error: 725 tokens, {cost} — billed, superseded</summary>"
        in html
    )


def test_resumed_infra_error_keeps_the_usage_of_the_run_it_superseded(make_campaign, endpoint, settings):
    settings.ATTEMPT_MAX_RETRIES = 0
    campaign = _campaign(make_campaign, endpoint)
    endpoint.script(MODEL, ANSWERED_THEN_FAILED)
    campaign_start(campaign=campaign)
    assert drain(campaign) == ["infra_error"]
    failed = Attempt.objects.get(campaign=campaign)
    assert (failed.input_tokens, failed.output_tokens) == (700, 25)
    endpoint.script(MODEL, _golden_steps(campaign))

    campaign_resume(campaign=Campaign.objects.get(pk=campaign.pk))
    assert drain(campaign) == ["done"]

    attempt = Attempt.objects.get(campaign=campaign)
    billed, cost = _endpoint_cost(endpoint)
    assert attempt.status == "done"
    assert _billed_columns(attempt) == billed
    assert attempt.agent_cost == cost
    assert [(r["input_tokens"], r["output_tokens"], r["reason"]) for r in attempt.superseded_runs] == [
        (700, 25, "resume of infra_error")
    ]
    assert TaskSummary.objects.get(campaign=campaign).agent_cost == cost


def _sheet() -> PriceList:
    return PriceList.from_dict({"name": "t", "source": "t", "effective_date": "2026-01-01", "models": PRICES})


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_live_worker_bills_the_superseded_run_in_its_one_query_record(
    celery_worker_process, make_campaign, endpoint
):
    # The worker's record of the retry takes attempt_sql's one-query path: the superseded runs
    # come with the claim.
    campaign = _campaign(make_campaign, endpoint)
    endpoint.script(MODEL, [*ANSWERED_THEN_FAILED, *_golden_steps(campaign)])
    campaign_start(campaign=campaign)
    deadline = time.monotonic() + 90
    while not Campaign.objects.filter(pk=campaign.pk, status="done").exists():
        assert time.monotonic() < deadline, "campaign did not finish"
        time.sleep(0.3)

    attempt = Attempt.objects.get(campaign=campaign)
    billed, cost = _endpoint_cost(endpoint)
    assert (attempt.status, attempt.retries, len(attempt.superseded_runs)) == ("done", 1, 1)
    assert (_billed_columns(attempt), attempt.agent_cost) == (billed, cost)
    assert TaskSummary.objects.get(campaign=campaign).agent_cost == cost
