"""The unmodified openenv-core clients on a real ThinkingBox server domain: ThinkingBox-format tasks outside
the benchmark (ours, fixtures/thinkingbox/test_case), each episode in a fresh server process from the
pre-imported fork server. Golden 1.0, no-op 0.0, and every close frees its episode and process."""

from __future__ import annotations

import asyncio

import pytest
from openenv import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient

from tb_engine.agents.golden import DEFAULT_REPLY
from tb_engine.training import Environment
from tb_engine.training.thinkingbox_suite import read_training_suite
from tb_envserver import EnvServer
from tests.support.episodes import open_episodes, wait_for_open
from tests.support.paths import THINKINGBOX_DIR
from tests.support.real_servers import DATASET, OWN_TEST_CASES, servers_python

SERVERS_YAML = THINKINGBOX_DIR / "servers" / "servers.yaml"
BENCHMARK_LIST = THINKINGBOX_DIR / "releases" / "thinkingbox_bench_v1" / "testlist_thinkingbox_bench_v1.yaml"
TASK = "sandbox_auto_insurance_tbw.py:test_tbw_ai_fnol_hit_and_run_ca"


@pytest.fixture(scope="module")
def suite():
    read = read_training_suite(
        DATASET,
        servers=SERVERS_YAML,
        python=servers_python(),
        test_cases=[OWN_TEST_CASES],
        benchmark_list=BENCHMARK_LIST,
    )
    assert (read.suite.evaluation_only, read.benchmark_tasks_left_out, read.ungraded) == (False, 0, ())
    return read.suite


@pytest.fixture
def server(suite):
    server = EnvServer(Environment(suite))
    server.start_background()
    yield server
    server.shutdown_all()


def test_training_suite_leaves_out_every_benchmark_task():
    read = read_training_suite(DATASET, servers=SERVERS_YAML, python="python3", benchmark_list=BENCHMARK_LIST)
    benchmark = set(BENCHMARK_LIST.read_text().replace("- ", "").split())
    assert read.benchmark_tasks_left_out > 0
    assert not set(read.suite.tasks) & benchmark
    assert read.suite.evaluation_only is False
    # the shared dataset's own non-benchmark scenarios carry custom Python test bodies: served, but ungraded
    assert {read.suite.tasks[t].domain for t in read.ungraded} == {
        "airline_tau_bench_full",
        "email_system_org",
        "mcs_defaults",
        "retail_banking",
    }


def test_generic_client_golden_then_noop_on_a_real_server_domain(server, suite):
    task = suite.tasks[TASK]
    rewards = []
    for golden in (True, False):
        with GenericEnvClient(base_url=server.url, message_timeout_s=60).sync() as env:
            first = env.reset(task_id=TASK)
            names = {t["name"] for t in first.observation["tools"]}
            assert {c.tool for c in task.golden} <= names and "reply_to_user" in names
            if golden:
                calls = [{"name": c.tool, "arguments": dict(c.arguments)} for c in task.golden]
                middle = env.step({"tool_calls": calls})
                assert [m["is_error"] for m in middle.observation["messages"]] == [False] * len(calls)
            last = env.step({"text": task.extra.get("golden_reply") or DEFAULT_REPLY, "done": True})
            assert last.done is True
            rewards.append(last.reward)
            if not golden:
                assert "missing_effect" in last.observation["info"]["categories"]
        assert wait_for_open(server, 0, timeout=10) == 0
    assert rewards == [1.0, 0.0]


def test_mcp_tool_client_golden_then_noop_and_abandoned_sessions_free_their_servers(server, suite):
    task = suite.tasks[TASK]

    async def episode(golden: bool) -> float | None:
        async with MCPToolClient(base_url=server.url, message_timeout_s=60) as env:
            await env.reset(task_id=TASK)
            if golden:
                for call in task.golden:
                    await env.call_tool(call.tool, **call.arguments)
            final = await env.call_tool("reply_to_user", message=DEFAULT_REPLY, done=True)
            return final["reward"]

    async def abandon(count: int) -> int:
        clients = [MCPToolClient(base_url=server.url, message_timeout_s=60) for _ in range(count)]
        for client in clients:
            await client.connect()
            await client.reset(task_id=TASK)
        opened = open_episodes(server)
        for client in clients:
            await client.close()
        return opened

    assert asyncio.run(episode(golden=True)) == 1.0
    assert asyncio.run(episode(golden=False)) == 0.0
    assert asyncio.run(abandon(4)) == 4
    assert wait_for_open(server, 0, timeout=10) == 0


def test_a_failed_episode_runs_one_server_not_a_second_for_write_attribution(suite, monkeypatch):
    """The trainer sees counts, not which call wrote what: no replay of a failed attempt on a second
    server (the harness default "on_failure" would start one; measured 3.3x the CPU of the episode)."""
    from tb_engine.thinkingbox import mcp_pool
    from tb_engine.training.environment import training_domain

    acquired = []
    original = mcp_pool.McpServerPool.acquire
    monkeypatch.setattr(mcp_pool.McpServerPool, "acquire", lambda pool: acquired.append(1) or original(pool))
    env = Environment(suite)
    task = suite.tasks[TASK]
    assert env.domains[task.domain].mcp["attribute_writes"] == "off"
    assert env.domains[task.domain].mcp["launch"]["env"]["FASTMCP_LOG_LEVEL"] == "WARNING"
    explicit = suite.domains[task.domain]
    explicit = type(explicit)(
        **{**explicit.__dict__, "mcp": {**explicit.mcp, "attribute_writes": "per_call"}}
    )
    assert training_domain(explicit).mcp["attribute_writes"] == "per_call"  # a domain's own choice stays
    try:
        episode = env.reset(task_id=TASK)
        calls = [
            {"name": c.tool, "arguments": dict(c.arguments)} for c in task.golden[:-1]
        ]  # last write left out
        env.step(episode["episode_id"], {"tool_calls": calls})
        last = env.step(episode["episode_id"], {"text": DEFAULT_REPLY, "done": True})
    finally:
        env.close()
    assert (last["done"], last["reward"], len(acquired)) == (True, 0.0, 1)
    assert last["info"]["diff_counts"]["missing_effect"] + last["info"]["diff_counts"]["wrong_value"] >= 1
