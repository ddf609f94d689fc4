"""Domain and task specifications (the data model; loading lives in ``tb_engine.loader``).

A *domain* is a backend: tables, tools, policy text and base data. A *task* is a
domain + initial-state patch + user query + private user context + a definition
of done (golden trajectory, explicit checks, yes/no rubrics). See docs/task-format.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

ColumnType = Literal["text", "integer", "real", "boolean", "json"]


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: dict[str, ColumnType]  # insertion order is column order
    primary_key: tuple[str, ...]
    unstable: frozenset[str] = frozenset()  # ignored by the diff (timestamps, free text, ...)
    generated_key: bool = False  # keys made on insert: rows are matched by stable content


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema, type object
    read_only: bool = False
    # Python implementation over the sandbox connection; None for tools served elsewhere (MCP).
    impl: Callable[..., Any] | None = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class DomainSpec:
    name: str  # stable id, e.g. "retail"
    title: str
    policy: str  # the agent's system instructions
    tables: dict[str, TableSpec]
    tools: dict[str, ToolSpec]
    base_data: dict[str, list[dict[str, Any]]]  # table -> rows
    backend: Literal["sqlite", "mcp"] = "sqlite"
    mcp: dict[str, Any] | None = None  # MCP server launch config when backend == "mcp"
    source: str = ""  # file the domain was loaded from


@dataclass(frozen=True)
class GoldenCall:
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class CheckSpec:
    """An explicit end-state predicate. ``kind`` is one of the documented check kinds."""

    kind: str  # row_equals | row_count | no_new_rows | unchanged | custom_unsupported
    params: dict[str, Any]
    description: str = ""
    forbidden: bool = False  # a forbidden-effect check (reported as such)


@dataclass(frozen=True)
class TaskSpec:
    id: str  # stable, e.g. "retail/ticket_hold_carrier_exception"
    domain: str
    query: str  # the user's first message
    user_context: str  # private to the user simulator
    data_patch: dict[str, list[dict[str, Any]]]  # table -> rows upserted over base data
    golden: tuple[GoldenCall, ...]
    checks: tuple[CheckSpec, ...] = ()
    rubrics: tuple[str, ...] = ()  # yes/no questions over the final reply; all must be "yes"
    tags: tuple[str, ...] = ()
    title: str = ""
    source: str = ""  # file (and test name) the task was loaded from
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def content_hash(self) -> str:
        """SHA-256 over everything that defines the task, so results name the exact version."""
        payload = {
            "id": self.id,
            "domain": self.domain,
            "query": self.query,
            "user_context": self.user_context,
            "data_patch": self.data_patch,
            "golden": [[c.tool, c.arguments] for c in self.golden],
            "checks": [[c.kind, c.params, c.forbidden] for c in self.checks],
            "rubrics": list(self.rubrics),
        }
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    version: str
    domains: dict[str, DomainSpec]
    tasks: dict[str, TaskSpec]
    evaluation_only: bool = False  # licence forbids training on it
    description: str = ""

    def content_hash(self) -> str:
        blob = "\n".join(f"{tid}:{t.content_hash()}" for tid, t in sorted(self.tasks.items()))
        return hashlib.sha256(blob.encode()).hexdigest()
