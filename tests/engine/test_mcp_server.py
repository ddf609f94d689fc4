"""Our built-in domains served over MCP: spawned over stdio and streamable HTTP, driven by the mcp
client directly and through McpBackend + the runner."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tb_engine.agents.golden import make_golden_agent
from tb_engine.attempt_setup import AttemptSetup
from tb_engine.interfaces import InfraError
from tb_engine.loader import load_builtin_suite
from tb_engine.mcp_server import DomainServer, positional_diff
from tb_engine.spec import DomainSpec, GoldenCall, ToolSpec
from tb_engine.thinkingbox.mcp_config import McpServerConfig
from tb_engine.thinkingbox.mcp_pool import McpServerPool

ROOT = Path(__file__).resolve().parents[2]
TASK_ID = "retail/ticket_hold_carrier_exception"
STDIO = McpServerConfig(
    command=sys.executable, args=("-m", "tb_engine.mcp_server", "--domain", "retail"), cwd=str(ROOT)
)


@pytest.fixture(scope="module")
def suite():
    return load_builtin_suite("starter")


@pytest.fixture(scope="module")
def client_domain(suite) -> DomainSpec:
    """What a ThinkingBox-style client knows of the served domain: tool names and unstable fields."""
    served = suite.domains["retail"]
    return DomainSpec(
        name="retail",
        title="retail over MCP",
        policy=served.policy,
        tables={},
        tools={name: ToolSpec(name, "", {"type": "object"}) for name in served.tools},
        base_data={},
        backend="mcp",
        mcp={
            "server": "retail",
            "world_state": {},
            "unstable": {n: sorted(t.unstable) for n, t in served.tables.items()},
        },
    )


def _client_task(suite, task_id: str = TASK_ID):
    task = suite.tasks[task_id]
    return dataclasses.replace(task, extra={**task.extra, "init": {"task_id": task_id}})


async def _run_golden_over(target, task) -> dict:
    from mcp import Client

    async with Client(target, mode="legacy") as client:
        init = await client.call_tool("__reserved__init", {"config": {"task_id": task.id}})
        assert json.loads(init.content[0].text) == {"status": "ok", "task_id": task.id}
        for call in task.golden:
            answer = await client.call_tool(call.tool, call.arguments)
            assert "error" not in json.loads(answer.content[0].text)
        effects = await client.call_tool("__reserved__geteffects", {})
        await client.call_tool("__reserved__teardown", {})
        return json.loads(effects.content[0].text)


def test_mcp_server_stdio_golden_trajectory_matches_golden_state(suite):
    task = suite.tasks[TASK_ID]
    effects = asyncio.run(_run_golden_over(STDIO.target(), task))
    assert effects["result_db_hash"] == effects["golden_db_hash"]
    assert effects["classified_diff"] == []
    assert effects["diff"] == []
    assert effects["golden_errors"] == []
    assert effects["initial_db_state"]["tickets"] != effects["result_db_state"]["tickets"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def http_url():
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tb_engine.mcp_server", "--domain", "retail", "--http", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None:
                pytest.fail(f"HTTP server exited: {process.stderr.read().decode()}")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)


def test_mcp_server_http_golden_trajectory_matches_golden_state(suite, http_url):
    effects = asyncio.run(_run_golden_over(http_url, suite.tasks[TASK_ID]))
    assert (effects["result_db_hash"] == effects["golden_db_hash"], effects["classified_diff"]) == (True, [])


def test_mcp_server_http_sessions_have_separate_sandboxes(suite, client_domain, http_url):
    pool = McpServerPool(McpServerConfig(url=http_url), size=1)
    try:
        first = pool.backend(client_domain, _client_task(suite))
        second = pool.backend(client_domain, _client_task(suite))
        AttemptSetup.from_config(client_domain, first.task, judge=None).run(first)
        untouched = second.comparison()
        assert untouched.hash_pass is False
        assert {item.kind for item in untouched.diff} == {"missing_effect"}
        first.close()
        second.close()
    finally:
        pool.close()


@pytest.fixture(scope="module")
def stdio_pool():
    pool = McpServerPool(STDIO, size=1)
    yield pool
    pool.close()


def test_mcp_server_golden_agent_passes_through_mcp_backend(suite, client_domain, stdio_pool):
    task = _client_task(suite)
    backend = stdio_pool.backend(client_domain, task)
    try:
        result = AttemptSetup.from_config(client_domain, task).run(backend)
    finally:
        backend.close()
    assert (result.status, result.verdict, result.diff) == ("done", "pass", [])
    evidence = result.extra["thinkingbox"]["effects"]["retail"]
    assert (evidence["our_state_pass"], evidence["their_hash_pass"], evidence["disagree"]) == (
        True,
        True,
        False,
    )


def test_mcp_server_wrong_status_is_a_wrong_value(suite, client_domain, stdio_pool):
    task = _client_task(suite)
    wrong = [
        c if c.tool != "update_ticket" else GoldenCall(c.tool, {**c.arguments, "status": "solved"})
        for c in task.golden
    ]
    backend = stdio_pool.backend(client_domain, task)
    try:
        wrong_agent = make_golden_agent(dataclasses.replace(task, golden=tuple(wrong)))
        result = AttemptSetup.from_config(client_domain, task, agent=wrong_agent, judge=None).run(backend)
    finally:
        backend.close()
    assert result.verdict == "fail"
    assert [(d.kind, d.table, d.key, d.field) for d in result.diff] == [
        ("wrong_value", "tickets", "20", "status")
    ]
    assert result.extra["thinkingbox"]["disagree"] is False


def test_mcp_server_unknown_task_makes_init_an_infra_error(suite, client_domain, stdio_pool):
    task = dataclasses.replace(_client_task(suite), extra={"init": {"task_id": "retail/no_such_task"}})
    with pytest.raises(InfraError) as raised:
        stdio_pool.backend(client_domain, task)
    assert "unknown task 'retail/no_such_task'" in str(raised.value)


def test_domain_server_init_with_data_patch_and_golden_case(suite):
    server = DomainServer.builtin("retail", suite)
    config = {
        "data_patch": {
            "tickets": [
                {
                    "id": "T-9",
                    "customer_id": "C-1",
                    "order_id": None,
                    "subject": "Hi",
                    "status": "open",
                    "priority": "low",
                    "resolution_note": "",
                    "updated_at": "2025-01-01T00:00:00Z",
                }
            ]
        },
        "golden_test_case": {
            "tool_interactions": [
                {
                    "tool": "update_ticket",
                    "parameters": {"ticket_id": "T-9", "status": "solved", "note": "done"},
                }
            ]
        },
    }
    assert server.init("s1", config) == {"status": "ok", "task_id": "retail/adhoc"}
    effects = server.geteffects("s1")
    assert [(d["kind"], d["key"], d["field"]) for d in effects["classified_diff"]] == [
        ("missing_effect", "T-9", "status")
    ]
    text, is_error = server.call("s1", "update_ticket", {"ticket_id": "T-9", "status": "solved", "note": "x"})
    assert (json.loads(text)["status"], is_error) == ("solved", False)
    assert server.geteffects("s1")["classified_diff"] == []


def test_domain_server_bad_config_names_the_field(suite):
    server = DomainServer.builtin("retail", suite)
    assert server.init("s1", {"data_patch": {"nope": []}}) == {
        "status": "error",
        "message": "config.data_patch: unknown table(s) nope",
    }
    assert server.init("s1", "x") == {"status": "error", "message": "config must be an object, got str"}
    text, _ = server.call("s1", "get_order", {"order_id": "ORD-1"})
    assert json.loads(text) == {
        "error": "Tool execution failed: call __reserved__init first",
        "tool": "get_order",
    }


def test_domain_server_tool_failure_uses_thinkingbox_error_shape(suite):
    server = DomainServer.builtin("retail", suite)
    server.init("s1", {"task_id": TASK_ID})
    text, is_error = server.call("s1", "get_order", {"order_id": "ORD-404"})
    assert (sorted(json.loads(text)), json.loads(text)["tool"], is_error) == (
        ["error", "tool"],
        "get_order",
        False,
    )


def test_positional_diff_shifts_after_an_inserted_row():
    result = {"t": [{"id": 1}, {"id": 2}, {"id": 3}]}
    golden = {"t": [{"id": 2}, {"id": 3}]}
    assert positional_diff(result, golden) == [
        {"path": "t", "type": "length mismatch", "result": 3, "golden": 2},
        {"path": "t[0].id", "type": "value mismatch", "result": 1, "golden": 2},
        {"path": "t[1].id", "type": "value mismatch", "result": 2, "golden": 3},
        {"path": "t[2]", "type": "present in result (missing in golden)"},
    ]
