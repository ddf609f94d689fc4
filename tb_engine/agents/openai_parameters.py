"""The stored parameters of an OpenAI-compatible agent: which are agent options, which endpoint fields, what is wrong.

Kept apart from the agent (no SDK import) so the web side can check parameters on create and
edit with the same reading ``attempt_setup.build_agent`` uses to run them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tb_engine.llm.config import EndpointConfig, LLMConfigError, RetryPolicy

# Stored agent parameters are EndpointConfig fields plus these options of the agent itself.
AGENT_OPTIONS = ("end_marker", "max_reply_chars", "max_tool_result_chars", "max_attempt_tokens")
# Fields that belong to the agent configuration itself, never inside its parameters: a stored
# agent's own model, key variable (checked against the allow-list there) and name win.
NOT_PARAMETERS = ("model", "api_key_env", "label", "api_key")


def split_parameters(parameters: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Stored agent parameters as (EndpointConfig fields, agent options)."""
    endpoint = {key: value for key, value in parameters.items() if key not in AGENT_OPTIONS}
    options = {key: value for key, value in parameters.items() if key in AGENT_OPTIONS}
    return endpoint, options


# The JSON types of the EndpointConfig fields a stored parameter may set (bools are not numbers here).
ENDPOINT_FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "base_url": ((str,), "a string"),
    "provider": ((str,), "a string"),
    "api_version": ((str,), "a string"),
    "temperature": ((int, float), "a number"),
    "max_tokens": ((int,), "an integer"),
    "max_tokens_field": ((str,), "a string"),
    "reasoning_effort": ((str,), "a string"),
    "seed": ((int,), "an integer"),
    "parallel_tool_calls": ((bool,), "true or false"),
    "extra_headers": ((dict,), "a mapping"),
    "extra_body": ((dict,), "a mapping"),
    "max_concurrency": ((int,), "an integer"),
    "retry": ((dict,), "a mapping"),
    "provider_headers": ((list,), "a list of header names"),
}


def _positive_int_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)


def parameter_problems(parameters: Any) -> dict[str, str]:
    """``parameters.<field>`` -> what is wrong, for an OpenAI-compatible agent's stored parameters ({} when usable).

    The same reading ``build_agent`` does, so what this accepts is what an attempt runs with.
    """
    if not isinstance(parameters, dict):
        return {"parameters": f"must be a mapping, got {type(parameters).__name__}"}
    problems: dict[str, str] = {}
    for key in NOT_PARAMETERS:
        if key in parameters:
            problems[f"parameters.{key}"] = "not a parameter: set it on the agent configuration itself"
    endpoint, options = split_parameters({k: v for k, v in parameters.items() if k not in NOT_PARAMETERS})
    marker = options.get("end_marker")
    if "end_marker" in options and marker is not None and (not isinstance(marker, str) or not marker.strip()):
        problems["parameters.end_marker"] = "must be a non-empty string (or null)"
    for key in ("max_reply_chars", "max_tool_result_chars", "max_attempt_tokens"):
        if key in options and not _positive_int_or_none(options[key]):
            problems[f"parameters.{key}"] = f"must be an integer >= 1 (or null), got {options[key]!r}"
    problems.update(endpoint_field_problems(endpoint))
    return problems


def endpoint_field_problems(endpoint: dict[str, Any]) -> dict[str, str]:
    """``parameters.<field>`` -> problem for EndpointConfig fields (unknown names, wrong types, bad values)."""
    problems: dict[str, str] = {}
    known = {f.name for f in dataclasses.fields(EndpointConfig)} - set(NOT_PARAMETERS)
    for key in sorted(set(endpoint) - known):
        problems[f"parameters.{key}"] = (
            f"unknown parameter; known: {', '.join(sorted(known | set(AGENT_OPTIONS)))}"
        )
    for key, value in endpoint.items():
        if key not in ENDPOINT_FIELD_TYPES or value is None:
            continue
        types, what = ENDPOINT_FIELD_TYPES[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            problems[f"parameters.{key}"] = f"must be {what}, got {value!r}"
    headers = endpoint.get("extra_headers")
    if isinstance(headers, dict) and not all(isinstance(v, str) for v in headers.values()):
        problems["parameters.extra_headers"] = "every header value must be a string"
    retry = endpoint.get("retry")
    if isinstance(retry, dict):
        for key, value in retry.items():
            if key not in {f.name for f in dataclasses.fields(RetryPolicy)}:
                problems[f"parameters.retry.{key}"] = "unknown retry field"
            elif isinstance(value, bool) or not isinstance(value, int | float):
                problems[f"parameters.retry.{key}"] = f"must be a number, got {value!r}"
    if problems:
        return problems
    try:  # values the dataclass itself checks (ranges, provider, azure's api_version)
        EndpointConfig.from_dict({"model": "m", "base_url": "http://127.0.0.1", **endpoint}, label="agent")
    except (LLMConfigError, TypeError, ValueError) as exc:
        message = str(exc).removeprefix("agent endpoint config: ")
        field, _, detail = message.partition(": ")
        key = field if field.split(".")[0] in known else ""
        problems[f"parameters.{key}" if key else "parameters"] = detail if key else message
    return problems
