"""The Backend protocol the runner talks to, and the SQLite implementation for our own domains."""

from __future__ import annotations

import sqlite3
import time
from typing import Protocol

from tb_engine.golden import golden_snapshot
from tb_engine.interfaces import InfraError, ToolSchema
from tb_engine.sandbox import Sandbox, domain_runtime
from tb_engine.snapshot import Snapshot
from tb_engine.spec import DomainSpec, TableSpec, TaskSpec
from tb_engine.transcript import ToolCall, ToolCallRequest

WriteMap = dict[tuple[str, str, "str | None"], tuple[int, ...]]


class Backend(Protocol):
    """A stateful backend for one attempt (see docs/architecture.md)."""

    def tool_schemas(self) -> list[ToolSchema]: ...

    def call_tool(self, request: ToolCallRequest, *, index: int, turn: int) -> ToolCall: ...

    def initial_snapshot(self) -> Snapshot: ...

    def result_snapshot(self) -> Snapshot: ...

    def golden_snapshot(self) -> Snapshot: ...

    def writes(self) -> WriteMap: ...

    def table_specs(self) -> dict[str, TableSpec]: ...

    def close(self) -> None: ...


class SqliteBackend:
    """A fresh SQLite sandbox for one attempt of a task of one of our own domains."""

    def __init__(self, domain: DomainSpec, task: TaskSpec):
        if task.domain != domain.name:
            raise ValueError(f"task {task.id}: belongs to domain {task.domain!r}, not {domain.name!r}")
        self.domain = domain
        self.task = task
        self._runtime = domain_runtime(domain)
        self._template = self._runtime.task_template(task)
        self._sandbox: Sandbox = self._template.new_sandbox()
        self._started = time.perf_counter()

    def tool_schemas(self) -> list[ToolSchema]:
        return list(self._runtime.schemas)

    def system_prompt(self) -> str:
        """The domain policy (optional Backend method; the runner falls back to task.extra["policy"])."""
        return self.domain.policy

    def call_tool(self, request: ToolCallRequest, *, index: int, turn: int) -> ToolCall:
        """Run one call; tool and argument errors become ToolCall.error, a broken database is InfraError."""
        tool = self._runtime.tools.get(request.name)
        started = time.perf_counter()
        try:
            outcome = self._sandbox.call_tool(request.name, request.arguments, index=index)
        except sqlite3.Error as exc:
            raise InfraError(f"sandbox failed during call #{index} ({request.name}): {exc}") from exc
        finished = time.perf_counter()
        return ToolCall(
            index=index,
            id=request.id,
            name=request.name,
            arguments=request.arguments,
            result=outcome.result,
            error=outcome.error,
            read_only=bool(tool and tool.read_only),
            changed_state=outcome.changed_state,
            turn=turn,
            started_ms=(started - self._started) * 1000.0,
            duration_ms=(finished - started) * 1000.0,
        )

    def initial_snapshot(self) -> Snapshot:
        return self._template.initial

    def result_snapshot(self) -> Snapshot:
        try:
            return self._sandbox.snapshot()
        except sqlite3.Error as exc:
            raise InfraError(f"sandbox failed while reading the result state: {exc}") from exc

    def golden_snapshot(self) -> Snapshot:
        return golden_snapshot(self.domain, self.task)

    def writes(self) -> WriteMap:
        return self._sandbox.writes()

    def value_log(self) -> list[tuple[int, str, str, str | None, str, object, object]]:
        """Optional Backend method: every write in order with old/new values (tb_engine.process)."""
        return self._sandbox.value_log()

    def table_specs(self) -> dict[str, TableSpec]:
        return dict(self.domain.tables)

    def close(self) -> None:
        self._sandbox.close()
