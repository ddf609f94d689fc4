"""The scripted server's generic mode (used by throughput benchmarks) and the endpoint limiter."""

from __future__ import annotations

import threading

from tb_engine.llm import ChatClient, EndpointConfig, EndpointLimiter, limiter_for
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer, arguments_for_schema

TOOLS = [
    {"type": "function", "function": {"name": "cancel_order", "parameters": {"type": "object"}}},
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string"},
                    "kind": {"type": "string", "enum": ["a", "b"]},
                    "n": {"type": "integer"},
                },
                "required": ["order_id", "kind", "n"],
            },
        },
    },
]


def test_generic_mode_calls_a_read_only_tool_k_times_then_answers():
    with ScriptedOpenAIServer(generic=GenericMode(tool_calls=2)) as server:
        client = ChatClient(EndpointConfig(model="any", base_url=server.base_url, api_key_env=None))
        messages = [{"role": "user", "content": "hi"}]
        seen = []
        for _ in range(3):
            result = client.complete(messages, tools=TOOLS)
            seen.append([(c.name, c.arguments) for c in result.tool_calls] or result.text)
            for call in result.tool_calls:
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments},
                            }
                        ],
                    }
                )
                messages.append({"role": "tool", "tool_call_id": call.id, "content": "{}"})
        user_turn = client.complete([{"role": "user", "content": "Anything else?"}])
    call = ("get_order", '{"order_id": "1", "kind": "a", "n": 1}')
    assert seen == [[call], [call], GenericMode.final_text]
    assert user_turn.text == GenericMode.no_tools_text


def test_arguments_for_schema_fills_required_fields_only():
    schema = {
        "properties": {"a": {"type": "boolean"}, "b": {"type": "array"}, "c": {"type": "string"}},
        "required": ["a", "b"],
    }
    assert arguments_for_schema(schema) == {"a": False, "b": []}


def test_limiter_for_shares_one_limiter_per_base_url_and_keeps_the_smallest_cap():
    first = limiter_for("http://127.0.0.1:1/v1", 8)
    second = limiter_for("http://127.0.0.1:1/v1/", 3)
    third = limiter_for("http://127.0.0.1:1/v1", None)
    assert (first is second, second is third, third.limit) == (True, True, 3)


def test_endpoint_limiter_blocks_beyond_its_limit_until_a_release():
    limiter = EndpointLimiter(1)
    limiter.acquire()
    acquired = threading.Event()

    def waiter() -> None:
        limiter.acquire()
        acquired.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    blocked = not acquired.wait(0.1)
    limiter.release()
    released = acquired.wait(2)
    thread.join()
    assert (blocked, released, limiter.in_flight, limiter.peak) == (True, True, 1, 1)
