"""The unmodified openenv-core clients (PyPI) drive tb_envserver: golden 1.0, no-op 0.0, every close frees
its episode. Built-in SQLite domain here; the real ThinkingBox server domain in test_openenv_real_servers.py."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from openenv import GenericEnvClient
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient
from websockets.sync.client import connect

from tb_engine.agents.golden import DEFAULT_REPLY
from tb_engine.loader import load_builtin_suite
from tb_engine.training import Environment
from tb_envserver import EnvServer
from tests.support.episodes import open_episodes, wait_for_open

SUITE = load_builtin_suite()
TASK = "retail/ticket_hold_carrier_exception"


@pytest.fixture
def server():
    server = EnvServer(Environment(SUITE))
    server.start_background()
    yield server
    server.shutdown_all()


def golden_reply(task_id: str) -> str:
    """The golden final reply (what the keyword judge's rubrics look for)."""
    return SUITE.tasks[task_id].extra.get("golden_reply") or DEFAULT_REPLY


def golden_action(task_id: str) -> dict:
    task = SUITE.tasks[task_id]
    return {"tool_calls": [{"name": c.tool, "arguments": dict(c.arguments)} for c in task.golden]}


def test_generic_client_golden_episode_gets_reward_1_and_close_frees_it(server):
    with GenericEnvClient(base_url=server.url).sync() as env:
        first = env.reset(task_id=TASK)
        assert (first.done, first.reward) == (False, None)
        assert first.observation["metadata"]["task_id"] == TASK
        assert first.observation["messages"][0]["role"] == "user"
        assert open_episodes(server) == 1
        middle = env.step(golden_action(TASK))
        assert (middle.done, middle.reward) == (False, 0.0)
        assert all(m["role"] == "tool" and not m["is_error"] for m in middle.observation["messages"])
        last = env.step({"text": golden_reply(TASK), "done": True})
        assert (last.done, last.reward) == (True, 1.0)
        assert last.observation["info"]["verdict"] == "pass"
        state = env.state()
        assert (state["task_id"], state["done"], state["reward"], state["step_count"]) == (TASK, True, 1.0, 2)
    assert wait_for_open(server, 0) == 0
    assert httpx.get(f"{server.url}/health").json()["finished"] == 0  # the closed episode's record went too


def test_generic_client_noop_episode_gets_reward_0_with_missing_effect(server):
    with GenericEnvClient(base_url=server.url).sync() as env:
        env.reset(task_id=TASK)
        last = env.step({"text": "All done.", "done": True})
        assert (last.done, last.reward) == (True, 0.0)
        assert "missing_effect" in last.observation["info"]["categories"]
        assert last.observation["info"]["diff_counts"]["missing_effect"] >= 1
    assert wait_for_open(server, 0) == 0


def test_abandoned_episodes_are_freed_by_socket_close_and_by_a_second_reset(server):
    clients = [GenericEnvClient(base_url=server.url).sync() for _ in range(5)]
    for seed, client in enumerate(clients):
        client.connect()
        client.reset(seed=seed)
        client.reset(seed=seed + 100)  # re-reset on the same session: the first episode ends now
    assert open_episodes(server) == 5
    for client in clients:
        client.close()
    assert wait_for_open(server, 0) == 0


def test_dropped_socket_without_close_message_frees_the_episode(server):
    ws = connect(server.url.replace("http", "ws") + "/ws", legacy=True)
    ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK}}))
    assert json.loads(ws.recv())["type"] == "observation"
    assert open_episodes(server) == 1
    ws.close()  # no {"type": "close"} first: a trainer process that died
    assert wait_for_open(server, 0) == 0


def test_ws_errors_name_the_problem_and_keep_the_session(server):
    with connect(server.url.replace("http", "ws") + "/ws") as ws:
        ws.send(json.dumps({"type": "step", "data": {"text": "hi"}}))
        assert json.loads(ws.recv()) == {
            "type": "error",
            "data": {"message": "no episode in this session: send reset first", "code": "HTTP_409"},
        }
        ws.send(json.dumps({"type": "reset", "data": {"task": TASK}}))
        assert json.loads(ws.recv())["data"]["message"] == (
            "reset: unknown field(s) task (use task_id, seed, episode_id)"
        )
        ws.send("not json")
        assert json.loads(ws.recv())["data"]["code"] == "INVALID_JSON"
        ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK, "episode_id": "mine-1"}}))
        assert json.loads(ws.recv())["data"]["observation"]["metadata"]["episode_id"] == "mine-1"


def test_mcp_tool_client_over_ws_golden_1_then_noop_0(server):
    async def episode(golden: bool) -> tuple[float | None, list[str]]:
        async with MCPToolClient(base_url=server.url) as env:
            await env.reset(task_id=TASK)
            names = [t.name for t in await env.list_tools()]
            if golden:
                for call in SUITE.tasks[TASK].golden:
                    result = await env.call_tool(call.tool, **call.arguments)
                    assert isinstance(result, str) and "error" not in result.lower()
            reply = {"message": golden_reply(TASK), "done": True}
            final = await env.step(CallToolAction(tool_name="reply_to_user", arguments=reply))
            return final.reward, names

    reward, names = asyncio.run(episode(golden=True))
    assert reward == 1.0
    assert set(names) == set(SUITE.domains[SUITE.tasks[TASK].domain].tools) | {"reply_to_user"}
    assert asyncio.run(episode(golden=False))[0] == 0.0
    assert wait_for_open(server, 0) == 0


def test_mcp_tool_client_production_mode_over_http_mcp():
    # openenv/session/create carries no task from this client: a one-task pool decides it
    server = EnvServer(Environment(SUITE, task_ids=[TASK]))
    server.start_background()

    async def episode() -> tuple[list[str], dict]:
        env = MCPToolClient(base_url=server.url)
        env.use_production_mode = True
        try:
            names = [t.name for t in await env.list_tools()]
            assert open_episodes(server) == 1
            for call in SUITE.tasks[TASK].golden:
                await env.call_tool(call.tool, **call.arguments)
            final = await env.call_tool("reply_to_user", message=golden_reply(TASK), done=True)
        finally:
            await env.close()  # openenv/session/close
        return names, final

    try:
        names, final = asyncio.run(episode())
        still_open = open_episodes(server)
    finally:
        server.shutdown_all()
    assert "reply_to_user" in names and len(names) > 1
    assert (final["done"], final["reward"], final["info"]["verdict"]) == (True, 1.0, "pass")
    assert still_open == 0


def test_http_mcp_errors_are_json_rpc_errors(server):
    def rpc(body) -> dict:
        return httpx.post(f"{server.url}/mcp", content=json.dumps(body)).json()

    assert rpc({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})["error"] == {
        "code": -32602,
        "message": "session_id: required (tools differ per task): call openenv/session/create first",
    }
    assert rpc({"jsonrpc": "2.0", "id": 2, "method": "nope"})["error"]["code"] == -32601
    assert rpc([1, 2])["error"]["code"] == -32600
    assert httpx.post(f"{server.url}/mcp", content=b"{").json()["error"]["code"] == -32700


def test_openenv_get_endpoints_and_rest_close(server):
    assert httpx.get(f"{server.url}/health").json()["status"] == "healthy"
    schema = httpx.get(f"{server.url}/schema").json()
    assert sorted(schema) == ["action", "observation", "state"]
    metadata = httpx.get(f"{server.url}/metadata").json()
    assert (metadata["name"], metadata["suite"], metadata["pool"]) == (
        "thinkingbox-web",
        SUITE.name,
        len(SUITE.tasks),
    )
    assert httpx.get(f"{server.url}/state").json() == {
        "episode_id": None,
        "step_count": 0,
        "open_episodes": 0,
        "finished": 0,
    }
    started = httpx.post(f"{server.url}/reset", json={"task_id": TASK}).json()
    episode_id = started["episode_id"]
    assert httpx.get(f"{server.url}/state", params={"episode_id": episode_id}).json()["task_id"] == TASK
    closed = httpx.post(f"{server.url}/close", json={"episode_id": episode_id})
    assert closed.json() == {"episode_id": episode_id, "closed": True, "was_open": True}
    assert open_episodes(server) == 0
    again = httpx.post(f"{server.url}/close", json={"episode_id": episode_id})
    assert (again.status_code, again.json()) == (404, {"error": f"episode {episode_id}: unknown"})
