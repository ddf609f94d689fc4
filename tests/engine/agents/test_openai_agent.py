"""The OpenAI-compatible agent adapter against a real scripted server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from tb_engine.agents.openai_agent import ModelOutputError, OpenAIAgent
from tb_engine.interfaces import AgentOutputError, AgentView, ToolSchema
from tb_engine.llm import EndpointConfig, RetryPolicy, TokenLimitExceeded
from tb_engine.transcript import Message, ToolCallRequest, Usage
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer, scripted_server_fixture

scripted_server = pytest.fixture(scripted_server_fixture, name="scripted_server")

GET_ORDER = ToolSchema(
    name="get_order",
    description="Look up an order.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    read_only=True,
)
CANCEL_ORDER = ToolSchema(
    name="cancel_order",
    description="Cancel an order.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)


def make_agent(server: ScriptedOpenAIServer, **options) -> OpenAIAgent:
    config = EndpointConfig(
        model="agent-model",
        base_url=server.base_url,
        api_key_env=None,
        retry=RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.02),
        label="agent",
    )
    return OpenAIAgent(config, **options)


def view(*messages: Message) -> AgentView:
    return AgentView(
        system_prompt="You are a retail support agent.",
        tools=[GET_ORDER, CANCEL_ORDER],
        messages=list(messages) or [Message(role="user", content="Where is ORD-1?")],
    )


def test_openai_agent_parses_a_tool_call(scripted_server):
    scripted_server.script(
        "agent-model",
        [{"tool_calls": [{"id": "c1", "name": "get_order", "arguments": {"order_id": "ORD-1"}}]}],
    )
    step = make_agent(scripted_server).step(view())
    assert step.tool_calls == [ToolCallRequest(id="c1", name="get_order", arguments={"order_id": "ORD-1"})]
    assert step.done is False


def test_openai_agent_parses_parallel_tool_calls(scripted_server):
    calls = [
        {"id": "c1", "name": "get_order", "arguments": {"order_id": "ORD-1"}},
        {"id": "c2", "name": "get_order", "arguments": {"order_id": "ORD-2"}},
        {"id": "c3", "name": "cancel_order", "arguments": {"order_id": "ORD-2"}},
    ]
    scripted_server.script("agent-model", [{"text": "Checking both.", "tool_calls": calls}])
    step = make_agent(scripted_server).step(view())
    assert [(c.id, c.name, c.arguments) for c in step.tool_calls] == [
        ("c1", "get_order", {"order_id": "ORD-1"}),
        ("c2", "get_order", {"order_id": "ORD-2"}),
        ("c3", "cancel_order", {"order_id": "ORD-2"}),
    ]
    assert step.text == "Checking both."


def test_openai_agent_malformed_json_raises_counted_agent_output_error(scripted_server):
    usage = {"prompt_tokens": 50, "completion_tokens": 9}
    scripted_server.script(
        "agent-model",
        [{"tool_calls": [{"name": "get_order", "arguments": '{"order_id": "ORD-1"'}], "usage": usage}],
    )
    with pytest.raises(AgentOutputError) as caught:
        make_agent(scripted_server).step(view())
    error = caught.value
    assert isinstance(error, ModelOutputError)
    assert str(error).startswith("tool call 0 (get_order): arguments are not valid JSON")
    assert error.usage == Usage(input_tokens=50, output_tokens=9, calls=1)
    assert error.raw_tool_calls[0].arguments == '{"order_id": "ORD-1"'


def test_openai_agent_non_object_arguments_raise_agent_output_error(scripted_server):
    scripted_server.script("agent-model", [{"tool_calls": [{"name": "get_order", "arguments": '["ORD-1"]'}]}])
    with pytest.raises(ModelOutputError) as caught:
        make_agent(scripted_server).step(view())
    assert str(caught.value) == "tool call 0 (get_order): arguments must be a JSON object, got list"


def test_openai_agent_unknown_tool_raises_agent_output_error(scripted_server):
    scripted_server.script(
        "agent-model", [{"tool_calls": [{"id": "x9", "name": "refund_everything", "arguments": {}}]}]
    )
    with pytest.raises(ModelOutputError) as caught:
        make_agent(scripted_server).step(view())
    assert str(caught.value) == "tool call 0 (x9): unknown tool 'refund_everything'"


def test_openai_agent_wrong_argument_types_pass_through_to_the_backend(scripted_server):
    scripted_server.script(
        "agent-model", [{"tool_calls": [{"id": "c1", "name": "get_order", "arguments": {"order_id": 5}}]}]
    )
    step = make_agent(scripted_server).step(view())
    assert step.tool_calls == [ToolCallRequest(id="c1", name="get_order", arguments={"order_id": 5})]


def test_openai_agent_reply_without_tool_calls_is_a_turn_to_the_user(scripted_server):
    scripted_server.script("agent-model", [{"text": "Your order ships tomorrow."}])
    step = make_agent(scripted_server, end_marker="###DONE###").step(view())
    assert (step.text, step.tool_calls, step.done) == ("Your order ships tomorrow.", [], False)


def test_openai_agent_end_marker_declares_done_and_is_stripped(scripted_server):
    scripted_server.script("agent-model", [{"text": "The order is cancelled. ###DONE###"}])
    step = make_agent(scripted_server, end_marker="###DONE###").step(view())
    assert (step.text, step.done) == ("The order is cancelled.", True)


def test_openai_agent_end_marker_beside_tool_calls_is_not_done(scripted_server):
    scripted_server.script(
        "agent-model",
        [
            {
                "text": "###DONE###",
                "tool_calls": [{"id": "c1", "name": "get_order", "arguments": {"order_id": "A"}}],
            }
        ],
    )
    step = make_agent(scripted_server, end_marker="###DONE###").step(view())
    assert (step.text, step.done, len(step.tool_calls)) == ("", False, 1)


def test_openai_agent_empty_response_raises_agent_output_error(scripted_server):
    scripted_server.script("agent-model", [{"text": ""}])
    with pytest.raises(ModelOutputError) as caught:
        make_agent(scripted_server).step(view())
    assert str(caught.value) == "agent openai:agent-model: empty response (finish_reason='stop')"


def test_openai_agent_request_carries_exactly_policy_tools_and_dialogue(scripted_server):
    scripted_server.script("agent-model", [{"text": "Done."}])
    history = (
        Message(role="user", content="Cancel ORD-1 please."),
        Message(
            role="assistant",
            content="",
            tool_calls=[ToolCallRequest("c1", "get_order", {"order_id": "ORD-1"})],
        ),
        Message(role="tool", content='{"status": "pending"}', tool_call_id="c1", name="get_order"),
        Message(
            role="assistant", content="Bad call", tool_calls=[ToolCallRequest("c2", "get_order", '{"oops')]
        ),
        Message(
            role="tool",
            content="arguments are not valid JSON",
            tool_call_id="c2",
            name="get_order",
            is_error=True,
        ),
    )
    make_agent(scripted_server).step(view(*history))
    body = scripted_server.requests_for("agent-model")[0].body
    assert body["messages"] == [
        {"role": "system", "content": "You are a retail support agent."},
        {"role": "user", "content": "Cancel ORD-1 please."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id": "ORD-1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "pending"}'},
        {
            "role": "assistant",
            "content": "Bad call",
            "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "get_order", "arguments": '{"oops'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "arguments are not valid JSON"},
    ]
    assert body["tools"] == [GET_ORDER.to_openai(), CANCEL_ORDER.to_openai()]
    assert sorted(body) == ["messages", "model", "tools"]


def test_openai_agent_truncates_huge_tool_results_and_replies_with_marker(scripted_server):
    scripted_server.script("agent-model", [{"text": "y" * 120}])
    agent = make_agent(scripted_server, max_tool_result_chars=50, max_reply_chars=100)
    history = (
        Message(role="user", content="hi"),
        Message(role="assistant", tool_calls=[ToolCallRequest("c1", "get_order", {"order_id": "A"})]),
        Message(role="tool", content="x" * 5000, tool_call_id="c1", name="get_order"),
    )
    step = agent.step(view(*history))
    sent = scripted_server.requests_for("agent-model")[0].body["messages"][-1]["content"]
    assert sent == "x" * 50 + "\n…[truncated 4950 characters]"
    assert step.text == "y" * 100 + "\n…[truncated 20 characters]"


def test_openai_agent_token_budget_stops_further_calls(scripted_server):
    usage = {"prompt_tokens": 700, "completion_tokens": 400}
    scripted_server.script(
        "agent-model", [{"text": "first", "usage": usage}, {"text": "second", "usage": usage}]
    )
    agent = make_agent(scripted_server, max_attempt_tokens=1000)
    assert agent.step(view()).usage == Usage(input_tokens=700, output_tokens=400, calls=1)
    with pytest.raises(TokenLimitExceeded) as caught:
        agent.step(view())
    assert str(caught.value) == "agent openai:agent-model: token limit 1000 reached (1100 tokens spent)"
    assert len(scripted_server.requests_for("agent-model")) == 1


def test_openai_agent_from_dict_builds_from_stored_settings(scripted_server):
    scripted_server.script("agent-model", [{"text": "hello ###END###"}])
    agent = OpenAIAgent.from_dict(
        {
            "endpoint": {
                "model": "agent-model",
                "base_url": scripted_server.base_url,
                "api_key_env": None,
                "temperature": 0,
            },
            "end_marker": "###END###",
        }
    )
    step = agent.step(view())
    assert (step.text, step.done) == ("hello", True)
    assert scripted_server.requests_for("agent-model")[0].body["temperature"] == 0
    stored = agent.config.to_dict()
    assert json.loads(json.dumps(stored)) == stored  # storable as plain JSON


def test_openai_agent_bills_unusable_output_with_the_next_step(scripted_server):
    scripted_server.script(
        "agent-model",
        [
            {
                "tool_calls": [{"name": "get_order", "arguments": "{nope"}],
                "usage": {"prompt_tokens": 40, "completion_tokens": 5},
            },
            {"text": "Sorry, here is the answer.", "usage": {"prompt_tokens": 60, "completion_tokens": 7}},
        ],
    )
    agent = make_agent(scripted_server)
    with pytest.raises(ModelOutputError):
        agent.step(view())
    step = agent.step(view())
    assert step.usage == Usage(input_tokens=100, output_tokens=12, calls=2)


def test_openai_agent_token_limit_is_an_agent_output_error(scripted_server):
    scripted_server.script(
        "agent-model", [{"text": "x", "usage": {"prompt_tokens": 10, "completion_tokens": 1}}]
    )
    agent = make_agent(scripted_server, max_attempt_tokens=5)
    agent.step(view())
    with pytest.raises(AgentOutputError):
        agent.step(view())


def test_openai_agent_reports_each_model_identity_the_endpoint_answered_with(scripted_server):
    import dataclasses

    scripted_server.script("agent-model", [{"text": "one"}, {"text": "two"}, {"text": "three"}])
    scripted_server.reported_models["agent-model"] = "agent-model-2025-01-01"
    scripted_server.response_headers = {"OpenAI-Version": "2020-10-01", "X-Request-Id": "req-1"}
    agent = make_agent(scripted_server)
    agent = OpenAIAgent(dataclasses.replace(agent.config, provider_headers=("openai-version",)))

    scripted_server.system_fingerprint = "fp_a"
    agent.step(view())
    agent.step(view())
    scripted_server.system_fingerprint = "fp_b"
    agent.step(view())

    assert agent.provider_report() == [
        {
            "model": "agent-model-2025-01-01",
            "system_fingerprint": "fp_a",
            "headers": {"openai-version": "2020-10-01"},  # per-request headers are not named, so not kept
            "calls": 2,
        },
        {
            "model": "agent-model-2025-01-01",
            "system_fingerprint": "fp_b",
            "headers": {"openai-version": "2020-10-01"},
            "calls": 1,
        },
    ]


def test_attempt_result_carries_the_provider_report_of_an_endpoint_agent(
    scripted_server, retail_domain, retail_task
):
    from tb_engine.attempt_setup import AttemptSetup

    scripted_server.generic = GenericMode(tool_calls=1)
    scripted_server.system_fingerprint = "fp_live"
    task = retail_task("ticket_hold_carrier_exception")
    agent = {
        "spec": "openai",
        "name": "endpoint agent",
        "model": "agent-model",
        "base_url": scripted_server.base_url,
        "parameters": {"retry": {"max_retries": 1, "base_delay_s": 0.01, "max_delay_s": 0.02}},
        "provider_headers": ["openai-version"],
    }
    result = AttemptSetup.from_config(retail_domain, task, agent=agent).run()
    assert result.extra["provider"] == [
        {"model": "agent-model", "system_fingerprint": "fp_live", "headers": {}, "calls": 2}
    ]
    golden = AttemptSetup.from_config(retail_domain, task, agent="golden").run()
    assert "provider" not in golden.extra  # local agents report nothing


def test_openai_agent_sends_what_build_request_says_encoding_each_message_once(scripted_server, monkeypatch):
    scripted_server.script(
        "agent-model",
        [{"tool_calls": [{"name": "get_order", "arguments": {"order_id": "ORD-1"}}]}, {"text": "Shipped."}],
    )
    config = EndpointConfig(
        model="agent-model",
        base_url=scripted_server.base_url,
        api_key_env=None,
        temperature=0.5,
        parallel_tool_calls=False,
        extra_body={"top_k": 3},
        label="agent",
    )
    agent = OpenAIAgent(config)
    converted = []
    original = agent._to_openai_message

    def counted(message):
        converted.append(message.content)
        return original(message)

    monkeypatch.setattr(agent, "_to_openai_message", counted)
    first = view(Message(role="user", content="Where is ORD-1?"))
    step = agent.step(first)
    second = view(
        *first.messages,
        Message(role="assistant", content="", tool_calls=step.tool_calls),
        Message(role="tool", content='{"status": "shipped"}', tool_call_id=step.tool_calls[0].id),
    )
    agent.step(second)

    bodies = [request.body for request in scripted_server.requests_for("agent-model")]
    for body, sent_view in zip(bodies, (first, second), strict=True):
        messages, tools = agent.build_request(sent_view)
        expected = {
            "model": "agent-model",
            "messages": messages,
            "tools": tools,
            "temperature": 0.5,
            "parallel_tool_calls": False,
            "top_k": 3,
        }
        assert body == expected
    # Each message was converted once by the requests (then again by build_request above).
    assert converted[:3] == ["Where is ORD-1?", "", '{"status": "shipped"}']
    assert len(converted) == 3 + 1 + 3
