"""LLM user simulator against a real scripted server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from tb_engine.interfaces import UserView
from tb_engine.llm import EndpointConfig, RetryPolicy
from tb_engine.transcript import Message, ToolCallRequest, Usage
from tb_engine.users.llm_user import LLMUser
from tests.support.scripted_openai_server import ScriptedOpenAIServer, scripted_server_fixture

scripted_server = pytest.fixture(scripted_server_fixture, name="scripted_server")

FAST = RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.02)
QUERY = "My order ORD-20 is late."
CONTEXT = "You are Sarah (sarah@example.com). You accept waiting if the carrier investigates."


def endpoint(server: ScriptedOpenAIServer, model: str, label: str) -> EndpointConfig:
    return EndpointConfig(model=model, base_url=server.base_url, api_key_env=None, retry=FAST, label=label)


def dialogue() -> list[Message]:
    return [
        Message(role="user", content=QUERY),
        Message(
            role="assistant",
            content="",
            tool_calls=[ToolCallRequest("c1", "get_order", {"order_id": "ORD-20"})],
        ),
        Message(role="assistant", content="What is your email address?"),
    ]


def test_llm_user_opens_with_the_query_without_a_model_call(scripted_server):
    user = LLMUser(endpoint(scripted_server, "user-model", "user"))
    step = user.reply(UserView(QUERY, CONTEXT, []))
    assert (step.text, step.done, step.usage) == (QUERY, False, Usage())
    assert scripted_server.requests_for("user-model") == []


def test_llm_user_sees_flipped_visible_dialogue_and_its_context(scripted_server):
    scripted_server.script(
        "user-model",
        [{"text": "It is sarah@example.com.", "usage": {"prompt_tokens": 80, "completion_tokens": 6}}],
    )
    user = LLMUser(endpoint(scripted_server, "user-model", "user"))
    step = user.reply(UserView(QUERY, CONTEXT, dialogue()))
    assert (step.text, step.done) == ("It is sarah@example.com.", False)
    assert step.usage == Usage(input_tokens=80, output_tokens=6, calls=1)
    messages = scripted_server.requests_for("user-model")[0].body["messages"]
    assert [m["role"] for m in messages] == ["system", "assistant", "user"]
    assert messages[1:] == [
        {"role": "assistant", "content": QUERY},
        {"role": "user", "content": "What is your email address?"},
    ]
    assert QUERY in messages[0]["content"] and CONTEXT in messages[0]["content"]


def test_llm_user_stop_token_ends_the_conversation_and_is_stripped(scripted_server):
    scripted_server.script("user-model", [{"text": "Great, thanks! ###STOP###"}])
    step = LLMUser(endpoint(scripted_server, "user-model", "user")).reply(
        UserView(QUERY, CONTEXT, dialogue())
    )
    assert (step.text, step.done) == ("Great, thanks!", True)


def test_llm_user_request_never_contains_tool_traffic(scripted_server):
    scripted_server.script("user-model", [{"text": "ok"}])
    LLMUser(endpoint(scripted_server, "user-model", "user")).reply(UserView(QUERY, CONTEXT, dialogue()))
    sent = json.dumps(scripted_server.requests_for("user-model")[0].body)
    assert ("get_order" in sent, "tools" in scripted_server.requests_for("user-model")[0].body) == (
        False,
        False,
    )


def test_llm_user_rejects_instructions_without_placeholders(scripted_server):
    with pytest.raises(ValueError) as caught:
        LLMUser(endpoint(scripted_server, "user-model", "user"), instructions="Be a customer. {query}")
    assert str(caught.value) == "user simulator instructions: missing placeholder {user_context}"
