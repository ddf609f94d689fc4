"""A campaign of the OpenAI-compatible agent through a live worker against a scripted endpoint:
verdicts, usage and cost (agent and evaluation overhead) come out right, and nothing private leaks."""

from __future__ import annotations

import json
import time
from datetime import date
from decimal import Decimal

import pytest

from apps.agents.models import AgentConfig, PriceSheet
from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_create, campaign_start
from tb_engine.pricing import PriceList, cost_of
from tb_engine.transcript import Usage
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TASK_ID = "retail/ticket_hold_carrier_exception"
PRICES = {
    "agent-model": {"input": "2.00", "cached_input": "0.50", "output": "8.00"},
    "user-model": {"input": "0.10", "output": "0.40"},
}


@pytest.fixture
def endpoint():
    # Unscripted models (the user simulator) get the generic answer: "Yes, thank you… ###STOP###".
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=0)).start()
    yield server
    server.stop()


def _campaign(starter_suite, alice, team_a, server, *, model: str) -> Campaign:
    agent = AgentConfig.objects.create(
        name=f"{model} agent",
        kind=AgentConfig.Kind.OPENAI,
        model=model,
        base_url=server.base_url,
        max_concurrency=4,
    )
    sheet = PriceSheet.objects.create(
        name=f"test sheet {model}", source="test", effective_date=date(2026, 1, 1), prices=PRICES
    )
    campaign = campaign_create(
        name=f"{model} campaign",
        team=team_a,
        owner=alice,
        agent=agent,
        suite=starter_suite,
        tasks=[starter_suite.tasks.get(task_id=TASK_ID)],
        n_attempts=1,
        price_sheet=sheet,
        user_simulator={
            "kind": "llm",
            "model": "user-model",
            "base_url": server.base_url,
            "api_key_env": None,
        },
    )
    return campaign


def _script_trajectory(server, model: str, calls: list[dict], reply: str) -> None:
    steps = [{"tool_calls": [{"name": call["tool"], "arguments": call["arguments"]}]} for call in calls]
    server.script(model, [*steps, {"text": reply}])


def _run(campaign) -> Attempt:
    campaign_start(campaign=campaign)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if Campaign.objects.filter(pk=campaign.pk, status="done").exists():
            return Attempt.objects.get(campaign=campaign)
        time.sleep(0.3)
    raise AssertionError("campaign did not finish")


def _expected_cost(attempt: Attempt, model: str) -> Decimal:
    sheet = PriceList.from_dict(
        {"name": "t", "source": "t", "effective_date": "2026-01-01", "models": PRICES}
    )
    usage = Usage(
        attempt.input_tokens, attempt.cached_input_tokens, attempt.output_tokens, attempt.reasoning_tokens
    )
    return cost_of(usage, model, sheet)


def test_golden_trajectory_from_the_model_passes_with_priced_usage(
    celery_worker_process, starter_suite, alice, team_a, endpoint
):
    campaign = _campaign(starter_suite, alice, team_a, endpoint, model="agent-model")
    spec = starter_suite.tasks.get(task_id=TASK_ID).spec
    golden = [{"tool": c["tool"], "arguments": c["arguments"]} for c in spec["golden"]]
    # The task has a rubric (judged offline by keywords): the model gives the task's golden reply.
    _script_trajectory(endpoint, "agent-model", golden, spec["extra"]["golden_reply"])

    attempt = _run(campaign)

    assert (attempt.status, attempt.verdict, attempt.termination) == ("done", "pass", "user_done")
    assert attempt.tool_calls == len(golden)
    assert attempt.input_tokens > 0 and attempt.output_tokens > 0
    assert attempt.agent_cost == _expected_cost(attempt, "agent-model")
    assert attempt.eval_tokens > 0
    assert attempt.eval_cost > 0
    agent_bodies = [json.dumps(r.body) for r in endpoint.requests_for("agent-model")]
    user_context = starter_suite.tasks.get(task_id=TASK_ID).spec["user_context"]
    assert len(agent_bodies) == len(golden) + 1
    assert not any(user_context[:60] in body for body in agent_bodies)


def test_model_closing_the_ticket_fails_as_a_clean_looking_wrong_value(
    celery_worker_process, starter_suite, alice, team_a, endpoint
):
    campaign = _campaign(starter_suite, alice, team_a, endpoint, model="closer-model")
    golden = [
        {"tool": c["tool"], "arguments": dict(c["arguments"])}
        for c in starter_suite.tasks.get(task_id=TASK_ID).spec["golden"]
    ]
    closing = [c for c in golden if c["arguments"].get("status") == "hold"]
    assert len(closing) == 1
    closing[0]["arguments"]["status"] = "solved"
    _script_trajectory(endpoint, "closer-model", golden, "All sorted: your ticket is resolved.")

    attempt = _run(campaign)

    assert (attempt.status, attempt.verdict) == ("done", "fail")
    assert "wrong_value" in attempt.categories
    assert attempt.clean_looking is True
    wrong = [d for d in attempt.result["diff"] if d["kind"] == "wrong_value" and d["field"] == "status"]
    assert [(d["result"], d["golden"]) for d in wrong] == [("solved", "hold")]
    assert attempt.agent_cost is None  # closer-model is not on the sheet: unpriced, never zero
