"""The stored result format: AttemptResult.to_dict / from_dict round trips and the refusals."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_engine.attempt_setup import run_task
from tb_engine.interfaces import InfraError
from tb_engine.loader import load_builtin_suite
from tb_engine.result_format import ResultFormatError
from tb_engine.results import (
    DIFF_KINDS,
    EFFECT_OPS,
    FORMAT_VERSION,
    STATUSES,
    TERMINATIONS,
    VERDICTS,
    AttemptResult,
    CheckResult,
    DiffItem,
    Effect,
    RubricResult,
)
from tb_engine.runner import backend_failed_result
from tb_engine.signatures import signature_of_attempt, signature_of_result
from tb_engine.transcript import ROLES, Message, ToolCall, ToolCallRequest, Transcript, Usage

AGENTS = ("golden", "sim:careless", "sim:explorer", "sim:cautious")


@pytest.fixture(scope="module")
def suite_results() -> list[AttemptResult]:
    """One attempt per built-in task and agent, run through the runner: passes and every failure kind."""
    suite = load_builtin_suite()
    return [
        run_task(suite.domains[task.domain], task, agent=agent, seed=seed)
        for seed, agent in enumerate(AGENTS)
        for task in suite.tasks.values()
    ]


def test_real_results_cover_what_the_format_holds(suite_results):
    # Guards the round trips below: they must see failures, diff items of every kind, effects,
    # checks, rubrics and tool calls, not only clean passes.
    assert {r.verdict for r in suite_results} == {"pass", "fail"}
    assert {d.kind for r in suite_results for d in r.diff} == set(DIFF_KINDS)
    assert {e.op for r in suite_results for e in r.effects} >= {"insert", "update"}
    assert any(r.checks for r in suite_results) and any(r.rubrics for r in suite_results)
    assert any(m.usage is not None for r in suite_results for m in r.transcript.messages)


def test_real_results_round_trip_through_the_stored_json(suite_results):
    for result in suite_results:
        stored = result.to_dict()
        assert AttemptResult.from_dict(stored) == result
        assert AttemptResult.from_dict(stored).to_dict() == stored
        through_json = json.loads(json.dumps(stored))
        assert AttemptResult.from_dict(through_json) == result
        assert AttemptResult.from_dict(through_json).to_dict() == through_json


def test_round_trip_keeps_the_nested_types(suite_results):
    result = next(r for r in suite_results if r.verdict == "fail" and r.diff and r.effects)
    again = AttemptResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert type(again.diff[0]) is DiffItem
    assert type(again.diff[0].written_by) is tuple
    assert type(again.effects[0]) is Effect
    assert type(again.checks[0]) is CheckResult
    assert type(again.transcript.tool_calls[0]) is ToolCall
    assert type(again.transcript.agent_usage) is Usage


def test_signature_of_the_stored_result_equals_that_of_the_attempt(suite_results):
    for result in suite_results:
        assert signature_of_result(result.to_dict()) == signature_of_attempt(result)


def test_infra_error_result_round_trips():
    suite = load_builtin_suite()
    task = next(iter(suite.tasks.values()))
    error = InfraError("server did not start", evidence={"backend": {"stderr_tail": "boom"}})
    result = backend_failed_result(task, error, duration_ms=12.5)
    assert AttemptResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_to_dict_writes_the_format_version_first(suite_results):
    assert list(suite_results[0].to_dict())[:2] == ["format_version", "task_id"]
    assert suite_results[0].to_dict()["format_version"] == FORMAT_VERSION == 1


def test_a_result_stored_before_format_versions_reads_as_version_1(suite_results):
    result = suite_results[-1]
    stored = result.to_dict()
    del stored["format_version"]
    assert AttemptResult.from_dict(stored) == result


def test_fields_added_after_a_result_was_stored_read_as_their_defaults():
    stored = {
        "task_id": "retail/refund",
        "task_hash": "abc",
        "status": "done",
        "checks": [{"kind": "row_equals", "description": "refund created", "passed": False}],
        "transcript": {"tool_calls": [{"index": 0, "id": "c0", "name": "refund", "arguments": {}}]},
    }
    result = AttemptResult.from_dict(stored)
    assert result.checks == [CheckResult("row_equals", "refund created", False, detail="", target="")]
    assert result.transcript.tool_calls == [ToolCall(0, "c0", "refund", {})]
    assert (result.verdict, result.diff, result.extra, result.duration_ms) == (None, [], {}, 0.0)


# --- Refusals ----------------------------------------------------------------------------------


@pytest.fixture
def stored(suite_results) -> dict:
    """A deep copy of a stored failed result with messages, tool calls, diff and checks."""
    result = next(r for r in suite_results if r.verdict == "fail" and r.diff and r.transcript.tool_calls)
    return copy.deepcopy(result.to_dict())


def _refusal(data: object) -> str:
    with pytest.raises(ResultFormatError) as caught:
        AttemptResult.from_dict(data)
    return str(caught.value)


def test_a_newer_format_version_is_refused(stored):
    stored["format_version"] = 99
    assert _refusal(stored) == (
        "stored result: field format_version is 99, a format this engine does not read (it reads version 1)"
    )


def test_a_format_version_that_is_not_an_integer_is_refused(stored):
    stored["format_version"] = "1"
    assert _refusal(stored) == "stored result: field format_version must be an integer, got string"


def test_a_missing_required_field_is_refused(stored):
    del stored["task_hash"]
    assert _refusal(stored) == "stored result (format version 1): field task_hash is missing"


def test_a_missing_field_deep_inside_names_its_path(stored):
    del stored["diff"][0]["golden"]
    assert _refusal(stored) == "stored result (format version 1): field diff[0].golden is missing"


def test_a_wrong_type_is_refused_naming_the_path(stored):
    stored["transcript"]["messages"][1]["turn"] = "2"
    assert _refusal(stored) == (
        "stored result (format version 1): field transcript.messages[1].turn must be an integer, got string"
    )


def test_a_wrong_type_in_a_tool_call_request_names_the_path(stored):
    message = next(i for i, m in enumerate(stored["transcript"]["messages"]) if m["tool_calls"])
    stored["transcript"]["messages"][message]["tool_calls"][0]["name"] = None
    assert _refusal(stored) == (
        f"stored result (format version 1): field transcript.messages[{message}].tool_calls[0].name "
        "must be a string, got null"
    )


def test_a_value_outside_a_closed_set_is_refused(stored):
    stored["status"] = "finished"
    assert _refusal(stored) == (
        "stored result (format version 1): field status must be one of "
        "queued, running, done, infra_error, cancelled, got 'finished'"
    )


def test_an_unknown_field_is_refused_rather_than_dropped(stored):
    stored["diff"][0]["severity"] = "high"
    assert _refusal(stored) == (
        "stored result (format version 1): field diff[0].severity is not a field of this format"
    )


def test_a_list_where_an_object_belongs_is_refused(stored):
    stored["checks"][0] = ["row_equals"]
    assert (
        _refusal(stored) == "stored result (format version 1): field checks[0] must be an object, got array"
    )


def test_something_that_is_not_an_object_is_refused():
    assert _refusal([1, 2]) == "stored result: must be an object, got array"


def test_the_error_carries_path_and_version(stored):
    stored["phase_ms"]["grade"] = "fast"
    with pytest.raises(ResultFormatError) as caught:
        AttemptResult.from_dict(stored)
    assert (caught.value.path, caught.value.version, caught.value.problem) == (
        "phase_ms.grade",
        1,
        "must be a number, got string",
    )


def test_signature_of_result_refuses_a_result_it_cannot_read(stored):
    stored["format_version"] = 2
    with pytest.raises(ResultFormatError) as caught:
        signature_of_result(stored)
    assert caught.value.path == "format_version"


# --- Properties ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
texts = st.text(max_size=12)
optional_texts = st.none() | texts
counts = st.integers(0, 10**9)
durations = st.floats(0, 1e7, allow_nan=False)
indexes = st.lists(st.integers(0, 50), max_size=3).map(tuple)
usages = st.builds(Usage, counts, counts, counts, counts, counts)
messages = st.builds(
    Message,
    role=st.sampled_from(ROLES),
    content=texts,
    tool_calls=st.lists(st.builds(ToolCallRequest, texts, texts, json_values), max_size=2),
    tool_call_id=optional_texts,
    name=optional_texts,
    turn=counts,
    at_ms=durations,
    usage=st.none() | usages,
    is_error=st.booleans(),
)
tool_calls = st.builds(
    ToolCall,
    index=counts,
    id=texts,
    name=texts,
    arguments=json_values,
    result=json_values,
    error=optional_texts,
    read_only=st.booleans(),
    changed_state=st.booleans(),
    turn=counts,
    started_ms=durations,
    duration_ms=durations,
)
transcripts = st.builds(
    Transcript,
    messages=st.lists(messages, max_size=3),
    tool_calls=st.lists(tool_calls, max_size=3),
    agent_usage=usages,
    user_usage=usages,
    judge_usage=usages,
)
results = st.builds(
    AttemptResult,
    task_id=texts,
    task_hash=texts,
    status=st.sampled_from(STATUSES),
    termination=st.none() | st.sampled_from(TERMINATIONS),
    verdict=st.none() | st.sampled_from(VERDICTS),
    transcript=transcripts,
    effects=st.lists(
        st.builds(
            Effect,
            st.sampled_from(EFFECT_OPS),
            texts,
            texts,
            optional_texts,
            json_values,
            json_values,
            indexes,
        ),
        max_size=3,
    ),
    diff=st.lists(
        st.builds(
            DiffItem,
            st.sampled_from(DIFF_KINDS),
            texts,
            texts,
            optional_texts,
            json_values,
            json_values,
            json_values,
            indexes,
        ),
        max_size=3,
    ),
    checks=st.lists(
        st.builds(CheckResult, texts, texts, st.booleans(), texts, st.booleans(), texts), max_size=3
    ),
    rubrics=st.lists(st.builds(RubricResult, texts, st.none() | st.booleans(), texts), max_size=3),
    categories=st.lists(texts, max_size=3),
    clean_looking=st.booleans(),
    error=texts,
    phase_ms=st.dictionaries(texts, durations, max_size=3),
    duration_ms=durations,
    extra=st.dictionaries(texts, json_values, max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(results)
def test_any_result_round_trips_through_json(result):
    stored = json.loads(json.dumps(result.to_dict()))
    assert AttemptResult.from_dict(stored) == result
    assert AttemptResult.from_dict(stored).to_dict() == stored
