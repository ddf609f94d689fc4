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
from collections.abc import Callable
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
        self._lent: set[McpSession] = set()  # sessions an attempt holds: the pool must not close under them
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
        with self._lock:
            self._lent.add(session)
        return session

    @property
    def busy(self) -> bool:
        """An attempt holds one of its sessions (closing the pool now would end that attempt's server)."""
        with self._lock:
            return bool(self._lent)

    @property
    def warm_servers(self) -> int:
        """The server processes this pool keeps standing: its ready sessions and its fork server."""
        return self.size + (self.fork is not None)

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
            self._lent.discard(session)
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
#
# Bounded three ways, none of which ever closes a pool while an attempt holds one of its servers:
# - idle: a pool no attempt took a server from for IDLE_CLOSE_S is closed, by a timer thread of
#   the process (started with its first pool), so an idle worker gives its servers back too;
# - count: at most MAX_WARM_SERVERS standing server processes (ready sessions + fork servers) per
#   process; a new pool closes the least recently used ones to make room;
# - memory: once the worker's memory budget is exceeded (set_memory_guard), every pool not in use
#   is closed (at the next tick, or when a new pool is made).

DEFAULT_POOL_SIZE = 2
# A pool no attempt took a server from for this long (longer than an attempt may run) is closed:
# its fork server and ready servers hold tens of MB for a domain no running campaign uses.
IDLE_CLOSE_S = float(os.environ.get("TB_MCP_IDLE_CLOSE_S", "900"))
# How often the timer thread looks for idle pools and checks the memory budget.
IDLE_CHECK_S = float(os.environ.get("TB_MCP_IDLE_CHECK_S", "30"))
# Standing server processes per process, over all its pools (a pool of 2 with its fork server: 3).
MAX_WARM_SERVERS = int(os.environ.get("TB_MCP_MAX_WARM_SERVERS", "9"))
_pools: dict[str, McpServerPool] = {}
_pools_lock = threading.Lock()
_idle_checked = time.monotonic()
_ticker: threading.Thread | None = None
_memory_over: Callable[[], bool] = lambda: False  # noqa: E731 — no budget until the worker sets one


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
    """The process-wide warm pool for this launch config (created on first use, within the bounds above)."""
    key = _pool_key(config)
    stale: list[McpServerPool] = []
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            size = max(1, size or DEFAULT_POOL_SIZE)
            stale = _take_pools_for_room(size + 1) if not _memory_over() else _take_unused_pools()
            pool = _pools[key] = McpServerPool(config, size=size)
        stale += _take_idle_pools(time.monotonic(), keep=pool)
    _close_in_background(stale)
    _start_ticker()
    return pool


def _close_in_background(pools: list[McpServerPool]) -> None:
    for stale in pools:  # closing waits for the servers' teardown
        threading.Thread(target=stale.close, name="tb-mcp-close-idle", daemon=True).start()


def _take_idle_pools(now: float, *, keep: McpServerPool | None = None) -> list[McpServerPool]:
    """Remove (under the lock) and return the pools idle longer than IDLE_CLOSE_S; checked once a minute."""
    global _idle_checked
    if now - _idle_checked < min(60.0, IDLE_CLOSE_S, IDLE_CHECK_S):
        return []
    _idle_checked = now
    idle = [k for k, p in _pools.items() if p is not keep and not p.busy and now - p.last_used > IDLE_CLOSE_S]
    return [_pools.pop(k) for k in idle]


def _take_pools_for_room(needed: int) -> list[McpServerPool]:
    """Remove (under the lock) the least recently used pools not in use until ``needed`` more servers fit."""
    taken = []
    standing = sum(p.warm_servers for p in _pools.values())
    for key, pool in sorted(_pools.items(), key=lambda item: item[1].last_used):
        if standing + needed <= MAX_WARM_SERVERS:
            break
        if not pool.busy:
            taken.append(_pools.pop(key))
            standing -= pool.warm_servers
    return taken


def _take_unused_pools() -> list[McpServerPool]:
    """Remove (under the lock) every pool no attempt holds a server of."""
    return [_pools.pop(key) for key, pool in list(_pools.items()) if not pool.busy]


def set_memory_guard(over: Callable[[], bool]) -> None:
    """``over()`` tells whether the process is past its memory budget (the worker's; default: never)."""
    global _memory_over
    _memory_over = over


def close_idle_pools() -> int:
    """What the timer thread does each IDLE_CHECK_S: close idle pools, and unused ones when over budget."""
    with _pools_lock:
        stale = _take_idle_pools(time.monotonic())
        if _memory_over():
            stale += _take_unused_pools()
    _close_in_background(stale)
    return len(stale)


def _tick() -> None:
    while True:
        time.sleep(IDLE_CHECK_S)
        try:
            close_idle_pools()
        except Exception:  # the timer must keep running; the next tick tries again
            continue


def _start_ticker() -> None:
    """The process's timer thread, once (a forked child starts its own with its first pool)."""
    global _ticker
    with _pools_lock:
        if _ticker is None or not _ticker.is_alive():
            _ticker = threading.Thread(target=_tick, name="tb-mcp-idle-close", daemon=True)
            _ticker.start()


def backend_for_domain(domain: DomainSpec, task: TaskSpec) -> McpBackend:
    """A Backend for one attempt of ``task`` from the warm pool of the domain's MCP server."""
    mcp = domain.mcp or {}
    launch = mcp.get("launch") or {}
    options = {name: mcp[name] for name in ("attribute_writes", "evidence") if mcp.get(name)}
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
    global _pools_lock, _ticker
    _pools_lock = threading.Lock()
    _ticker = None  # threads do not survive a fork
    for pool in list(_pools.values()):
        pool.forget()
    _pools.clear()


os.register_at_fork(after_in_child=_forget_pools_after_fork)
