"""McpBackend + McpServerPool against our ThinkingBox-convention test server, spawned over stdio."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tb_engine.agents.harness_checks import Plan, PlanAgent
from tb_engine.attempt_setup import AttemptSetup
from tb_engine.diff import diff_states
from tb_engine.interfaces import InfraError
from tb_engine.spec import DomainSpec, GoldenCall, TaskSpec, ToolSpec
from tb_engine.thinkingbox.mcp_config import McpServerConfig
from tb_engine.thinkingbox.mcp_pool import McpServerPool
from tb_engine.transcript import ToolCallRequest

ROOT = Path(__file__).resolve().parents[3]
SERVER = McpServerConfig(command=sys.executable, args=("-m", "tests.support.tb_mcp_server"), cwd=str(ROOT))
GOLDEN = [
    {"tool": "create_ticket", "parameters": {"customer_id": "C-1", "subject": "Late order"}},
    {"tool": "update_ticket", "parameters": {"ticket_id": "2", "status": "solved"}},
]
DOMAIN = DomainSpec(
    name="tb_test_shop",
    title="test shop",
    policy="You are a support agent.",
    tables={},
    tools={n: ToolSpec(n, "", {"type": "object"}) for n in ("create_ticket", "update_ticket", "get_ticket")},
    base_data={},
    backend="mcp",
    mcp={"server": "tb_test_shop", "world_state": {}, "unstable": {"tickets": ["subject"]}},
)


def _task(golden=GOLDEN, data_patch=None) -> TaskSpec:
    return TaskSpec(
        id="shop.py:test_close_ticket",
        domain="tb_test_shop",
        query="Please open and close a ticket.",
        user_context="",
        data_patch=data_patch or {},
        golden=tuple(GoldenCall(g["tool"], g["parameters"]) for g in golden),
        extra={"init": {"data_patch": data_patch or {}, "golden_test_case": {"tool_interactions": golden}}},
    )


@pytest.fixture(scope="module")
def pool():
    pool = McpServerPool(SERVER, size=2)
    yield pool
    pool.close()


def _call(backend, index, tool, **arguments):
    return backend.call_tool(
        ToolCallRequest(id=f"c{index}", name=tool, arguments=arguments), index=index, turn=0
    )


def test_mcp_backend_lists_agent_tools_without_reserved_ones(pool):
    backend = pool.backend(DOMAIN, _task())
    try:
        schemas = {s.name: s for s in backend.tool_schemas()}
        assert sorted(schemas) == ["create_ticket", "get_ticket", "update_ticket"]
        assert schemas["get_ticket"].read_only is True
        assert schemas["create_ticket"].read_only is False
        assert schemas["create_ticket"].parameters["required"] == ["customer_id", "subject"]
    finally:
        backend.close()


def test_mcp_backend_golden_calls_match_golden_state(pool):
    backend = pool.backend(DOMAIN, _task(), attribute_writes="per_call")
    try:
        initial = backend.initial_snapshot()
        first = _call(backend, 0, "create_ticket", customer_id="C-1", subject="Different words")
        second = _call(backend, 1, "update_ticket", ticket_id="2", status="solved")
        assert (first.error, second.error) == (None, None)
        assert (first.changed_state, second.changed_state) == (True, True)
        assert (
            diff_states(initial, backend.result_snapshot(), backend.golden_snapshot(), backend.writes()) == []
        )
        comparison = backend.comparison()
        assert (comparison.our_pass, comparison.hash_pass) == (True, True)
        assert backend.writes()[("tickets", "2", "status")] == (1,)
    finally:
        backend.close()


def test_mcp_backend_tool_failure_becomes_tool_call_error(pool):
    backend = pool.backend(DOMAIN, _task())
    try:
        call = _call(backend, 0, "update_ticket", ticket_id="99", status="solved")
        assert call.error == "Tool execution failed: tickets 99 not found"
        assert call.changed_state is False
        looked_up = _call(backend, 1, "get_ticket", ticket_id="1")
        assert (looked_up.read_only, looked_up.result["status"]) == (True, "solved")
    finally:
        backend.close()


def test_mcp_backend_missing_update_is_classified_against_initial_state(pool):
    backend = pool.backend(
        DOMAIN, _task(golden=[{"tool": "update_ticket", "parameters": {"ticket_id": "1", "status": "open"}}])
    )
    try:
        initial = backend.initial_snapshot()
        _call(backend, 0, "create_ticket", customer_id="C-1", subject="Unrelated")
        diff = diff_states(initial, backend.result_snapshot(), backend.golden_snapshot(), backend.writes())
        assert [(d.kind, d.table, d.key, d.field, d.written_by) for d in diff] == [
            ("missing_effect", "tickets", "1", "status", ()),
            ("extra_effect", "tickets", "2", None, (0,)),
        ]
    finally:
        backend.close()


def test_mcp_backend_init_error_is_infra_error(pool):
    with pytest.raises(InfraError) as caught:
        pool.backend(DOMAIN, _task(data_patch={"no_such_table": [{"id": "1"}]}))
    assert (
        str(caught.value)
        == "__reserved__init failed for shop.py:test_close_ticket: unknown table no_such_table"
    )


def test_run_attempt_with_golden_agent_on_mcp_backend_passes(pool):
    task = _task()
    backend = pool.backend(DOMAIN, task)
    try:
        result = AttemptSetup.from_config(DOMAIN, task, judge=None).run(backend)
    finally:
        backend.close()
    assert (result.status, result.verdict, result.diff) == ("done", "pass", [])
    assert [c.name for c in result.transcript.tool_calls] == ["create_ticket", "update_ticket"]


def test_mcp_server_pool_hands_out_warm_fresh_sessions(pool):
    time.sleep(3)  # let the background refill finish
    started = time.monotonic()
    first = pool.acquire()
    waited = time.monotonic() - started
    second = pool.acquire()
    try:
        assert first is not second
        assert waited < 0.5  # already started: start-up is off the critical path
    finally:
        first.close()
        second.close()


# --- verdict of record: the server's hash decides the state part when the two disagree ------


@pytest.fixture(scope="module")
def silent_pool():
    """The test server without its geteffects declarations, like the real servers (no probe finds any)."""
    config = McpServerConfig(
        command=sys.executable,
        args=("-m", "tests.support.tb_mcp_server"),
        cwd=str(ROOT),
        env={"TB_TEST_SERVER_DECLARE": "0"},
    )
    pool = McpServerPool(config, size=1)
    yield pool
    pool.close()


def _run(pool, domain, task, calls):
    agent = PlanAgent("plan", Plan(tuple(GoldenCall(c["tool"], c["parameters"]) for c in calls)))
    backend = pool.backend(domain, task)
    try:
        return AttemptSetup.from_config(domain, task, agent=agent, judge=None).run(backend)
    finally:
        backend.close()


def test_verdict_of_record_server_hash_passes_over_our_diff_of_unhashed_text(silent_pool):
    # Without declarations our diff counts the subject (free text the server does not hash) and the
    # clock stamps: the server's hash passes, and it is the verdict of record (SPEC §2).
    domain = replace(DOMAIN, mcp={**DOMAIN.mcp, "unstable": {}})
    edited = [
        dict(GOLDEN[0], parameters={**GOLDEN[0]["parameters"], "subject": "Different words"}),
        GOLDEN[1],
    ]
    result = _run(silent_pool, domain, _task(), edited)
    evidence = result.extra["thinkingbox"]
    assert (result.verdict, result.categories) == ("pass", [])
    assert [(d.kind, d.table, d.key, d.field) for d in result.diff] == [
        ("wrong_value", "tickets", "2", "subject")
    ]
    assert [(c.kind, c.passed) for c in result.checks] == [("server_state_hash", True)]
    assert result.checks[0].detail == (
        "our classified diff finds 1 item(s), kept as diagnostics: the server's hash decides"
    )
    assert (evidence["disagree"], evidence["verdict_of_record"]) == (True, "server hash")
    assert evidence["effects"]["tb_test_shop"]["declarations_verified"] is False


def test_verdict_of_record_server_hash_fails_where_our_diff_skips_a_hashed_field(pool):
    # The domain wrongly declares status unstable: our diff ignores it, the server hashes it.
    domain = replace(DOMAIN, mcp={**DOMAIN.mcp, "unstable": {"tickets": ["subject", "status"]}})
    wrong = [GOLDEN[0], dict(GOLDEN[1], parameters={"ticket_id": "2", "status": "pending"})]
    result = _run(pool, domain, _task(), wrong)
    assert (result.verdict, result.categories, result.diff) == ("fail", ["check_failed"], [])
    assert [(c.kind, c.passed, c.detail) for c in result.checks] == [
        (
            "server_state_hash",
            False,
            "the result hash differs from the golden hash although our classified diff finds no difference",
        )
    ]
    assert result.extra["thinkingbox"]["disagree"] is True


def test_mcp_backend_reads_declarations_from_the_geteffects_answer(pool):
    backend = pool.backend(replace(DOMAIN, mcp={**DOMAIN.mcp, "unstable": {}}), _task())
    try:
        specs = backend.table_specs()
        comparison = backend.comparison()
    finally:
        backend.close()
    assert specs["tickets"].unstable == frozenset({"subject", "created_at", "updated_at"})
    assert comparison.declarations.source == "the server's geteffects answer (key 'unstable')"
    assert comparison.declarations_verified is True
