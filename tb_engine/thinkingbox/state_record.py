"""What a ThinkingBox attempt stores so that SR = S0 + its stored effects is exact (issue 29).

A server's end state comes back as whole tables of raw rows (``result_db_state``). The attempt's
``effects`` (``tb_engine.diff.effects``) are computed over snapshots whose table specs are
inferred from S0 and SG — and SG is exactly what a re-grade changes — with values normalised per
inferred column type, so they cannot rebuild the raw rows the server hashes. The state record
keeps the raw effect instead, per table: SR's rows in order, each either the index of an equal S0
row or the row itself (only changed and new rows are stored; an unchanged table is not stored at
all), plus two digests:

* ``initial_digest``: the S0 the attempt ran against (a re-grade's fresh server must report the
  same S0, or the attempt ran against another task version and is not re-gradable);
* ``result_digest``: SR itself, so the rebuilt SR is checked to be the attempt's, value for value.

Digests are SHA-256 of the state as sorted-key JSON, so a stored record survives a JSON column
that reorders keys (PostgreSQL ``jsonb``); a table whose rows are ``None`` counts as empty, as the
snapshots read it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

RECORD_FORMAT = 1

State = Mapping[str, list[dict[str, Any]] | None]


class StateRecordError(Exception):
    """A stored state record that does not rebuild the attempt's SR (the message says why)."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def state_digest(state: State) -> str:
    """SHA-256 of a raw server state (every column, row order kept, key order ignored)."""
    plain = {table: list(rows or []) for table, rows in state.items()}
    return hashlib.sha256(_canonical(plain).encode("utf-8")).hexdigest()


def state_record(initial: State, result: State) -> dict[str, Any]:
    """The record of SR against S0: changed tables as S0 row indexes or new rows, and both digests."""
    tables: dict[str, list[Any]] = {}
    for name, rows in result.items():
        before = list(initial.get(name) or [])
        after = list(rows or [])
        if name in initial and before == after:  # (1 == 1.0 here: the result digest catches that)
            continue
        index_of: dict[str, int] = {}
        for index, row in enumerate(before):
            index_of.setdefault(_canonical(row), index)
        tables[name] = [
            index_of[text] if text in index_of else {"row": row}
            for row, text in ((row, _canonical(row)) for row in after)
        ]
    return {
        "format": RECORD_FORMAT,
        "initial_digest": state_digest(initial),
        "result_digest": state_digest(result),
        "tables": tables,
        "absent": sorted(name for name in initial if name not in result),
    }


def rebuilt_result(
    initial: State, record: Mapping[str, Any], *, initial_digest: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """SR = S0 + the record's effects, checked against both stored digests; raises StateRecordError.

    ``initial_digest``: ``state_digest(initial)`` when the caller has it (once per task, not per attempt).
    """
    if record.get("format") != RECORD_FORMAT:
        raise StateRecordError(f"state record format {record.get('format')!r} is not {RECORD_FORMAT}")
    if (initial_digest or state_digest(initial)) != record.get("initial_digest"):
        raise StateRecordError(
            "S0 from the server now differs from the S0 the attempt ran against (another task or server version)"
        )
    tables = record.get("tables")
    absent = record.get("absent")
    if not isinstance(tables, Mapping) or not isinstance(absent, list):
        raise StateRecordError("the state record has no tables mapping or absent list")
    result: dict[str, list[dict[str, Any]]] = {}
    for name, rows in initial.items():
        if name not in absent:
            result[name] = list(rows or [])
    for name, items in tables.items():
        before = list(initial.get(name) or [])
        if not isinstance(items, list):
            raise StateRecordError(f"{name}: the stored rows are not a list")
        rows_after = []
        for item in items:
            if isinstance(item, int) and not isinstance(item, bool) and 0 <= item < len(before):
                rows_after.append(before[item])
            elif isinstance(item, Mapping) and isinstance(item.get("row"), Mapping):
                rows_after.append(dict(item["row"]))
            else:
                raise StateRecordError(f"{name}: stored item {item!r} is neither an S0 row index nor a row")
        result[name] = rows_after
    if state_digest(result) != record.get("result_digest"):
        raise StateRecordError("the SR rebuilt from S0 and the stored effects differs from the attempt's SR")
    return result
