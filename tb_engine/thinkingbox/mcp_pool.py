"""Warm pools of MCP server sessions: one per launch config and process, refilled in the background.

One fresh server process per attempt: a second ``__reserved__init`` does not reset a ThinkingBox
server. ``McpServerPool`` keeps connected sessions ready and starts a replacement whenever one is
taken, so the start stays off the critical path; closing a session (teardown, process exit)
happens in the background too. ``backend_for_domain`` is what the campaign worker uses.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import threading
import time
from typing import Any

from tb_engine.interfaces import InfraError
from tb_engine.spec import DomainSpec, TaskSpec
from tb_engine.thinkingbox.mcp_backend import McpBackend
from tb_engine.thinkingbox.mcp_config import McpServerConfig, launch_config
from tb_engine.thinkingbox.mcp_launch import ForkServerHandle
from tb_engine.thinkingbox.mcp_session import TEARDOWN_TIMEOUT_S, LoopThread, McpSession


class McpServerPool:
    """Keeps ``size`` freshly started sessions ready; each acquired session serves one attempt."""

    def __init__(self, config: McpServerConfig, size: int = 2):
        self.config = config
        self.size = max(1, size)
        self._loop = LoopThread()
        self.fork: ForkServerHandle | None = None
        if config.start_mode() == "fork":
            self.fork = ForkServerHandle(
                config.command, config.args, config.env, config.cwd, start_timeout_s=config.start_timeout_s
            )
        self._idle: collections.deque[McpSession] = collections.deque()
        self._closing: set[concurrent.futures.Future[None]] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.last_used = time.monotonic()
        self._tools: list[dict[str, Any]] | None = None
        self._tools_fork_start = 0
        for _ in range(self.size):
            self._idle.append(self._new_session())

    def _new_session(self) -> McpSession:
        return McpSession(self.config, self._loop, self.fork)

    def acquire(self) -> McpSession:
        """A started session (waiting for one if needed); a replacement starts in the background.

        A ready-made session that failed or whose server process is gone (e.g. its fork server
        died) is replaced once by a fresh one before a failure counts.
        """
        with self._lock:
            if self._closed:
                raise InfraError("MCP server pool is closed")
            self.last_used = time.monotonic()
            stale: list[McpSession] = []
            if self.fork is not None and self.fork.starts and not self.fork.alive():
                # The fork server died: its children (the ready sessions) died with it.
                stale, self._idle = list(self._idle), collections.deque()
            session = self._idle.popleft() if self._idle else self._new_session()
            self._idle.append(self._new_session())  # refill: starts now, off the critical path
        for dead in stale:
            self.release(dead)
        if not session.alive():
            self.release(session)
            session = self._new_session()
        try:
            session.wait_ready()
        except InfraError:
            self.release(session)
            raise
        return session

    def list_tools(self, session: McpSession) -> list[dict[str, Any]]:
        """The server's tool listing: once per pool (and fork-server start) unless ``list_tools: per_attempt``."""
        fork_start = self.fork.starts if self.fork is not None else 0
        if (
            self.config.list_tools == "per_attempt"
            or self._tools is None
            or fork_start != self._tools_fork_start
        ):
            tools = session.list_tools()
            if self.config.list_tools != "per_attempt":
                self._tools, self._tools_fork_start = tools, fork_start
            return tools
        return self._tools

    def release(self, session: McpSession) -> None:
        """Close ``session`` in the background (teardown, process exit); ``close`` waits for it."""
        future = session.close(wait=False)
        with self._lock:
            self._closing.add(future)
        future.add_done_callback(self._closed_one)

    def _closed_one(self, future: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._closing.discard(future)

    def backend(self, domain: DomainSpec, task: TaskSpec, **options: Any) -> McpBackend:
        """A Backend for one attempt of ``task`` on a fresh pooled server.

        A forked child that was gone before init answered (its fork server died in between) is
        replaced once; any other failure is the attempt's infrastructure error.
        """
        session = self.acquire()
        try:
            return McpBackend(session, domain=domain, task=task, pool=self, **options)
        except InfraError:
            if session.process.start != "fork" or session.alive() or (self.fork and self.fork.alive()):
                raise
        return McpBackend(self.acquire(), domain=domain, task=task, pool=self, **options)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), collections.deque()
        for session in idle:
            self.release(session)
        with self._lock:
            pending = list(self._closing)
        concurrent.futures.wait(pending, timeout=TEARDOWN_TIMEOUT_S + 20)
        if self.fork is not None:
            self.fork.close()
        self._loop.stop()

    def forget(self) -> None:
        """In a forked copy of this process: drop the pool without touching the parent's processes."""
        self._closed = True
        self._idle.clear()
        if self.fork is not None:
            self.fork.forget()


# --- Process-wide warm pools, one per launch config (what the campaign worker uses) ---------

DEFAULT_POOL_SIZE = 2
# A pool no attempt took a server from for this long (longer than an attempt may run) is closed:
# its fork server and ready servers hold tens of MB for a domain no running campaign uses.
IDLE_CLOSE_S = float(os.environ.get("TB_MCP_IDLE_CLOSE_S", "900"))
_pools: dict[str, McpServerPool] = {}
_pools_lock = threading.Lock()
_idle_checked = time.monotonic()


def _pool_key(config: McpServerConfig) -> str:
    return json.dumps(
        [
            config.command,
            list(config.args),
            sorted((config.env or {}).items()),
            config.cwd,
            config.url,
            config.start_mode(),
            config.list_tools,
            config.teardown,
        ]
    )


def pool_for(config: McpServerConfig, size: int | None = None) -> McpServerPool:
    """The process-wide warm pool for this launch config (created on first use)."""
    key = _pool_key(config)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = McpServerPool(config, size=size or DEFAULT_POOL_SIZE)
        idle = _take_idle_pools(time.monotonic(), keep=pool)
    for stale in idle:  # in the background: closing waits for the servers' teardown
        threading.Thread(target=stale.close, name="tb-mcp-close-idle", daemon=True).start()
    return pool


def _take_idle_pools(now: float, *, keep: McpServerPool) -> list[McpServerPool]:
    """Remove (under the lock) and return the pools idle longer than IDLE_CLOSE_S; checked once a minute."""
    global _idle_checked
    if now - _idle_checked < min(60.0, IDLE_CLOSE_S):
        return []
    _idle_checked = now
    idle = [k for k, p in _pools.items() if p is not keep and now - p.last_used > IDLE_CLOSE_S]
    return [_pools.pop(k) for k in idle]


def backend_for_domain(domain: DomainSpec, task: TaskSpec) -> McpBackend:
    """A Backend for one attempt of ``task`` from the warm pool of the domain's MCP server."""
    mcp = domain.mcp or {}
    launch = mcp.get("launch") or {}
    options = {"attribute_writes": mcp["attribute_writes"]} if mcp.get("attribute_writes") else {}
    return pool_for(launch_config(domain), size=launch.get("pool_size")).backend(domain, task, **options)


def close_pools() -> None:
    """Close every process-wide pool (tests, worker shutdown)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


def _forget_pools_after_fork() -> None:
    """A forked copy of this process (a prefork worker child, an env-server worker) starts its own pools."""
    global _pools_lock
    _pools_lock = threading.Lock()
    for pool in list(_pools.values()):
        pool.forget()
    _pools.clear()


os.register_at_fork(after_in_child=_forget_pools_after_fork)
