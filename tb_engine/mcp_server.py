"""Our built-in sandboxes served as an MCP tool server, with ThinkingBox's reserved-tool convention.

Any agent framework that speaks MCP can be evaluated against our domains:

* ``__reserved__init`` ``{"config": {...}}`` starts a fresh SQLite sandbox. The config selects a
  built-in task (``{"task_id": "retail/..."}``) or describes one (``data_patch`` plus optional
  ``golden_test_case.tool_interactions`` and ``rubrics_yesno``, as a ThinkingBox test does).
* Every domain tool is forwarded to that sandbox; failures come back as the text
  ``{"error": "Tool execution failed: …", "tool": …}`` (ThinkingBox's shape), never as a crash.
* ``__reserved__geteffects`` answers with the initial / result / golden states, their hashes
  over stable fields, our classified diff (SPEC §3) and a ThinkingBox-style positional diff.
* ``__reserved__teardown`` drops the sandbox.

State is kept per MCP session (the ``Mcp-Session-Id`` of a streamable-HTTP client, or the one
stdio client), so one HTTP server serves many attempts at once; stateless HTTP requests share one.
Run: ``python -m tb_engine.mcp_server --domain retail [--http --port P]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from tb_engine.diff import diff_states
from tb_engine.golden import replay_golden
from tb_engine.loader import load_builtin_suite
from tb_engine.sandbox import Sandbox, domain_runtime
from tb_engine.snapshot import Snapshot, stable_columns
from tb_engine.spec import DomainSpec, GoldenCall, SuiteSpec, TaskSpec

if TYPE_CHECKING:  # mcp is imported where a server is built: the engine runs without it
    import mcp.types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

RESERVED_INIT = "__reserved__init"
RESERVED_GETEFFECTS = "__reserved__geteffects"
RESERVED_TEARDOWN = "__reserved__teardown"


class InitError(ValueError):
    """An ``__reserved__init`` config that cannot start a sandbox (answered as status error)."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def stable_state(snapshot: Snapshot) -> dict[str, list[dict[str, Any]]]:
    """Each table's rows without unstable fields (and generated keys), sorted by content."""
    state = {}
    for name, table in snapshot.tables.items():
        columns = stable_columns(table.spec)
        rows = [{c: row[c] for c in columns} for row in table.rows.values()]
        state[name] = sorted(rows, key=_canonical)
    return state


def state_hash(snapshot: Snapshot) -> str:
    """SHA-256 over the stable state: equal hashes mean the diff has nothing to report."""
    return hashlib.sha256(_canonical(stable_state(snapshot)).encode()).hexdigest()


def positional_diff(result: Any, golden: Any, path: str = "") -> list[dict[str, Any]]:
    """ThinkingBox-style diff: lists compared index by index (one inserted row shifts the rest)."""
    if isinstance(result, dict) and isinstance(golden, dict):
        items: list[dict[str, Any]] = []
        for key in sorted(set(result) | set(golden)):
            items.extend(
                positional_diff(result.get(key), golden.get(key), f"{path}.{key}" if path else str(key))
            )
        return items
    if isinstance(result, list) and isinstance(golden, list):
        items = []
        if len(result) != len(golden):
            items.append(
                {"path": path, "type": "length mismatch", "result": len(result), "golden": len(golden)}
            )
        for index in range(min(len(result), len(golden))):
            items.extend(positional_diff(result[index], golden[index], f"{path}[{index}]"))
        items.extend(
            {"path": f"{path}[{i}]", "type": "present in result (missing in golden)"}
            for i in range(len(golden), len(result))
        )
        items.extend(
            {"path": f"{path}[{i}]", "type": "missing in result (present in golden)"}
            for i in range(len(result), len(golden))
        )
        return items
    return (
        []
        if result == golden
        else [{"path": path, "type": "value mismatch", "result": result, "golden": golden}]
    )


@dataclass
class ServedAttempt:
    """One initialised sandbox: the task it holds, the sandbox and how many calls it has seen."""

    domain: DomainSpec
    task: TaskSpec
    sandbox: Sandbox
    calls: int = 0


@dataclass
class DomainServer:
    """The tool logic for one built-in domain, independent of the MCP transport."""

    domain: DomainSpec
    tasks: dict[str, TaskSpec]
    _attempts: dict[str, ServedAttempt] = field(default_factory=dict)

    @classmethod
    def builtin(cls, domain_name: str, suite: SuiteSpec | None = None) -> DomainServer:
        """A server for one domain of the built-in starter suite (ValueError naming the choices)."""
        if suite is None:
            suite = load_builtin_suite("starter")
        if domain_name not in suite.domains:
            raise ValueError(
                f"unknown domain {domain_name!r}; choose one of {', '.join(sorted(suite.domains))}"
            )
        tasks = {t.id: t for t in suite.tasks.values() if t.domain == domain_name}
        return cls(domain=suite.domains[domain_name], tasks=tasks)

    def task_from_config(self, config: Any) -> TaskSpec:
        """The task an init config selects or describes (InitError naming the bad field)."""
        if not isinstance(config, dict):
            raise InitError(f"config must be an object, got {type(config).__name__}")
        task_id = config.get("task_id")
        if task_id is not None:
            if task_id not in self.tasks:
                raise InitError(f"config.task_id: unknown task {task_id!r} in domain {self.domain.name!r}")
            return self.tasks[task_id]
        patch = config.get("data_patch") or {}
        if not isinstance(patch, dict) or not all(isinstance(rows, list) for rows in patch.values()):
            raise InitError("config.data_patch must map table names to lists of rows")
        unknown = sorted(set(patch) - set(self.domain.tables))
        if unknown:
            raise InitError(f"config.data_patch: unknown table(s) {', '.join(unknown)}")
        steps = ((config.get("golden_test_case") or {}).get("tool_interactions")) or []
        golden = []
        for position, step in enumerate(steps):
            if not isinstance(step, dict) or step.get("tool") not in self.domain.tools:
                raise InitError(
                    f"config.golden_test_case.tool_interactions[{position}]: unknown tool {step!r}"
                )
            golden.append(GoldenCall(step["tool"], dict(step.get("parameters") or {})))
        rubrics = tuple(str(r) for r in config.get("rubrics_yesno") or ())
        return TaskSpec(
            id=str(config.get("id") or f"{self.domain.name}/adhoc"),
            domain=self.domain.name,
            query="",
            user_context="",
            data_patch=patch,
            golden=tuple(golden),
            rubrics=rubrics,
        )

    def init(self, session: str, config: Any) -> dict[str, Any]:
        """Start a fresh sandbox for ``session``; an unusable config is answered with status error."""
        try:
            task = self.task_from_config(config)
            sandbox = domain_runtime(self.domain).task_template(task).new_sandbox()
        except InitError as exc:
            return {"status": "error", "message": str(exc)}
        except (KeyError, ValueError, TypeError) as exc:  # rows that do not fit the tables
            return {"status": "error", "message": f"config.data_patch: {type(exc).__name__}: {exc}"}
        self.teardown(session)
        self._attempts[session] = ServedAttempt(self.domain, task, sandbox)
        return {"status": "ok", "task_id": task.id}

    def _attempt(self, session: str) -> ServedAttempt:
        attempt = self._attempts.get(session)
        if attempt is None:
            raise InitError(f"call {RESERVED_INIT} first")
        return attempt

    def call(self, session: str, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Forward one tool call; returns (text, is_error) with ThinkingBox's error shape."""
        try:
            attempt = self._attempt(session)
        except InitError as exc:
            return json.dumps({"error": f"Tool execution failed: {exc}", "tool": tool}), True
        outcome = attempt.sandbox.call_tool(tool, arguments, index=attempt.calls)
        attempt.calls += 1
        if outcome.error is not None:
            return json.dumps({"error": f"Tool execution failed: {outcome.error}", "tool": tool}), False
        return json.dumps(outcome.result, default=str), False

    def geteffects(self, session: str) -> dict[str, Any]:
        """Initial, result and golden states with hashes, our classified diff and the positional diff."""
        try:
            attempt = self._attempt(session)
        except InitError as exc:
            return {"status": "error", "message": str(exc)}
        initial = attempt.sandbox.initial
        result = attempt.sandbox.snapshot()
        replay = replay_golden(self.domain, attempt.task)
        golden = replay.snapshot
        classified = diff_states(initial, result, golden, attempt.sandbox.writes())
        result_stable, golden_stable = stable_state(result), stable_state(golden)
        return {
            "initial_db_state": initial.to_rows(),
            "result_db_state": result.to_rows(),
            "golden_db_state": golden.to_rows(),
            "result_db_hash": state_hash(result),
            "golden_db_hash": state_hash(golden),
            "diff": positional_diff(result_stable, golden_stable),
            "classified_diff": [item.to_dict() for item in classified],
            "golden_errors": list(replay.errors),
            "unstable": {name: sorted(t.unstable) for name, t in self.domain.tables.items() if t.unstable},
            "rubrics_yesno": list(attempt.task.rubrics),
        }

    def teardown(self, session: str) -> dict[str, Any]:
        """Drop the session's sandbox (a no-op when there is none)."""
        attempt = self._attempts.pop(session, None)
        if attempt is not None:
            attempt.sandbox.close()
        return {"status": "ok"}


def session_key(ctx: Any) -> str:
    """Whose sandbox a request uses: the streamable-HTTP session id, or the one stdio client."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    return f"http:{session_id}" if session_id else "stdio"


def build_server(domain_server: DomainServer) -> Server[Any]:
    """The low-level MCP server exposing the domain tools (with their JSON schemas) and reserved tools."""
    domain = domain_server.domain
    reserved = [
        types.Tool(
            name=RESERVED_INIT,
            description="Start a fresh sandbox: config selects task_id or gives data_patch.",
            input_schema={
                "type": "object",
                "properties": {"config": {"type": "object"}},
                "required": ["config"],
            },
        ),
        types.Tool(
            name=RESERVED_GETEFFECTS,
            description="Initial, result and golden states, hashes and diffs.",
            input_schema={"type": "object", "properties": {}},
        ),
        types.Tool(
            name=RESERVED_TEARDOWN,
            description="Drop this session's sandbox.",
            input_schema={"type": "object", "properties": {}},
        ),
    ]
    listed = reserved + [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.parameters,
            annotations=types.ToolAnnotations(read_only_hint=tool.read_only),
        )
        for tool in domain.tools.values()
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        session = session_key(ctx)
        if params.name == RESERVED_INIT:
            text, is_error = json.dumps(domain_server.init(session, arguments.get("config"))), False
        elif params.name == RESERVED_GETEFFECTS:
            text, is_error = json.dumps(domain_server.geteffects(session), default=str), False
        elif params.name == RESERVED_TEARDOWN:
            text, is_error = json.dumps(domain_server.teardown(session)), False
        elif params.name in domain.tools:
            text, is_error = domain_server.call(session, params.name, arguments)
        else:
            text, is_error = json.dumps({"error": f"unknown tool {params.name!r}", "tool": params.name}), True
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)

    return Server(f"tb_{domain.name}", on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> None:
    """Command line: serve one built-in domain over stdio (default) or streamable HTTP."""
    parser = argparse.ArgumentParser(
        prog="python -m tb_engine.mcp_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--domain", required=True, help="built-in domain, e.g. retail")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    try:
        server = build_server(DomainServer.builtin(args.domain))
    except ValueError as exc:
        parser.error(str(exc))
    if args.http:
        import uvicorn  # noqa: PLC0415 — only with --http: a stdio server never loads the web server

        app = server.streamable_http_app(host=args.host)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    else:
        anyio.run(_serve_stdio, server)


if __name__ == "__main__":
    main()
