"""A small MCP tool server following the ThinkingBox sandbox convention, for tests (stdio).

Run: ``python3 -m tests.support.tb_mcp_server``. Reserved tools: ``__reserved__init`` (config with
data_patch / golden_test_case / rubrics_yesno), ``__reserved__geteffects`` (initial, result and
golden states, hashes without unstable fields, positional diff) and ``__reserved__teardown``.
Tables: ``customers`` and ``tickets``; ``tickets.subject`` is free text the hash ignores and
``updated_at``/``created_at`` come from a clock that advances 5 s per write. Tool failures come
back as text ``{"error": "Tool execution failed: …", "tool": …}``, as in ThinkingBox. The hash follows
the real servers' algorithm (unstable fields dropped, rows sorted by id, compact sorted JSON).
The geteffects answer declares the unstable fields under ``unstable`` (as tb_engine.mcp_server
does) unless ``TB_TEST_SERVER_DECLARE=0``: then, like the real servers, it says nothing about them.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

SERVER_NAME = os.environ.get("TB_TEST_SERVER_NAME", "tb_test_shop")
DECLARE = os.environ.get("TB_TEST_SERVER_DECLARE", "1") != "0"
UNSTABLE = {"tickets": {"subject", "created_at", "updated_at"}}
CLOCK_START = datetime(2025, 10, 1, 13, 0, 0, tzinfo=UTC)
SEED: dict[str, list[dict[str, Any]]] = {
    "customers": [{"id": "C-1", "name": "Alex Kim", "tier": "standard"}],
    "tickets": [
        {
            "id": "1",
            "customer_id": "C-1",
            "subject": "Old question",
            "status": "solved",
            "created_at": "2025-09-01T10:00:00Z",
            "updated_at": "2025-09-01T10:00:00Z",
        },
    ],
}


class World:
    """One in-memory database with its own write clock."""

    def __init__(self, data: dict[str, list[dict[str, Any]]]):
        self.data = copy.deepcopy(data)
        self.writes = 0

    def now(self) -> str:
        self.writes += 1
        return (CLOCK_START + timedelta(seconds=5 * self.writes)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def find(self, table: str, row_id: str) -> dict[str, Any]:
        for row in self.data[table]:
            if row["id"] == row_id:
                return row
        raise LookupError(f"{table} {row_id} not found")

    def create_ticket(self, customer_id: str, subject: str) -> dict[str, Any]:
        self.find("customers", customer_id)
        stamp = self.now()
        next_id = str(max((int(r["id"]) for r in self.data["tickets"]), default=0) + 1)
        row = {
            "id": next_id,
            "customer_id": customer_id,
            "subject": subject,
            "status": "open",
            "created_at": stamp,
            "updated_at": stamp,
        }
        self.data["tickets"].append(row)
        return row

    def update_ticket(self, ticket_id: str, status: str) -> dict[str, Any]:
        row = self.find("tickets", ticket_id)
        row["status"] = status
        row["updated_at"] = self.now()
        return row

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        handlers = {
            "create_ticket": self.create_ticket,
            "update_ticket": self.update_ticket,
            "get_ticket": lambda ticket_id: self.find("tickets", ticket_id),
        }
        return handlers[tool](**arguments)


def _stable(state: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {
        t: sorted(
            ({k: v for k, v in r.items() if k not in UNSTABLE.get(t, set())} for r in rows),
            key=lambda r: str(r.get("id", "")),
        )
        for t, rows in sorted(state.items())
    }


def _hash(state: dict[str, list[dict[str, Any]]]) -> str:
    text = json.dumps(_stable(state), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _positional_diff(result: Any, golden: Any, path: str = "") -> list[dict[str, Any]]:
    if isinstance(result, dict) and isinstance(golden, dict):
        return [
            d
            for k in sorted(set(result) | set(golden))
            for d in _positional_diff(result.get(k), golden.get(k), f"{path}.{k}" if path else k)
        ]
    if isinstance(result, list) and isinstance(golden, list):
        items = (
            [{"path": path, "type": "length mismatch", "result": len(result), "golden": len(golden)}]
            if len(result) != len(golden)
            else []
        )
        for i in range(max(len(result), len(golden))):
            if i >= len(golden):
                items.append({"path": f"{path}[{i}]", "type": "present in result (missing in golden)"})
            elif i >= len(result):
                items.append({"path": f"{path}[{i}]", "type": "missing in result (present in golden)"})
            else:
                items.extend(_positional_diff(result[i], golden[i], f"{path}[{i}]"))
        return items
    return (
        []
        if result == golden
        else [{"path": path, "type": "value mismatch", "result": result, "golden": golden}]
    )


server = MCPServer(SERVER_NAME)
STATE: dict[str, Any] = {"world": None, "initial": None, "golden_calls": [], "rubrics_yesno": []}


def _tool_failure(tool: str, exc: Exception) -> str:
    return json.dumps({"error": f"Tool execution failed: {exc}", "tool": tool})


def search_env() -> dict[str, Any]:
    """What a ThinkingBox server would read of its search service (the key only as set / not set)."""
    return {
        "url": os.environ.get("TYPESENSE_URL"),
        "host": os.environ.get("TYPESENSE_HOST"),
        "port": os.environ.get("TYPESENSE_PORT"),
        "key_set": bool(os.environ.get("TYPESENSE_API_KEY")),
    }


@server.tool(name="__reserved__init")
def reserved_init(config: dict[str, Any]) -> str:
    """Initialize sandbox with optional data patch and golden test case."""
    print(f"tb_test_shop: init with {len(config.get('data_patch') or {})} patched table(s)", file=sys.stderr)
    if config.get("sources") and not os.environ.get("TYPESENSE_URL"):
        # Like the real servers: indexing the sources needs the search service.
        print("tb_test_shop: Typesense connection refused", file=sys.stderr)
        return json.dumps({"status": "error", "message": "Failed to ensure collection: Connection refused"})
    STATE["search"] = search_env() if config.get("sources") else None
    data = copy.deepcopy(SEED)
    for table, rows in (config.get("data_patch") or {}).items():
        if table not in data:
            print(f"tb_test_shop: unknown table {table}", file=sys.stderr)
            return json.dumps({"status": "error", "message": f"unknown table {table}", "traceback": ""})
        by_id = {r["id"]: r for r in data[table]}
        by_id.update({r["id"]: r for r in rows})
        data[table] = list(by_id.values())
    STATE["world"] = World(data)
    STATE["initial"] = copy.deepcopy(data)
    STATE["golden_calls"] = list((config.get("golden_test_case") or {}).get("tool_interactions") or [])
    STATE["rubrics_yesno"] = list(config.get("rubrics_yesno") or [])
    return json.dumps({})


@server.tool(name="__reserved__geteffects")
def reserved_geteffects() -> str:
    """Get effects of the test execution."""
    golden = World(STATE["initial"])
    for step in STATE["golden_calls"]:
        golden.call(step["tool"], step.get("parameters") or {})
    result_state, golden_state = STATE["world"].data, golden.data
    declared = {"unstable": {t: sorted(fields) for t, fields in UNSTABLE.items()}} if DECLARE else {}
    return json.dumps(
        {
            **declared,
            "initial_db_state": STATE["initial"],
            "result_db_state": result_state,
            "result_db_hash": _hash(result_state),
            "golden_db_state": golden_state,
            "golden_db_hash": _hash(golden_state),
            "diff": _positional_diff(_stable(result_state), _stable(golden_state)),
            "rubrics": {},
            "rubrics_yesno": STATE["rubrics_yesno"],
            "search_env": STATE.get("search"),
        }
    )


@server.tool(name="__reserved__teardown")
def reserved_teardown() -> str:
    return json.dumps({})


@server.tool(description="Create a support ticket for a customer.")
def create_ticket(customer_id: str, subject: str) -> str:
    try:
        return json.dumps(STATE["world"].create_ticket(customer_id, subject))
    except LookupError as exc:
        return _tool_failure("create_ticket", exc)


@server.tool(description="Set the status of a ticket (open, pending, hold, solved).")
def update_ticket(ticket_id: str, status: str) -> str:
    try:
        return json.dumps(STATE["world"].update_ticket(ticket_id, status))
    except LookupError as exc:
        return _tool_failure("update_ticket", exc)


@server.tool(description="Look up one ticket by id.", annotations=ToolAnnotations(read_only_hint=True))
def get_ticket(ticket_id: str) -> str:
    try:
        return json.dumps(STATE["world"].find("tickets", ticket_id))
    except LookupError as exc:
        return _tool_failure("get_ticket", exc)


@server.tool(description="Fail hard: the server process exits (for crash tests).")
def crash_server(code: int = 7) -> str:
    print(f"tb_test_shop: crashing on purpose with code {code}", file=sys.stderr, flush=True)
    os._exit(code)


if __name__ == "__main__":
    server.run()
