"""Process-wide MCP server pools: closed when idle (even if nobody asks again), capped, bounded by memory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tb_engine.thinkingbox import mcp_pool
from tb_engine.thinkingbox.mcp_config import McpServerConfig

ROOT = Path(__file__).resolve().parents[3]


class FakePool:
    """What the process-wide bookkeeping reads of a pool: last use, whether in use, servers it keeps."""

    def __init__(self, config=None, size: int = 2, *, last_used: float = 0.0, busy: bool = False) -> None:
        self.config, self.size = config, size
        self.last_used = time.monotonic() if config is not None else last_used
        self.busy = busy
        self.warm_servers = size + 1
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def pools(monkeypatch):
    table: dict[str, FakePool] = {}
    monkeypatch.setattr(mcp_pool, "_pools", table)
    monkeypatch.setattr(mcp_pool, "McpServerPool", FakePool)
    monkeypatch.setattr(mcp_pool, "_memory_over", lambda: False)
    monkeypatch.setattr(mcp_pool, "_close_in_background", lambda stale: [p.close() for p in stale])
    monkeypatch.setattr(mcp_pool, "_start_ticker", lambda: None)
    return table


def _config(name: str) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=("-m", name), cwd=str(ROOT), start="spawn")


def test_pools_idle_longer_than_the_limit_are_taken_out_at_most_once_a_minute(monkeypatch, pools):
    monkeypatch.setattr(mcp_pool, "IDLE_CLOSE_S", 100.0)
    monkeypatch.setattr(mcp_pool, "IDLE_CHECK_S", 60.0)
    monkeypatch.setattr(mcp_pool, "_idle_checked", 0.0)
    busy, idle, held, wanted = (
        FakePool(last_used=950.0),
        FakePool(last_used=850.0),
        FakePool(busy=True),
        FakePool(),
    )
    pools.update(busy=busy, idle=idle, held=held, wanted=wanted)

    assert mcp_pool._take_idle_pools(1000.0, keep=wanted) == [idle]  # the pool asked for stays
    assert list(pools) == ["busy", "held", "wanted"]  # one an attempt holds stays however old

    busy.last_used = 0.0
    assert mcp_pool._take_idle_pools(1030.0, keep=wanted) == []  # checked a minute ago
    assert mcp_pool._take_idle_pools(1061.0, keep=wanted) == [busy]
    assert list(pools) == ["held", "wanted"]


def test_a_new_pool_closes_the_least_recently_used_unheld_pools_past_the_server_cap(monkeypatch, pools):
    monkeypatch.setattr(mcp_pool, "MAX_WARM_SERVERS", 9)  # three pools of 2 with their fork servers
    first, second, third = (mcp_pool.pool_for(_config(f"server_{n}")) for n in range(3))
    second.last_used = first.last_used - 1  # least recently used, but held by an attempt:
    second.busy = True

    fourth = mcp_pool.pool_for(_config("server_3"))

    assert (first.closed, second.closed, third.closed) == (True, False, False)
    assert list(pools.values()) == [second, third, fourth]


def test_past_the_memory_budget_every_pool_not_in_use_is_closed(pools):
    held, unused = FakePool(busy=True), FakePool()
    pools.update(held=held, unused=unused)
    mcp_pool.set_memory_guard(lambda: False)
    assert mcp_pool.close_idle_pools() == 0

    mcp_pool.set_memory_guard(lambda: True)
    try:
        assert mcp_pool.close_idle_pools() == 1
    finally:
        mcp_pool.set_memory_guard(lambda: False)

    assert (held.closed, unused.closed, list(pools.values())) == (False, True, [held])


OWNER = r"""
import sys, time
from tb_engine.thinkingbox.mcp_config import McpServerConfig
from tb_engine.thinkingbox.mcp_pool import pool_for
pool_for(McpServerConfig(command=sys.executable, args=("-m", "tests.support.tb_mcp_server"), cwd=sys.argv[1], start="fork"), size=2)
print("ready", flush=True)
time.sleep(600)  # never asks for a pool again, as a worker with no attempt left
"""


def _servers(pid: int) -> set[int]:
    """The process's descendants but its reaper (tb_engine.thinkingbox.mcp_reaper's watcher)."""
    found, stack = set(), [pid]
    while stack:
        for task in Path(f"/proc/{stack.pop()}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            for child in children:
                try:
                    command = Path(f"/proc/{child}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"killpg" not in command:
                    found.add(child)
                    stack.append(child)
    return found


def test_an_idle_process_closes_its_pools_without_being_asked_again():
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(ROOT)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TB_MCP_IDLE_CLOSE_S": "2", "TB_MCP_IDLE_CHECK_S": "0.2"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        seen: set[int] = set()
        deadline = time.monotonic() + 20  # the pool starts its servers in the background
        while time.monotonic() < deadline and len(seen) < 3:
            seen |= _servers(owner.pid)
            time.sleep(0.05)
        assert len(seen) >= 3  # the fork server and its two ready children (and short-lived helpers)

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _servers(owner.pid):
            time.sleep(0.2)

        assert sorted(_servers(owner.pid)) == []
    finally:
        owner.kill()
        owner.wait()
