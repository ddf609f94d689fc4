"""Run attempts against ThinkingBox MCP tool servers (the Backend protocol over the official mcp SDK).

One fresh server process per attempt: a second ``__reserved__init`` does not reset a
ThinkingBox server. How the process starts is ``mcp_launch``'s business (forked from a parent
that imported the server module once, or spawned); ``McpServerPool`` keeps connected sessions
ready and refills in the background, so the start stays off the critical path. The mcp SDK is
async; each pool owns one event-loop thread and every session lives in one long-running task on
it (anyio scopes must be entered and left in the same task), so the Backend methods stay
synchronous. Closing a session (teardown, process exit) happens in the background too.

Every InfraError raised here carries ``evidence={"backend": …}``: the start mode, the process
id and the tail of the server's stderr, which the runner keeps in ``AttemptResult.extra``.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tb_engine.diff import diff_states
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
from tb_engine.thinkingbox.mcp_launch import (
    ForkServerHandle,
    ServerProcess,
    StderrTail,
    fork_module,
    forked,
    spawned,
)
from tb_engine.transcript import ToolCall, ToolCallRequest

RESERVED_PREFIX = "__reserved__"
START_MODES = ("fork", "spawn")
ATTRIBUTION_MODES = ("on_failure", "per_call", "off")
TEARDOWN_TIMEOUT_S = 5.0
STDERR_SETTLE_S = 0.5  # a crashed server's last lines arrive just after its connection ends


def default_start_mode() -> str:
    """``TB_MCP_START`` (fork | spawn), fork when unset."""
    mode = os.environ.get("TB_MCP_START", "fork").strip() or "fork"
    if mode not in START_MODES:
        raise InfraError(f"TB_MCP_START={mode!r}: expected one of {', '.join(START_MODES)}")
    return mode


@dataclass(frozen=True)
class McpServerConfig:
    """How to reach a tool server: a stdio command (+ env) or a streamable-HTTP URL.

    ``start``: ``fork`` (a fresh child of a pre-imported parent; only for ``python -m MODULE``
    commands), ``spawn`` (the command itself per attempt), or "" for the ``TB_MCP_START``
    default. ``list_tools``: ``once`` per pool (the ThinkingBox servers register their tools at
    import, so every fresh process lists the same ones) or ``per_attempt``. ``teardown``: when to
    call ``__reserved__teardown`` before the process ends — ``search`` (default: after an init
    that indexed policy sources into the search service, the one thing the ThinkingBox servers'
    teardown cleans up, outside the process), ``always`` or ``never``. Without a search service
    their teardown fails, and logging that traceback cost each server ~60 ms of CPU.
    """

    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str = ""
    mode: str = "legacy"  # the ThinkingBox servers speak the pre-2026 initialize handshake
    start_timeout_s: float = 60.0
    call_timeout_s: float = 120.0
    start: str = ""
    list_tools: str = "once"
    teardown: str = "search"

    def target(self) -> Any:
        """The SDK's own stdio parameters (or the URL), for driving the server with ``mcp.Client`` directly."""
        from mcp.client.stdio import StdioServerParameters

        if self.url:
            return self.url
        if not self.command:
            raise ValueError("McpServerConfig needs a command or a url")
        return StdioServerParameters(command=self.command, args=list(self.args), env=self.env, cwd=self.cwd)

    def start_mode(self) -> str:
        """url, fork or spawn: what this config starts (fork falls back to spawn for other commands)."""
        if self.url:
            return "url"
        if not self.command:
            raise ValueError("McpServerConfig needs a command or a url")
        wanted = self.start or default_start_mode()
        if wanted not in START_MODES:
            raise InfraError(f"MCP launch config: start {wanted!r}: expected one of {', '.join(START_MODES)}")
        return "fork" if wanted == "fork" and fork_module(self.command, self.args) else "spawn"


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


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups of the SDK's task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class McpSession:
    """One connected session to one server process; used for exactly one attempt."""

    def __init__(self, config: McpServerConfig, loop: _LoopThread, fork: ForkServerHandle | None = None):
        self.config = config
        self._loop = loop
        self._fork = fork
        self.process = ServerProcess()
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future = concurrent.futures.Future()
        self._closing: concurrent.futures.Future | None = None
        self.started_at = time.monotonic()
        self.timings_ms: dict[str, float] = {}
        # __reserved__teardown before the process ends: see McpServerConfig.teardown.
        self.wants_teardown = config.teardown == "always"
        self._task = loop.submit(self._keep())

    async def _keep(self) -> None:
        from mcp import Client

        self._stop = asyncio.Event()
        started = time.perf_counter()
        tail: StderrTail | None = None
        try:
            mode = self.config.start_mode()
            transport: Any
            if mode == "url":
                self.process.start = "url"
                transport = self.config.url
            else:
                tail = self.process.stderr = StderrTail()
                if mode == "fork" and self._fork is not None:
                    transport = forked(self._fork, self.process)
                else:
                    transport = spawned(
                        self.config.command, self.config.args, self.config.env, self.config.cwd, self.process
                    )
            async with Client(transport, mode=self.config.mode) as client:
                self._client = client
                self.timings_ms["connect"] = (time.perf_counter() - started) * 1000.0
                self._ready.set_result(True)
                await self._stop.wait()
        except BaseException as exc:  # surfaced to whoever waits for the session
            if not self._ready.done():
                self._ready.set_exception(_leaf(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            if tail is not None:
                tail.handed_over()

    def alive(self) -> bool:
        """False once the session failed or its server process is gone (True while still starting)."""
        if not self._ready.done():
            return True
        if self.failed or self.process.exited:
            return False
        if self.process.start == "spawn":
            return self.process.returncode() is None
        return self.process.pid is None or _pid_running(self.process.pid)

    @property
    def failed(self) -> bool:
        """True when the session could not be started (its ready future holds the error)."""
        return self._ready.done() and self._ready.exception() is not None

    def evidence(self, *, stderr: bool = False) -> dict[str, Any]:
        """What an attempt stores about its server process (the stderr tail for infra errors)."""
        found: dict[str, Any] = {
            "start": self.process.start or self.config.start_mode(),
            "pid": self.process.pid,
        }
        if self.process.started_ms:
            found["process_start_ms"] = round(self.process.started_ms, 2)
        if stderr:
            found["stderr_tail"] = self.stderr_tail()
        return {"backend": found}

    def stderr_tail(self) -> str:
        tail = self.process.stderr
        if tail is None:
            return ""
        try:
            self._loop.run(tail.settle(STDERR_SETTLE_S), STDERR_SETTLE_S + 1.0)
        except Exception:  # the tail read so far is still worth showing
            pass
        return tail.text()

    def infra_error(self, message: str) -> InfraError:
        """An InfraError carrying how the server process ended and its stderr tail."""
        return InfraError(message, evidence=self.evidence(stderr=True))

    def wait_ready(self) -> None:
        waited = time.perf_counter()
        try:
            self._ready.result(self.config.start_timeout_s)
        except Exception as exc:
            if isinstance(exc, InfraError):  # the fork server's own report (its stderr included)
                raise InfraError(
                    str(exc), evidence=_merged(exc.evidence, self.evidence(stderr=True))
                ) from exc
            text = str(exc) or type(exc).__name__
            raise self.infra_error(f"MCP server did not start: {text}") from exc
        finally:
            self.timings_ms.setdefault("wait", (time.perf_counter() - waited) * 1000.0)

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.wait_ready()
        try:
            return self._loop.run(self._call_tool(name, arguments), self.config.call_timeout_s)
        except Exception as exc:
            reason = _leaf(exc)
            raise self.infra_error(
                f"MCP call {name} failed: {type(reason).__name__}: {reason}"
                + (f" ({self.process.exited})" if self.process.exited else "")
            ) from exc

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """``tools/call`` through the SDK session, without its structured-output check.

        We read a result's text. ``ClientSession.call_tool`` would first list the tools of this
        session to validate structured content against their output schemas: a second tools/list
        per attempt (~50 KB for a ThinkingBox server, parsed on both ends) for a check we do not use.
        """
        from mcp import types as mcp_types

        request = mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(name=name, arguments=arguments)
        )
        return await self._client.session.send_request(request, mcp_types.CallToolResult)

    def list_tools(self) -> list[dict[str, Any]]:
        self.wait_ready()
        try:
            listed = self._loop.run(self._client.list_tools(), self.config.call_timeout_s)
        except Exception as exc:
            raise self.infra_error(f"MCP list_tools failed: {_leaf(exc)}") from exc
        return [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]

    def close(self, *, wait: bool = True) -> concurrent.futures.Future:
        """Teardown, then end the process; with ``wait=False`` in the background (the future says when)."""
        if self._closing is None:
            self._closing = self._loop.submit(self._close())
        if wait:
            try:
                self._closing.result(TEARDOWN_TIMEOUT_S + 15)
            except Exception:
                pass
        return self._closing

    async def _close(self) -> None:
        ready = asyncio.wrap_future(self._ready)
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.config.start_timeout_s)
        except BaseException:
            pass
        if (
            self.wants_teardown
            and self._ready.done()
            and self._ready.exception() is None
            and not self.process.exited
        ):
            try:
                await asyncio.wait_for(self._call_tool(f"{RESERVED_PREFIX}teardown", {}), TEARDOWN_TIMEOUT_S)
            except BaseException:
                pass  # the process is being discarded either way
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(asyncio.wrap_future(self._task), TEARDOWN_TIMEOUT_S + 10)
        except BaseException:
            pass


def _pid_running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _merged(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    merged = {**second.get("backend", {}), **{k: v for k, v in first.get("backend", {}).items() if v}}
    return {"backend": merged}


class McpServerPool:
    """Keeps ``size`` freshly started sessions ready; each acquired session serves one attempt."""

    def __init__(self, config: McpServerConfig, size: int = 2):
        self.config = config
        self.size = max(1, size)
        self._loop = _LoopThread()
        self.fork: ForkServerHandle | None = None
        if config.start_mode() == "fork":
            self.fork = ForkServerHandle(
                config.command, config.args, config.env, config.cwd, start_timeout_s=config.start_timeout_s
            )
        self._idle: collections.deque[McpSession] = collections.deque()
        self._closing: set[concurrent.futures.Future] = set()
        self._lock = threading.Lock()
        self._closed = False
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

    def _closed_one(self, future: concurrent.futures.Future) -> None:
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


def _text_of(result: Any) -> str:
    parts = [getattr(block, "text", "") for block in getattr(result, "content", []) or []]
    return "".join(p for p in parts if p)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text


def search_status(domain: DomainSpec, config: dict[str, Any]) -> dict[str, Any] | None:
    """Whether the agent's knowledge-base search can work for this attempt; drops ``sources`` when it cannot.

    The scenario's policy ``sources`` are indexed into a Typesense server at ``__reserved__init``;
    without a search service that init fails (connection refused). So without one (no
    ``domain.mcp["search"]``) the sources are left out of the init config and the attempt says so
    (None: the scenario has no sources, nothing to say).
    """
    search = (domain.mcp or {}).get("search")
    sources = config.get("sources")
    if search and search.get("url"):
        found = {"available": True, "url": str(search["url"]), "api_key_env": search.get("api_key_env", "")}
        if search.get("scope"):
            found["scope"] = search["scope"]
        return found
    if not sources:
        return None
    config.pop("sources", None)
    return {
        "available": False,
        "reason": "no search service (Typesense) is configured for this suite",
        "sources_left_out": len(sources) if isinstance(sources, list) else 1,
    }


@dataclass
class McpBackend:
    """The Backend protocol for one attempt on one ThinkingBox-style server session.

    ``attribute_writes`` decides how diff items learn which tool call wrote them:
    ``on_failure`` (default) replays the attempt's calls on a fresh server, fetching the state
    after each state-changing one, only when the end state differs from the golden one (a passing
    attempt has no diff items to attribute, and each state fetch makes the server replay the
    golden trajectory, tens of ms); ``per_call`` fetches the state after every state-changing
    call during the attempt; ``off`` never attributes. (``True``/``False`` mean per_call/off.)
    """

    session: McpSession
    domain: DomainSpec
    task: TaskSpec
    attribute_writes: bool | str = "on_failure"  # a str after __post_init__
    pool: McpServerPool | None = None
    # What the server leaves out of its hash; None: read from the server's own declarations.
    declarations: ServerDeclarations | None = None
    # The effects answer carries S0 too: the runner reads it after the dialogue (one fetch fewer).
    initial_snapshot_deferred: bool = field(default=True, init=False)
    _resolved: ServerDeclarations | None = field(default=None, init=False)
    _schemas: list[ToolSchema] = field(default_factory=list, init=False)
    _writes: dict[tuple[str, str, str | None], list[int]] = field(default_factory=dict, init=False)
    _last_state: dict[str, list[dict[str, Any]]] | None = field(default=None, init=False)
    _effects: dict[str, Any] | None = field(default=None, init=False)
    _specs: dict[str, TableSpec] | None = field(default=None, init=False)
    _config: dict[str, Any] = field(default_factory=dict, init=False)
    _calls: list[ToolCall] = field(default_factory=list, init=False)
    _attributed: bool = field(default=False, init=False)
    _attribution: str = field(default="", init=False)
    _search: dict[str, Any] | None = field(default=None, init=False)
    _timings: dict[str, float] = field(default_factory=dict, init=False)
    _closed: bool = field(default=False, init=False)
    _snapshots: dict[str, Snapshot] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.attribute_writes is True or self.attribute_writes is False:
            self.attribute_writes = "per_call" if self.attribute_writes else "off"
        if self.attribute_writes not in ATTRIBUTION_MODES:
            raise ValueError(f"attribute_writes: expected one of {', '.join(ATTRIBUTION_MODES)}")
        try:
            self._config = init_config(self.domain, self.task)
            self._search = search_status(self.domain, self._config)
            if self.session.config.teardown == "search" and self._config.get("sources"):
                self.session.wants_teardown = True
            started = time.perf_counter()
            self._init(self.session)
            listed = time.perf_counter()
            self._timings["init"] = (listed - started) * 1000.0
            tools = self.pool.list_tools(self.session) if self.pool is not None else self.session.list_tools()
            self._timings["list_tools"] = (time.perf_counter() - listed) * 1000.0
            allowed = set(self.domain.tools)
            for tool in tools:
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
            self.close()
            raise

    def _init(self, session: McpSession) -> None:
        answer = _json_or_text(_text_of(session.call(f"{RESERVED_PREFIX}init", {"config": self._config})))
        if isinstance(answer, dict) and answer.get("status") == "error":
            raise InfraError(
                f"__reserved__init failed for {self.task.id}: {answer.get('message', '')}",
                evidence=_merged(
                    {"backend": {"init_traceback": str(answer.get("traceback") or "")[-4000:]}},
                    session.evidence(stderr=True),
                ),
            )

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

    @property
    def server(self) -> str:
        """The scenario's server (its world_state key), which need not be the domain name."""
        return (self.domain.mcp or {}).get("server") or self.domain.name

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
        self._snapshots.clear()
        _fill_result(call, result)
        self._calls.append(call)
        if self.attribute_writes == "per_call" and not schema.read_only:
            self._effects = self._geteffects(self.session)
            self._record_writes(index, call, self._effects)
        return call

    def _geteffects(self, session: McpSession) -> dict[str, Any]:
        answer = _json_or_text(_text_of(session.call(f"{RESERVED_PREFIX}geteffects", {})))
        if not isinstance(answer, dict):
            raise InfraError(
                f"__reserved__geteffects returned no mapping for {self.task.id}", evidence=session.evidence()
            )
        if answer.get("status") == "error" and "result_db_state" not in answer:
            raise InfraError(
                f"__reserved__geteffects failed for {self.task.id}: {answer.get('message', '')}",
                evidence=session.evidence(stderr=True),
            )
        return answer

    def _record_writes(self, index: int, call: ToolCall, answer: dict[str, Any]) -> None:
        states = effects_states(self.server, answer, self._declarations())
        before = self._last_state if self._last_state is not None else states.initial
        written = state_writes(before, states.result, self.table_specs())
        for place in written:
            self._writes.setdefault(place, []).append(index)
        call.changed_state = bool(written)
        self._last_state = states.result

    def effects(self) -> dict[str, Any]:
        """The final ``__reserved__geteffects`` answer (fetched once, when first needed)."""
        if self._effects is None:
            self._effects = self._geteffects(self.session)
        return self._effects

    def comparison(self) -> EffectsComparison:
        """Our diff beside the server's hash verdict for this attempt."""
        return compare_effects(self.server, self.effects(), self._declarations())

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
            states = effects_states(self.server, answer, declarations)
            self._specs = infer_table_specs(self.server, [states.initial, states.golden], declarations)
        return self._specs

    def _snapshot(self, key: str) -> Snapshot:
        if key in self._snapshots:
            return self._snapshots[key]
        specs = self.table_specs()
        state = self.effects()[key]
        new_tables = {name: rows for name, rows in state.items() if name not in specs}
        if new_tables:  # a table that only appeared later: add its spec, leave the others untouched
            declarations = resolve_declarations(self.effects(), self._declarations())
            specs.update(infer_table_specs(self.server, [new_tables], declarations))
        snapshot = self._snapshots[key] = snapshot_of(
            {name: list(rows or []) for name, rows in state.items()}, specs
        )
        return snapshot

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
        if self.attribute_writes == "on_failure" and not self._attributed:
            self._attributed = True
            self._attribute_by_replay()
        return {place: tuple(indexes) for place, indexes in self._writes.items()}

    def _ends_like_golden(self) -> bool:
        answer = self.effects()
        if answer.get("result_db_hash") != answer.get("golden_db_hash"):
            return False
        return not diff_states(self.initial_snapshot(), self.result_snapshot(), self.golden_snapshot(), {})

    def _attribute_by_replay(self) -> None:
        """Replay this attempt's calls on a fresh server, reading the state after each state-changing one.

        Only for an attempt that did not end in the golden state. The servers are deterministic
        (sequential ids, a fixed clock), so the replay must end in the attempt's own end state;
        if it does not, no call is credited ("replay diverged") rather than a wrong one.
        """
        if self.pool is None or not any(not c.read_only for c in self._calls) or self._ends_like_golden():
            self._attribution = "not needed"
            return
        started = time.perf_counter()
        session = self.pool.acquire()
        session.wants_teardown = self.session.wants_teardown
        try:
            self._init(session)
            for call in self._calls:
                if call.error is not None and call.result is None:
                    continue
                session.call(call.name, dict(call.arguments))
                if not call.read_only:
                    self._record_writes(call.index, call, self._geteffects(session))
            replayed = self._geteffects(session)
            if replayed.get("result_db_hash") != self.effects().get("result_db_hash"):
                self._writes.clear()
                for call in self._calls:
                    call.changed_state = False
                self._attribution = "replay diverged: no call credited"
            else:
                self._attribution = "replayed"
        except InfraError as exc:
            self._writes.clear()
            self._attribution = f"replay failed: {exc}"
        finally:
            self.pool.release(session)
            self._timings["attribution_replay"] = (time.perf_counter() - started) * 1000.0

    def result_extra(self) -> dict[str, Any]:
        """Our state verdict beside the server's hash verdict, and how the backend ran (the runner's optional method)."""
        comparison = self.comparison()
        backend = self.session.evidence()["backend"]
        backend.update(
            timings_ms={
                name: round(ms, 2) for name, ms in {**self.session.timings_ms, **self._timings}.items()
            },
            attribution=f"{self.attribute_writes}" + (f" ({self._attribution})" if self._attribution else ""),
        )
        if self._search is not None:
            backend["knowledge_base_search"] = self._search
        return {
            "thinkingbox": {
                "server": self.server,
                "effects": {self.server: comparison.evidence()},
                "disagree": not comparison.agree,
                # SPEC §2: for ThinkingBox suites the server's hash decides the state part.
                "verdict_of_record": "server hash" if self.state_verdict_of_record() is not None else "ours",
            },
            "backend": backend,
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        started = time.perf_counter()
        if self.pool is not None:
            self.pool.release(self.session)
        else:
            self.session.close()
        self._timings["close"] = (time.perf_counter() - started) * 1000.0


def _fill_result(call: ToolCall, result: Any) -> None:
    text = _text_of(result)
    call.result = _json_or_text(text)
    if getattr(result, "is_error", False):
        call.error = text or "tool error"
    elif isinstance(call.result, dict) and call.result.get("error"):
        call.error = str(call.result["error"])


# --- Process-wide warm pools, one per launch config (what the campaign worker uses) ---------

DEFAULT_POOL_SIZE = 2
_pools: dict[str, McpServerPool] = {}
_pools_lock = threading.Lock()


def launch_config(domain: DomainSpec) -> McpServerConfig:
    """The McpServerConfig stored in ``domain.mcp["launch"]`` (command/args/env/cwd or url, start, list_tools).

    A search service in ``domain.mcp["search"]`` (``{"url", "api_key_env"}``) reaches the server
    the way the ThinkingBox servers read it: the key, read here from the environment variable
    the setting names, as ``TYPESENSE_API_KEY``; the URL as ``TYPESENSE_URL`` (and its parts as
    ``TYPESENSE_HOST``/``_PORT``/``_PROTOCOL``) for servers that read those.
    """
    mcp = domain.mcp or {}
    launch = mcp.get("launch")
    if not isinstance(launch, dict) or not (launch.get("command") or launch.get("url")):
        raise InfraError(
            f"domain {domain.name!r} has no MCP launch config (mcp.launch with a command or a url); "
            "re-import it with --servers servers.yaml, --mcp-command or --mcp-url"
        )
    env = {str(k): str(v) for k, v in (launch.get("env") or {}).items()}
    env.update(_search_env(domain.name, mcp.get("search")))
    return McpServerConfig(
        command=str(launch.get("command") or ""),
        args=tuple(str(a) for a in launch.get("args") or ()),
        env=env or None,
        cwd=launch.get("cwd") or None,
        url=str(launch.get("url") or ""),
        start=str(launch.get("start") or ""),
        list_tools=str(launch.get("list_tools") or "once"),
        teardown=str(launch.get("teardown") or "search"),
    )


def _search_env(domain: str, search: Any) -> dict[str, str]:
    if not isinstance(search, dict) or not search.get("url"):
        return {}
    if search.get("error"):
        raise InfraError(f"domain {domain!r}: {search['error']}")
    from urllib.parse import urlsplit

    url = str(search["url"])
    parts = urlsplit(url)
    env = {
        "TYPESENSE_URL": url,
        "TYPESENSE_HOST": parts.hostname or "",
        "TYPESENSE_PORT": str(parts.port or (443 if parts.scheme == "https" else 8108)),
        "TYPESENSE_PROTOCOL": parts.scheme or "http",
    }
    key_env = str(search.get("api_key_env") or "")
    if key_env:
        if key_env not in os.environ:
            raise InfraError(
                f"domain {domain!r}: the search service's key variable {key_env} is not set on this worker"
            )
        env["TYPESENSE_API_KEY"] = os.environ[key_env]
    return env


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
        return pool


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
