"""Attempts on the real ThinkingBox servers (../shared/thinkingbox/servers, in their own venv: the
``servers_python`` fixture): golden passes forked and spawned, and bad input at run time — a
command that will not start, a server killed mid-attempt, an init error from a bad config, a
search service that is not there — is an infra_error carrying the server's stderr, never a verdict."""

from __future__ import annotations

import dataclasses
import os
import signal

import pytest

from tb_engine.attempt_setup import AttemptSetup
from tb_engine.interfaces import AgentStep, AgentView
from tb_engine.thinkingbox.dataset import parse_scenario, parse_test_file
from tb_engine.thinkingbox.mcp_pool import backend_for_domain, close_pools
from tb_engine.transcript import ToolCallRequest
from tests.support.paths import THINKINGBOX_DIR

DATASET = THINKINGBOX_DIR / "dataset"
SHARED_TASKS = {
    "sandbox_external_retail": "sandbox_external_retail/sandbox_external_retail_group1.py",
    "external_booking_v1": "external_booking_v1/external_booking_v1_group1.py",
}


@pytest.fixture(autouse=True)
def _close_pools():
    yield
    close_pools()


def shared_domain(server: str, python, **launch):
    """The shared scenario with a launch config for the real server (as servers.yaml has it)."""
    domain = parse_scenario(DATASET / "scenario" / f"{server}.yaml")
    mcp = dict(domain.mcp or {})
    mcp["launch"] = {
        "command": str(python),
        "args": ["-m", f"tb_business_ops_servers_202606.mcp_{server}"],
        "env": {"TYPESENSE_API_KEY": "Fake"},
        "pool_size": 1,
        **launch,
    }
    return dataclasses.replace(domain, mcp=mcp)


def shared_tasks(server: str, domain):
    return parse_test_file(DATASET / "test_case" / SHARED_TASKS[server], {domain.name: domain})


@pytest.mark.parametrize("server", sorted(SHARED_TASKS))
def test_golden_passes_on_the_real_server_forked(server, servers_python):
    domain = shared_domain(server, servers_python)
    tasks = shared_tasks(server, domain)[:2]
    results = [AttemptSetup.from_config(domain, task, judge=None).run() for task in tasks]
    assert [(r.status, r.verdict, r.diff) for r in results] == [("done", "pass", [])] * 2
    backend = results[0].extra["backend"]
    assert (backend["start"], backend["knowledge_base_search"]["available"]) == ("fork", False)
    assert backend["knowledge_base_search"]["sources_left_out"] == len(domain.mcp["world_state"]["sources"])
    assert results[0].extra["thinkingbox"]["disagree"] is False


def test_golden_passes_on_the_real_server_spawned(servers_python):
    domain = shared_domain("sandbox_external_retail", servers_python, start="spawn")
    task = shared_tasks("sandbox_external_retail", domain)[0]
    result = AttemptSetup.from_config(domain, task, judge=None).run()
    assert (result.status, result.verdict, result.extra["backend"]["start"]) == ("done", "pass", "spawn")


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_server_module_that_does_not_exist_is_infra_error_with_its_traceback(start, servers_python):
    domain = shared_domain("sandbox_external_retail", servers_python, start=start)
    domain.mcp["launch"]["args"] = ["-m", "tb_business_ops_servers_202606.mcp_no_such_server"]
    task = shared_tasks("sandbox_external_retail", domain)[0]
    result = AttemptSetup.from_config(domain, task, judge=None).run()
    assert (result.status, result.verdict) == ("infra_error", None)
    assert result.error.startswith("infra error during start: MCP server did not start")
    tail = result.extra["backend"]["stderr_tail"]
    assert ("No module named" in tail, "tb_business_ops_servers_202606.mcp_no_such_server" in tail) == (
        True,
        True,
    )


def test_command_that_does_not_exist_is_infra_error(servers_python):
    domain = shared_domain("sandbox_external_retail", servers_python)
    domain.mcp["launch"]["command"] = "/nonexistent/bin/python"
    task = shared_tasks("sandbox_external_retail", domain)[0]
    result = AttemptSetup.from_config(domain, task, judge=None).run()
    assert (result.status, result.error) == (
        "infra_error",
        "infra error during start: MCP server did not start: "
        "[Errno 2] No such file or directory: '/nonexistent/bin/python'",
    )


class KillsItsServer:
    """An agent that makes the task's first golden call, then kills the server process, then calls again."""

    name = "kills its server"

    def __init__(self, backend, task):
        self.backend, self.task, self.turn = backend, task, 0

    def step(self, view: AgentView) -> AgentStep:
        self.turn += 1
        if self.turn == 2:
            os.kill(self.backend.session.process.pid, signal.SIGKILL)
        first = self.task.golden[0]
        return AgentStep(tool_calls=[ToolCallRequest(f"c{self.turn}", first.tool, dict(first.arguments))])


def test_server_killed_mid_attempt_is_infra_error_with_its_stderr(servers_python):
    domain = shared_domain("sandbox_external_retail", servers_python)
    task = shared_tasks("sandbox_external_retail", domain)[0]
    backend = backend_for_domain(domain, task)
    setup = AttemptSetup.from_config(domain, task, judge=None)
    try:
        result = setup.with_agent(KillsItsServer(backend, task)).run(backend)
    finally:
        backend.close()
    assert (result.status, result.verdict) == ("infra_error", None)
    assert result.error.startswith(f"infra error during dialogue: MCP call {task.golden[0].tool} failed")
    assert "closed the connection" in result.error
    assert "Starting MCP server" in result.extra["backend"]["stderr_tail"]  # FastMCP's start-up line


def test_init_error_from_a_bad_config_is_infra_error_with_the_servers_traceback(servers_python):
    domain = shared_domain("external_booking_v1", servers_python)
    task = shared_tasks("external_booking_v1", domain)[0]
    bad = dataclasses.replace(
        task, extra={**task.extra, "init": {"data_patch": {"no_such_table": [{"id": 1}]}}}
    )
    result = AttemptSetup.from_config(domain, bad, judge=None).run()
    assert (result.status, result.verdict) == ("infra_error", None)
    assert result.error == (
        f"infra error during start: __reserved__init failed for {task.id}: "
        "Data patch validation failed: Unknown table 'no_such_table'"
    )
    assert "SandboxToolsSystemError" in result.extra["backend"]["init_traceback"]


def test_search_service_that_is_not_there_makes_init_an_infra_error(servers_python, monkeypatch):
    monkeypatch.setenv("TB_TEST_TYPESENSE_KEY", "not-a-real-key")
    domain = shared_domain("sandbox_external_retail", servers_python)
    # 127.0.0.1:8108 is where these servers look for Typesense; nothing listens there in tests.
    domain.mcp["search"] = {"url": "http://127.0.0.1:8108", "api_key_env": "TB_TEST_TYPESENSE_KEY"}
    task = shared_tasks("sandbox_external_retail", domain)[0]
    result = AttemptSetup.from_config(domain, task, judge=None).run()
    assert result.status == "infra_error"
    assert result.error.startswith(f"infra error during start: __reserved__init failed for {task.id}: ")
    assert "not-a-real-key" not in repr(result.to_dict())
