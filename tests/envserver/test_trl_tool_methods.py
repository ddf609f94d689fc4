"""Tool schemas -> typed methods: transformers' get_json_schema (what TRL renders into the prompt) keeps
types, enums, required arguments, and nested objects' full schemas."""

from __future__ import annotations

import json

import pytest
from transformers.utils import get_json_schema

from tb_envserver.trl_environment import ThinkingBoxEnvironment, environment_class

TOOL = {
    "name": "update_ticket",
    "description": "Set a ticket's status.",
    "parameters": {
        "type": "object",
        "properties": {
            "ticket_id": {"type": "string", "description": "the ticket"},
            "status": {"type": "string", "enum": ["open", "hold", "solved"], "description": "new status"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["vip", "late"]}},
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["city"],
            },
            "count": {"type": "integer"},
        },
        "required": ["ticket_id", "status"],
    },
}


def test_generated_method_schema_keeps_types_enums_required_and_nested_objects():
    cls = environment_class("http://127.0.0.1:9", "shop", [TOOL])
    assert issubclass(cls, ThinkingBoxEnvironment) and cls.__name__ == "ShopEnv"
    schema = get_json_schema(cls.update_ticket)["function"]
    props = schema["parameters"]["properties"]
    assert schema["parameters"]["required"] == ["ticket_id", "status"]
    assert props["ticket_id"] == {"type": "string", "description": "the ticket"}
    assert (props["status"]["enum"], props["status"]["type"]) == (["open", "hold", "solved"], "string")
    assert props["tags"]["items"] == {"type": "string", "enum": ["vip", "late"]}
    assert props["count"]["type"] == "integer"
    assert props["address"]["type"] == "object"
    nested = json.loads(props["address"]["description"].split("JSON schema: ", 1)[1])
    assert nested == TOOL["parameters"]["properties"]["address"]


def test_a_tool_named_like_the_environments_own_method_is_refused():
    with pytest.raises(ValueError, match="tool name 'reset' clashes"):
        environment_class("http://127.0.0.1:9", "shop", [dict(TOOL, name="reset")])
