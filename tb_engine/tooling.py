"""Helpers that domain tools (``tools.py``) use: errors, generated ids, the sandbox clock, JSON columns."""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

# The sandbox clock is fixed so every run of a task writes the same timestamps.
SANDBOX_NOW = "2025-01-15T12:00:00Z"
META_TABLE = "_tb_meta"


class ToolError(Exception):
    """Raised by a tool for a business-level failure; it becomes the tool result's error, never a crash."""


def now(db: sqlite3.Connection) -> str:
    """The sandbox's fixed clock as an ISO-8601 string."""
    row = db.execute(f"SELECT value FROM {META_TABLE} WHERE name = 'now'").fetchone()
    return row[0] if row is not None else SANDBOX_NOW


_TRAILING_NUMBER = re.compile(r"(\d+)$")


def next_id(db: sqlite3.Connection, table: str, prefix: str, *, start: int = 1001) -> str:
    """The next free id ``<prefix><n>`` in ``table.id``: one more than the largest number already used."""
    highest = start - 1
    for (existing,) in db.execute(f'SELECT id FROM "{table}" WHERE id LIKE ?', (prefix + "%",)):
        match = _TRAILING_NUMBER.search(str(existing)[len(prefix) :])
        if match and str(existing)[len(prefix) :] == match.group(1):
            highest = max(highest, int(match.group(1)))
    return f"{prefix}{highest + 1}"


def load_json(value: Any) -> Any:
    """Parse a json column value (stored as text); None stays None."""
    if value is None or not isinstance(value, (str, bytes)):
        return value
    return json.loads(value)


def dump_json(value: Any) -> str:
    """Serialise a value for a json column (stable key order so stored text is deterministic)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def row_or_error(db: sqlite3.Connection, sql: str, params: tuple, what: str) -> dict[str, Any]:
    """Fetch one row as a dict or raise ToolError('<what> not found')."""
    row = db.execute(sql, params).fetchone()
    if row is None:
        raise ToolError(f"{what} not found")
    return dict(row)


def row_by_id(db: sqlite3.Connection, table: str, key_value: Any, label: str) -> dict[str, Any]:
    """The row of ``table`` whose ``id`` is ``key_value``, or ToolError('<label> <key> not found')."""
    return row_or_error(db, f"SELECT * FROM {table} WHERE id = ?", (key_value,), f"{label} {key_value}")
