"""Run attempts against ThinkingBox MCP tool servers (the Backend protocol over the official mcp SDK).

One fresh server process per attempt: a second ``__reserved__init`` does not reset a
ThinkingBox server. Start-up (~1.4 s for the real servers) is kept off the critical path by
``McpServerPool``, which keeps connected sessions warm and refills in the background. The mcp
SDK is async; each pool owns one event-loop thread and every session lives in one long-running
task on it (anyio scopes must be entered and left in the same task), so the Backend methods
stay synchronous.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tb_engine.interfaces import InfraError, ToolSchema
from tb_engine.snapshot import Snapshot
from tb_engine.spec import DomainSpec, TableSpec, TaskSpec
from tb_engine.thinkingbox.dataset import init_config
from tb_engine.thinkingbox.declarations import NO_DECLARATIONS, ServerDeclarations, declarations_for_launch
from tb_engine.thinkingbox.effects import (
    EffectsComparison,
    compare_effects,
    effects_states,
    infer_table_specs,
    resolve_declarations,
    snapshot_of,
    state_writes,
)
from tb_engine.transcript import ToolCall, ToolCallRequest

RESERVED_PREFIX = "__reserved__"


@dataclass(frozen=True)
class McpServerConfig:
    """How to reach a tool server: a stdio command (+ env) or a streamable-HTTP URL."""

    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str = ""
    mode: str = "legacy"  # the ThinkingBox servers speak the pre-2026 initialize handshake
    start_timeout_s: float = 60.0
    call_timeout_s: float = 120.0

    def target(self) -> Any:
        from mcp.client.stdio import StdioServerParameters

        if self.url:
            return self.url
        if not self.command:
            raise ValueError("McpServerConfig needs a command or a url")
        return StdioServerParameters(command=self.command, args=list(self.args), env=self.env, cwd=self.cwd)


class _LoopThread:
    """A private asyncio loop on a daemon thread; ``run`` executes a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="tb-mcp-loop", daemon=True)
        self._thread.start()

    def submit(self, coro: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Any, timeout: float) -> Any:
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


class McpSession:
    """One connected session to one server process; used for exactly one attempt."""

    def __init__(self, config: McpServerConfig, loop: _LoopThread):
        self.config = config
        self._loop = loop
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future = concurrent.futures.Future()
        self._task = loop.submit(self._keep())
        self.started_at = time.monotonic()

    async def _keep(self) -> None:
        from mcp import Client

        self._stop = asyncio.Event()
        try:
            async with Client(self.config.target(), mode=self.config.mode) as client:
                self._client = client
                self._ready.set_result(True)
                await self._stop.wait()
        except BaseException as exc:  # surfaced to whoever waits for the session
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def wait_ready(self) -> None:
        try:
            self._ready.result(self.config.start_timeout_s)
        except Exception as exc:
            raise InfraError(f"MCP server did not start: {exc}") from exc

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.wait_ready()
        try:
            return self._loop.run(self._client.call_tool(name, arguments), self.config.call_timeout_s)
        except Exception as exc:
            raise InfraError(f"MCP call {name} failed: {type(exc).__name__}: {exc}") from exc

    def list_tools(self) -> list[dict[str, Any]]:
        self.wait_ready()
        try:
            listed = self._loop.run(self._client.list_tools(), self.config.call_timeout_s)
        except Exception as exc:
            raise InfraError(f"MCP list_tools failed: {exc}") from exc
        return [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]

    def close(self) -> None:
        if self._ready.done() and self._ready.exception() is None:
            try:
                self.call(f"{RESERVED_PREFIX}teardown", {})
            except InfraError:
                pass  # the process is being discarded either way
        if self._stop is not None:
            self._loop.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._task.result(10)
        except BaseException:
            pass


class McpServerPool:
    """Keeps ``size`` freshly started sessions ready; each acquired session serves one attempt."""

    def __init__(self, config: McpServerConfig, size: int = 2):
        self.config = config
        self.size = max(1, size)
        self._loop = _LoopThread()
        self._idle: collections.deque[McpSession] = collections.deque()
        self._lock = threading.Lock()
        self._closed = False
        for _ in range(self.size):
            self._idle.append(McpSession(config, self._loop))

    def acquire(self) -> McpSession:
        """A started session (waiting for one if needed); a replacement starts in the background."""
        with self._lock:
            if self._closed:
                raise InfraError("MCP server pool is closed")
            session = self._idle.popleft() if self._idle else McpSession(self.config, self._loop)
            self._idle.append(
                McpSession(self.config, self._loop)
            )  # refill: starts now, off the critical path
        session.wait_ready()
        return session

    def backend(self, domain: DomainSpec, task: TaskSpec, **options: Any) -> McpBackend:
        """A Backend for one attempt of ``task`` on a fresh pooled server."""
        return McpBackend(self.acquire(), domain=domain, task=task, **options)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), collections.deque()
        for session in idle:
            session.close()
        self._loop.stop()


def _text_of(result: Any) -> str:
    parts = [getattr(block, "text", "") for block in getattr(result, "content", []) or []]
    return "".join(p for p in parts if p)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text


@dataclass
class McpBackend:
    """The Backend protocol for one attempt on one ThinkingBox-style server session."""

    session: McpSession
    domain: DomainSpec
    task: TaskSpec
    attribute_writes: bool = True  # fetch effects after each state-changing call to record who wrote what
    # What the server leaves out of its hash; None: read from the server's own declarations.
    declarations: ServerDeclarations | None = None
    _resolved: ServerDeclarations | None = field(default=None, init=False)
    _schemas: list[ToolSchema] = field(default_factory=list, init=False)
    _writes: dict[tuple[str, str, str | None], list[int]] = field(default_factory=dict, init=False)
    _last_state: dict[str, list[dict[str, Any]]] | None = field(default=None, init=False)
    _effects: dict[str, Any] | None = field(default=None, init=False)
    _specs: dict[str, TableSpec] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        try:
            answer = _json_or_text(
                _text_of(
                    self.session.call(
                        f"{RESERVED_PREFIX}init", {"config": init_config(self.domain, self.task)}
                    )
                )
            )
            if isinstance(answer, dict) and answer.get("status") == "error":
                raise InfraError(f"__reserved__init failed for {self.task.id}: {answer.get('message', '')}")
            allowed = set(self.domain.tools)
            for tool in self.session.list_tools():
                name = tool["name"]
                if name.startswith(RESERVED_PREFIX) or (allowed and name not in allowed):
                    continue
                hints = tool.get("annotations") or {}
                self._schemas.append(
                    ToolSchema(
                        name=name,
                        description=tool.get("description") or "",
                        parameters=tool.get("inputSchema") or {"type": "object"},
                        read_only=bool(hints.get("readOnlyHint", False)),
                    )
                )
        except BaseException:
            self.session.close()
            raise

    def _declarations(self) -> ServerDeclarations:
        """The server's hash rules (probed once per server package, see declarations.py), plus the domain's own."""
        if self._resolved is None:
            config = self.session.config
            if self.declarations is not None:
                base = self.declarations
            elif config.url:
                base = NO_DECLARATIONS  # a remote server can only declare in its geteffects answer
            else:
                base = declarations_for_launch(config.command, config.args, env=config.env, cwd=config.cwd)
            extra = (self.domain.mcp or {}).get("unstable")
            self._resolved = base.with_extra(extra, "the domain's mcp.unstable")
        return self._resolved

    def tool_schemas(self) -> list[ToolSchema]:
        return list(self._schemas)

    def call_tool(self, request: ToolCallRequest, *, index: int, turn: int) -> ToolCall:
        call = ToolCall(index=index, id=request.id, name=request.name, arguments=request.arguments, turn=turn)
        schema = next((s for s in self._schemas if s.name == request.name), None)
        if schema is None:
            call.error = f"unknown tool {request.name!r}"
            return call
        if not isinstance(request.arguments, dict):
            call.error = "arguments must be a JSON object"
            return call
        call.read_only = schema.read_only
        started = time.monotonic()
        result = self.session.call(request.name, request.arguments)
        call.duration_ms = (time.monotonic() - started) * 1000.0
        self._effects = None  # the state may have changed: SR must be fetched again
        text = _text_of(result)
        call.result = _json_or_text(text)
        if getattr(result, "is_error", False):
            call.error = text or "tool error"
        elif isinstance(call.result, dict) and call.result.get("error"):
            call.error = str(call.result["error"])
        if self.attribute_writes and not schema.read_only:
            self._record_writes(index, call)
        return call

    def _geteffects(self) -> dict[str, Any]:
        answer = _json_or_text(_text_of(self.session.call(f"{RESERVED_PREFIX}geteffects", {})))
        if not isinstance(answer, dict):
            raise InfraError(f"__reserved__geteffects returned no mapping for {self.task.id}")
        return answer

    def _record_writes(self, index: int, call: ToolCall) -> None:
        answer = self._effects = self._geteffects()
        states = effects_states(self.domain.name, answer, self._declarations())
        before = self._last_state if self._last_state is not None else states.initial
        written = state_writes(before, states.result, self.table_specs())
        for place in written:
            self._writes.setdefault(place, []).append(index)
        call.changed_state = bool(written)
        self._last_state = states.result

    def effects(self) -> dict[str, Any]:
        """The final ``__reserved__geteffects`` answer (fetched once, when first needed)."""
        if self._effects is None:
            self._effects = self._geteffects()
        return self._effects

    def comparison(self) -> EffectsComparison:
        """Our diff beside the server's hash verdict for this attempt."""
        return compare_effects(self.domain.name, self.effects(), self._declarations())

    def state_verdict_of_record(self) -> bool | None:
        """The server's own hash verdict (SPEC §2: the verdict of record for ThinkingBox suites)."""
        answer = self.effects()
        if answer.get("result_db_hash") is None or answer.get("golden_db_hash") is None:
            return None
        return answer["result_db_hash"] == answer["golden_db_hash"]

    def table_specs(self) -> dict[str, TableSpec]:
        """Specs inferred once, from S0 and SG of the first effects answer, so S0/SR/SG share them."""
        if self._specs is None:
            answer = self.effects()
            declarations = resolve_declarations(answer, self._declarations())
            states = effects_states(self.domain.name, answer, declarations)
            self._specs = infer_table_specs(self.domain.name, [states.initial, states.golden], declarations)
        return self._specs

    def _snapshot(self, key: str) -> Snapshot:
        specs = self.table_specs()
        state = self.effects()[key]
        new_tables = {name: rows for name, rows in state.items() if name not in specs}
        if new_tables:  # a table that only appeared later: add its spec, leave the others untouched
            declarations = resolve_declarations(self.effects(), self._declarations())
            specs.update(infer_table_specs(self.domain.name, [new_tables], declarations))
        return snapshot_of({name: list(rows or []) for name, rows in state.items()}, specs)

    def initial_snapshot(self) -> Snapshot:
        return self._snapshot("initial_db_state")

    def result_snapshot(self) -> Snapshot:
        return self._snapshot("result_db_state")

    def golden_snapshot(self) -> Snapshot:
        return self._snapshot("golden_db_state")

    def system_prompt(self) -> str:
        """The scenario's bot instructions (the runner's optional Backend method)."""
        return self.domain.policy

    def writes(self) -> dict[tuple[str, str, str | None], tuple[int, ...]]:
        return {place: tuple(indexes) for place, indexes in self._writes.items()}

    def result_extra(self) -> dict[str, Any]:
        """Our state verdict beside the server's hash verdict (the runner's optional Backend method)."""
        comparison = self.comparison()
        return {
            "thinkingbox": {
                "server": self.domain.name,
                "effects": {self.domain.name: comparison.evidence()},
                "disagree": not comparison.agree,
                # SPEC §2: for ThinkingBox suites the server's hash decides the state part.
                "verdict_of_record": "server hash" if self.state_verdict_of_record() is not None else "ours",
            }
        }

    def close(self) -> None:
        self.session.close()


# --- Process-wide warm pools, one per launch config (what the campaign worker uses) ---------

DEFAULT_POOL_SIZE = 2
_pools: dict[str, McpServerPool] = {}
_pools_lock = threading.Lock()


def launch_config(domain: DomainSpec) -> McpServerConfig:
    """The McpServerConfig stored in ``domain.mcp["launch"]`` (command/args/env/cwd or url)."""
    launch = (domain.mcp or {}).get("launch")
    if not isinstance(launch, dict) or not (launch.get("command") or launch.get("url")):
        raise InfraError(
            f"domain {domain.name!r} has no MCP launch config (mcp.launch with a command or a url); "
            "re-import it with --mcp-command or --mcp-url"
        )
    return McpServerConfig(
        command=str(launch.get("command") or ""),
        args=tuple(str(a) for a in launch.get("args") or ()),
        env={str(k): str(v) for k, v in (launch.get("env") or {}).items()} or None,
        cwd=launch.get("cwd") or None,
        url=str(launch.get("url") or ""),
    )


def _pool_key(config: McpServerConfig) -> str:
    return json.dumps(
        [config.command, list(config.args), sorted((config.env or {}).items()), config.cwd, config.url]
    )


def pool_for(config: McpServerConfig, size: int | None = None) -> McpServerPool:
    """The process-wide warm pool for this launch config (created on first use)."""
    key = _pool_key(config)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = McpServerPool(config, size=size or DEFAULT_POOL_SIZE)
        return pool


def backend_for_domain(domain: DomainSpec, task: TaskSpec) -> McpBackend:
    """A Backend for one attempt of ``task`` from the warm pool of the domain's MCP server."""
    launch = (domain.mcp or {}).get("launch") or {}
    return pool_for(launch_config(domain), size=launch.get("pool_size")).backend(domain, task)


def close_pools() -> None:
    """Close every process-wide pool (tests, worker shutdown)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()
