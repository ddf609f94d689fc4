"""Process-wide MCP server pools: a pool no attempt used for IDLE_CLOSE_S is closed."""

from __future__ import annotations

from tb_engine.thinkingbox import mcp_pool


class IdlePool:
    def __init__(self, last_used: float) -> None:
        self.last_used = last_used


def test_pools_idle_longer_than_the_limit_are_taken_out_at_most_once_a_minute(monkeypatch):
    monkeypatch.setattr(mcp_pool, "IDLE_CLOSE_S", 100.0)
    monkeypatch.setattr(mcp_pool, "_idle_checked", 0.0)
    busy, idle, wanted = IdlePool(950.0), IdlePool(850.0), IdlePool(0.0)
    monkeypatch.setattr(mcp_pool, "_pools", {"busy": busy, "idle": idle, "wanted": wanted})

    assert mcp_pool._take_idle_pools(1000.0, keep=wanted) == [idle]  # the pool asked for stays
    assert list(mcp_pool._pools) == ["busy", "wanted"]

    busy.last_used = 0.0
    assert mcp_pool._take_idle_pools(1030.0, keep=wanted) == []  # checked a minute ago
    assert mcp_pool._take_idle_pools(1061.0, keep=wanted) == [busy]
    assert list(mcp_pool._pools) == ["wanted"]
