"""Plain-JSON forms of task and domain specs, for storage outside the engine (database rows, files).

Tool implementations are code, not data: a stored domain names its tools' schemas only. Whoever
rebuilds a runnable domain takes the implementations from the suite's own package (built-in
suites) or from the backend (MCP servers).
"""

from __future__ import annotations

from typing import Any

from tb_engine.spec import CheckSpec, DomainSpec, GoldenCall, TableSpec, TaskSpec, ToolSpec


def task_to_dict(task: TaskSpec) -> dict[str, Any]:
    """The task as JSON-able data (round-trips through task_from_dict)."""
    return {
        "id": task.id,
        "domain": task.domain,
        "title": task.title,
        "query": task.query,
        "user_context": task.user_context,
        "data_patch": task.data_patch,
        "golden": [{"tool": c.tool, "arguments": c.arguments} for c in task.golden],
        "checks": [
            {"kind": c.kind, "params": c.params, "description": c.description, "forbidden": c.forbidden}
            for c in task.checks
        ],
        "rubrics": list(task.rubrics),
        "tags": list(task.tags),
        "source": task.source,
        "extra": task.extra,
    }


def task_from_dict(data: dict[str, Any]) -> TaskSpec:
    """Rebuild a TaskSpec stored with task_to_dict."""
    return TaskSpec(
        id=data["id"],
        domain=data["domain"],
        title=data.get("title", ""),
        query=data["query"],
        user_context=data.get("user_context", ""),
        data_patch=data.get("data_patch") or {},
        golden=tuple(GoldenCall(c["tool"], c.get("arguments") or {}) for c in data.get("golden", [])),
        checks=tuple(
            CheckSpec(c["kind"], c.get("params") or {}, c.get("description", ""), bool(c.get("forbidden")))
            for c in data.get("checks", [])
        ),
        rubrics=tuple(data.get("rubrics", [])),
        tags=tuple(data.get("tags", [])),
        source=data.get("source", ""),
        extra=data.get("extra") or {},
    )


def domain_to_dict(domain: DomainSpec) -> dict[str, Any]:
    """The domain without tool implementations and base data (which stay in the suite's files)."""
    return {
        "name": domain.name,
        "title": domain.title,
        "policy": domain.policy,
        "backend": domain.backend,
        "mcp": domain.mcp,
        "source": domain.source,
        "tables": {
            name: {
                "columns": dict(t.columns),
                "primary_key": list(t.primary_key),
                "unstable": sorted(t.unstable),
                "generated_key": t.generated_key,
            }
            for name, t in domain.tables.items()
        },
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "read_only": t.read_only,
            }
            for t in domain.tools.values()
        ],
    }


def domain_from_dict(
    data: dict[str, Any], base_data: dict[str, list[dict[str, Any]]] | None = None
) -> DomainSpec:
    """Rebuild a DomainSpec stored with domain_to_dict (tools carry no implementation)."""
    tables = {
        name: TableSpec(
            name=name,
            columns=dict(t["columns"]),
            primary_key=tuple(t["primary_key"]),
            unstable=frozenset(t.get("unstable", ())),
            generated_key=bool(t.get("generated_key")),
        )
        for name, t in (data.get("tables") or {}).items()
    }
    tools = {
        t["name"]: ToolSpec(
            t["name"], t.get("description", ""), t.get("parameters") or {}, bool(t.get("read_only"))
        )
        for t in data.get("tools", [])
    }
    return DomainSpec(
        name=data["name"],
        title=data.get("title", data["name"]),
        policy=data.get("policy", ""),
        tables=tables,
        tools=tools,
        base_data=base_data or {},
        backend=data.get("backend", "sqlite"),
        mcp=data.get("mcp"),
        source=data.get("source", ""),
    )
