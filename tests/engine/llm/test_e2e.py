"""End to end: a retail task through the runner with the OpenAI agent, LLM user and LLM judge.

All three talk to one scripted server on 127.0.0.1, routed by model name.
"""

from __future__ import annotations

import json

import pytest

from tb_engine.agents.openai_agent import OpenAIAgent
from tb_engine.backend import SqliteBackend
from tb_engine.llm import EndpointConfig, RetryPolicy
from tb_engine.llm_judge import LLMJudge
from tb_engine.pricing import cost_of, load_starter_price_sheet
from tb_engine.runner import Limits, run_attempt
from tb_engine.transcript import Usage
from tb_engine.users.llm_user import LLMUser
from tests.support.scripted_openai_server import ScriptedOpenAIServer, scripted_server_fixture

scripted_server = pytest.fixture(scripted_server_fixture, name="scripted_server")

FAST = RetryPolicy(max_retries=2, max_rate_limit_retries=5, base_delay_s=0.01, max_delay_s=0.02)
TASK = "ticket_hold_carrier_exception"
REPLY = "The carrier investigation into your parcel is still open, so I have put ticket 20 on hold."
TOKENS = {"prompt_tokens": 1000, "cached_tokens": 200, "completion_tokens": 100, "reasoning_tokens": 40}


def endpoint(server: ScriptedOpenAIServer, model: str, label: str) -> EndpointConfig:
    return EndpointConfig(model=model, base_url=server.base_url, api_key_env=None, retry=FAST, label=label)


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def script_good_agent(server: ScriptedOpenAIServer) -> None:
    server.script(
        "gpt-4o-mini",
        [
            {"status": 429, "retry_after": "0.05"},
            {
                "tool_calls": [
                    call("find_customer_by_email", email="sarah@example.com"),
                    call("get_order", order_id="ORD-20"),
                ],
                "usage": TOKENS,
            },
            {
                "tool_calls": [{"name": "get_shipments", "arguments": '{"order_id": "ORD-20"'}],
                "usage": TOKENS,
            },  # malformed: a repair
            {"tool_calls": [call("get_shipments", order_id="ORD-20")], "usage": TOKENS},
            {"drop": True},
            {"tool_calls": [call("track_shipment", tracking_number="1Z2020")], "usage": TOKENS},
            {
                "tool_calls": [
                    call("update_ticket", ticket_id="20", status="hold", note="Carrier still looking.")
                ],
                "usage": TOKENS,
            },
            {"text": REPLY, "usage": TOKENS},
        ],
    )


def run(server: ScriptedOpenAIServer, retail_domain, task):
    backend = SqliteBackend(retail_domain, task)
    try:
        return run_attempt(
            task,
            backend,
            agent=OpenAIAgent(endpoint(server, "gpt-4o-mini", "agent")),
            user=LLMUser(endpoint(server, "user-model", "user")),
            judge=LLMJudge(endpoint(server, "judge-model", "judge")),
            limits=Limits(max_turns=12, max_repairs=2),
        )
    finally:
        backend.close()


def test_llm_e2e_retail_task_passes_through_the_runner(scripted_server, retail_domain, retail_task):
    script_good_agent(scripted_server)
    scripted_server.script(
        "user-model",
        [
            {
                "text": "Thanks, that's fine. ###STOP###",
                "usage": {"prompt_tokens": 300, "completion_tokens": 10},
            }
        ],
    )
    scripted_server.script(
        "judge-model",
        [
            {
                "text": "yes\nIt says the investigation is open.",
                "usage": {"prompt_tokens": 150, "completion_tokens": 9},
            }
        ],
    )

    result = run(scripted_server, retail_domain, retail_task(TASK))

    assert (result.status, result.termination, result.verdict, result.error) == (
        "done",
        "user_done",
        "pass",
        "",
    )
    assert result.diff == []
    assert [(r.answer, r.explanation) for r in result.rubrics] == [
        (True, "yes\nIt says the investigation is open.")
    ]
    assert [c.name for c in result.transcript.tool_calls] == [
        "find_customer_by_email",
        "get_order",
        "get_shipments",
        "track_shipment",
        "update_ticket",
    ]
    assert [c.error for c in result.transcript.tool_calls] == [None] * 5
    assert result.transcript.final_reply() == REPLY
    repairs = [m.content for m in result.transcript.messages if m.is_error and m.role == "user"]
    assert len(repairs) == 1 and "arguments are not valid JSON" in repairs[0]
    # Six model answers (the malformed one billed with the next step); the 429 and the drop cost nothing.
    assert result.transcript.agent_usage == Usage(6000, 1200, 600, 240, 6)
    assert result.transcript.user_usage == Usage(300, 0, 10, 0, 1)
    assert result.transcript.judge_usage == Usage(150, 0, 9, 0, 1)
    sheet = load_starter_price_sheet()
    # gpt-4o-mini: (4800*0.15 + 1200*0.075 + 600*0.60) / 1M
    assert str(cost_of(result.transcript.agent_usage, "gpt-4o-mini", sheet)) == "0.00117"
    assert cost_of(result.transcript.judge_usage, "judge-model", sheet) is None


def test_llm_e2e_requests_never_carry_golden_data_checks_rubrics_or_private_context(
    scripted_server, retail_domain, retail_task
):
    task = retail_task(TASK)
    script_good_agent(scripted_server)
    scripted_server.script("user-model", [{"text": "Thanks. ###STOP###"}])
    scripted_server.script("judge-model", [{"text": "yes"}])

    result = run(scripted_server, retail_domain, task)

    assert result.verdict == "pass"
    # Distinctive golden strings (short ones like "20" or "hold" legitimately appear in any dialogue).
    golden_texts = [
        v for call in task.golden for v in call.arguments.values() if isinstance(v, str) and len(v) > 12
    ]
    assert golden_texts == ["sarah@example.com", "Waiting on UPS investigation of the damaged label."]
    golden_texts = golden_texts[1:]  # the email is in the user's own query, so the agent may see it
    golden_texts += [c.description for c in task.checks] + list(task.rubrics)
    golden_texts += [str(task.extra["reply"])] if task.extra.get("reply") else []
    private_line = task.user_context.strip().splitlines()[0]
    agent_bodies = [json.dumps(r.body) for r in scripted_server.requests_for("gpt-4o-mini")]
    user_bodies = [json.dumps(r.body) for r in scripted_server.requests_for("user-model")]
    assert len(agent_bodies) == 8 and len(user_bodies) == 1
    leaks_to_agent = [
        t for t in golden_texts + [private_line] for body in agent_bodies if json.dumps(t)[1:-1] in body
    ]
    leaks_to_user = [t for t in golden_texts for body in user_bodies if json.dumps(t)[1:-1] in body]
    assert (leaks_to_agent, leaks_to_user) == ([], [])
    assert json.dumps(private_line)[1:-1] in user_bodies[0]  # the user simulator does get its own context


def test_llm_e2e_endpoint_down_is_infra_error_not_failure(scripted_server, retail_domain, retail_task):
    scripted_server.script("gpt-4o-mini", [{"status": 502, "repeat": 5}])
    result = run(scripted_server, retail_domain, retail_task(TASK))
    assert (result.status, result.verdict) == ("infra_error", None)
    assert result.error.startswith("infra error during dialogue: agent endpoint")


def test_llm_e2e_repeated_malformed_output_ends_agent_error(scripted_server, retail_domain, retail_task):
    bad = {"tool_calls": [{"name": "get_order", "arguments": "{bad json"}], "repeat": 3}
    scripted_server.script("gpt-4o-mini", [bad])
    scripted_server.script("judge-model", [{"text": "no"}])
    result = run(scripted_server, retail_domain, retail_task(TASK))
    assert (result.status, result.termination, result.verdict) == ("done", "agent_error", "fail")
    assert len(scripted_server.requests_for("gpt-4o-mini")) == 3
    assert result.error.startswith(
        "agent output unusable after 2 repairs: tool call 0 (get_order): arguments are not valid JSON"
    )
