"""How MCP server processes start and end (tb_engine.thinkingbox.mcp_launch), on our test server:
a fresh process per attempt forked from a pre-imported parent, plain spawn as the fallback,
per-attempt stderr, children that die with their parent, a dead parent started again, no zombies,
and servers that start whatever this process's sys.stderr is (a Celery worker's LoggingProxy)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tb_engine.attempt_setup import AttemptSetup
from tb_engine.interfaces import InfraError
from tb_engine.spec import DomainSpec, GoldenCall, TaskSpec, ToolSpec
from tb_engine.thinkingbox.mcp_config import McpServerConfig
from tb_engine.thinkingbox.mcp_pool import McpServerPool
from tb_engine.transcript import ToolCallRequest

ROOT = Path(__file__).resolve().parents[3]
FORK = McpServerConfig(
    command=sys.executable, args=("-m", "tests.support.tb_mcp_server"), cwd=str(ROOT), start="fork"
)
SPAWN = dataclasses.replace(FORK, start="spawn")
GOLDEN = [
    {"tool": "create_ticket", "parameters": {"customer_id": "C-1", "subject": "Late order"}},
    {"tool": "update_ticket", "parameters": {"ticket_id": "2", "status": "solved"}},
]
DOMAIN = DomainSpec(
    name="tb_test_shop",
    title="test shop",
    policy="You are a support agent.",
    tables={},
    tools={
        n: ToolSpec(n, "", {"type": "object"})
        for n in ("create_ticket", "update_ticket", "get_ticket", "crash_server")
    },
    base_data={},
    backend="mcp",
    mcp={"server": "tb_test_shop", "world_state": {}, "unstable": {"tickets": ["subject"]}},
)


def _task(task_id="shop.py:test_close_ticket", golden=GOLDEN, data_patch=None) -> TaskSpec:
    return TaskSpec(
        id=task_id,
        domain="tb_test_shop",
        query="Please open and close a ticket.",
        user_context="",
        data_patch=data_patch or {},
        golden=tuple(GoldenCall(g["tool"], g["parameters"]) for g in golden),
        extra={"init": {"data_patch": data_patch or {}, "golden_test_case": {"tool_interactions": golden}}},
    )


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _gone(pid: int, timeout: float = 10.0) -> bool:
    """True once ``pid`` no longer exists (reaped: not even a zombie is left)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def fork_pool():
    pool = McpServerPool(FORK, size=1)
    yield pool
    pool.close()


def test_fork_start_gives_every_attempt_a_fresh_child_of_one_parent(fork_pool):
    first = fork_pool.backend(DOMAIN, _task())
    second = fork_pool.backend(DOMAIN, _task())
    try:
        results = [AttemptSetup.from_config(DOMAIN, b.task, judge=None).run(b) for b in (first, second)]
        pids = [first.session.process.pid, second.session.process.pid]
        assert [(r.status, r.verdict) for r in results] == [("done", "pass"), ("done", "pass")]
        # Both created ticket "2": the second process did not see the first one's writes.
        assert [r.transcript.tool_calls[0].result["id"] for r in results] == ["2", "2"]
        assert pids[0] != pids[1]
        assert [_parent_of(pid) for pid in pids] == [fork_pool.fork.pid, fork_pool.fork.pid]
        assert results[0].extra["backend"]["start"] == "fork"
    finally:
        first.close()
        second.close()
    assert [_gone(pid) for pid in pids] == [True, True]
    assert fork_pool.fork.starts == 1


def test_fork_parent_killed_is_noticed_and_started_again_and_its_children_die(fork_pool):
    backend = fork_pool.backend(DOMAIN, _task())
    child, parent = backend.session.process.pid, fork_pool.fork.pid
    backend.close()
    time.sleep(0.5)  # the pool's replacement session connects to the parent
    waiting = fork_pool._idle[0].process
    os.kill(parent, signal.SIGKILL)
    assert (_gone(child), _gone(waiting.pid)) == (True, True)  # the ready child died with its parent
    again = fork_pool.backend(DOMAIN, _task())
    try:
        result = AttemptSetup.from_config(DOMAIN, again.task, judge=None).run(again)
        assert (result.status, result.verdict) == ("done", "pass")
        assert (fork_pool.fork.starts, fork_pool.fork.pid != parent) == (2, True)
        assert _parent_of(again.session.process.pid) == fork_pool.fork.pid
    finally:
        again.close()


def test_every_attempt_keeps_its_own_server_stderr(fork_pool):
    broken = _task(task_id="shop.py:test_bad_table", data_patch={"warehouses": [{"id": "W-1"}]})
    with pytest.raises(InfraError) as caught:
        fork_pool.backend(DOMAIN, broken)
    tail = caught.value.evidence["backend"]["stderr_tail"]
    assert str(caught.value) == "__reserved__init failed for shop.py:test_bad_table: unknown table warehouses"
    assert tail.splitlines() == [
        "tb_test_shop: init with 1 patched table(s)",
        "tb_test_shop: unknown table warehouses",
    ]


def test_server_crash_mid_attempt_is_an_infra_error_with_its_stderr(fork_pool):
    task = _task(golden=[*GOLDEN, {"tool": "crash_server", "parameters": {"code": 9}}])
    result = AttemptSetup.from_config(DOMAIN, task, judge=None).run(fork_pool.backend(DOMAIN, task))
    assert (result.status, result.verdict) == ("infra_error", None)
    assert result.error.startswith("infra error during dialogue: MCP call crash_server failed")
    assert (
        result.extra["backend"]["stderr_tail"].splitlines()[-1]
        == "tb_test_shop: crashing on purpose with code 9"
    )


@pytest.mark.parametrize("config", [FORK, SPAWN], ids=["fork", "spawn"])
def test_servers_start_when_sys_stderr_is_a_celery_logging_proxy(config, monkeypatch):
    from celery.utils.log import LoggingProxy, get_logger

    proxy = LoggingProxy(get_logger("test"))
    assert not hasattr(proxy, "fileno") or _fileno_fails(proxy)
    monkeypatch.setattr(sys, "stderr", proxy)
    monkeypatch.setattr(sys, "stdout", proxy)
    pool = McpServerPool(config, size=1)
    try:
        backend = pool.backend(DOMAIN, _task())
        result = AttemptSetup.from_config(DOMAIN, backend.task, judge=None).run(backend)
        backend.close()
    finally:
        pool.close()
    assert (result.status, result.verdict, result.extra["backend"]["start"]) == ("done", "pass", config.start)


def _fileno_fails(stream) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return True
    return False


def test_spawn_start_is_the_fallback_setting(monkeypatch):
    monkeypatch.setenv("TB_MCP_START", "spawn")
    default = dataclasses.replace(FORK, start="")
    assert (default.start_mode(), FORK.start_mode()) == ("spawn", "fork")
    monkeypatch.setenv("TB_MCP_START", "fork")
    assert default.start_mode() == "fork"
    not_python_m = McpServerConfig(command="/usr/bin/env", args=("my-server",))
    assert not_python_m.start_mode() == "spawn"  # only `python -m MODULE` can be forked


def test_spawned_process_ends_with_its_attempt():
    pool = McpServerPool(SPAWN, size=1)
    try:
        backend = pool.backend(DOMAIN, _task())
        pid = backend.session.process.pid
        assert _parent_of(pid) == os.getpid()
        backend.close()
        assert _gone(pid)
    finally:
        pool.close()


def test_fork_parent_and_children_die_when_the_process_that_started_them_crashes(tmp_path):
    script = textwrap.dedent(
        f"""
        import json, os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.engine.thinkingbox.test_mcp_launch import DOMAIN, FORK, _task
        from tb_engine.thinkingbox.mcp_pool import McpServerPool
        pool = McpServerPool(FORK, size=1)
        backend = pool.backend(DOMAIN, _task())
        print(json.dumps([pool.fork.pid, backend.session.process.pid]), flush=True)
        os._exit(3)  # no cleanup at all, like a worker killed by the OOM killer
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    parent, child = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 3
    assert (_gone(parent), _gone(child)) == (True, True)


def test_call_on_a_session_whose_server_was_killed_names_the_process(fork_pool):
    backend = fork_pool.backend(DOMAIN, _task())
    pid = backend.session.process.pid
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(InfraError) as caught:
        backend.call_tool(
            ToolCallRequest(id="c0", name="get_ticket", arguments={"ticket_id": "1"}), index=0, turn=0
        )
    backend.close()
    assert str(caught.value).startswith("MCP call get_ticket failed")
    assert caught.value.evidence["backend"]["pid"] == pid
    assert _gone(pid)


def test_a_forked_copy_of_this_process_starts_its_own_pools():
    """Prefork Celery children and env-server workers are forks: they must not use the parent's pools."""
    from tb_engine.thinkingbox import mcp_pool

    domain = dataclasses.replace(
        DOMAIN,
        mcp={**DOMAIN.mcp, "launch": {"command": sys.executable, "args": list(FORK.args), "cwd": str(ROOT)}},
    )
    parent_backend = mcp_pool.backend_for_domain(domain, _task())
    parent_fork_server = next(iter(mcp_pool._pools.values())).fork.pid
    parent_backend.close()
    pid = os.fork()
    if pid == 0:  # the child: a pool of its own, with its own fork server
        code = 1
        try:
            backend = mcp_pool.backend_for_domain(domain, _task())
            result = AttemptSetup.from_config(domain, backend.task, judge=None).run(backend)
            backend.close()
            mine = next(iter(mcp_pool._pools.values())).fork.pid
            code = 0 if (result.verdict, mine != parent_fork_server) == ("pass", True) else 2
            mcp_pool.close_pools()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    mcp_pool.close_pools()
    assert os.waitstatus_to_exitcode(status) == 0
