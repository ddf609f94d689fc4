"""Database state snapshots (SPEC §3): normalised, deterministic, cheap to compare.

A snapshot maps table -> row key -> normalised row. Values are normalised once, at
construction, so the diff can compare with plain ``==``: numbers (1 == 1.0), booleans
(stored 0/1), json columns parsed with lists in a canonical order.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tb_engine.spec import TableSpec


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def snapshot_digest(snapshot: Snapshot) -> str:
    """SHA-256 of a snapshot's rows (normalised values, every column, rows in key order): which S0 an
    attempt ran against, so a re-grade can tell when the task's initial state has changed since."""
    return hashlib.sha256(_canonical_json(snapshot.to_rows()).encode("utf-8")).hexdigest()


def _normalise_number(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        # Round away float noise (0.1 + 0.2) so equal amounts compare equal.
        return int(value) if value.is_integer() else round(value, 9)
    if isinstance(value, str):
        try:
            return _normalise_number(float(value)) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            return value
    return value


def _normalise_json(value: Any) -> Any:
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return _canonical_structure(value)


def _canonical_structure(value: Any) -> Any:
    # Lists in json columns are unordered sets of items: sort by canonical text.
    if isinstance(value, list):
        items = [_canonical_structure(item) for item in value]
        return sorted(items, key=_canonical_json)
    if isinstance(value, dict):
        return {key: _canonical_structure(item) for key, item in sorted(value.items())}
    if isinstance(value, float):
        return _normalise_number(value)
    return value


def normalise_value(column_type: str, value: Any) -> Any:
    """Normalise one cell value of the given column type for comparison."""
    if value is None:
        return None
    normaliser = _column_normaliser(column_type)
    return value if normaliser is None else normaliser(value)


def key_function(spec: TableSpec) -> Callable[[Mapping[str, Any]], str]:
    """A function giving the printable row key: ``"20"`` or ``"order_id=ORD-1,line=2"``."""
    if len(spec.primary_key) == 1:
        (column,) = spec.primary_key
        return lambda row: str(row.get(column))
    columns = spec.primary_key
    return lambda row: ",".join(f"{c}={row.get(c)}" for c in columns)


def stable_columns(spec: TableSpec) -> tuple[str, ...]:
    """Columns the diff compares: all but unstable ones (and generated keys, matched by content)."""
    skip = set(spec.unstable)
    if spec.generated_key:
        skip |= set(spec.primary_key)
    return tuple(c for c in spec.columns if c not in skip)


@dataclass(frozen=True)
class TableState:
    """One table of a snapshot: row key -> normalised row, plus each row's stable projection."""

    spec: TableSpec
    rows: Mapping[str, dict[str, Any]]  # ordered by key
    stable: Mapping[str, tuple]  # key -> values of stable_columns(spec)

    def stable_dict(self, key: str) -> dict[str, Any] | None:
        row = self.rows.get(key)
        if row is None:
            return None
        return {c: row[c] for c in stable_columns(self.spec)}


def _normalise_boolean(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def _column_normaliser(column_type: str) -> Callable[[Any], Any] | None:
    """What ``normalise_value`` does to a non-null cell of this type; None: the value is kept as is."""
    if column_type in ("integer", "real"):
        return _normalise_number
    if column_type == "boolean":
        return _normalise_boolean
    if column_type == "json":
        return _normalise_json
    return None


def build_table(spec: TableSpec, rows: Iterable[Mapping[str, Any]], *, source: str = "") -> TableState:
    """Normalise raw rows of one table into a TableState (raises ValueError on a duplicate key).

    Cell by cell as ``normalise_value`` does, without a call per cell of a column kept as is
    (text), nor per integer already an int: building snapshots was half of a ThinkingBox
    attempt's CPU, a call per cell most of it.
    """
    names = list(spec.columns)
    converted = [
        (name, normaliser)
        for name, kind in spec.columns.items()
        if (normaliser := _column_normaliser(kind)) is not None
    ]
    key_of = key_function(spec)
    stable_names = stable_columns(spec)
    by_key: dict[str, dict[str, Any]] = {}
    for raw in rows:
        get = raw.get
        row = {name: get(name) for name in names}  # spec order, as before
        for name, normaliser in converted:
            value = row[name]
            if value is not None and (value.__class__ is not int or normaliser is not _normalise_number):
                row[name] = normaliser(value)
        key = key_of(row)
        if key in by_key:
            raise ValueError(f"{source or 'snapshot'}: table {spec.name}: duplicate row key {key!r}")
        by_key[key] = row
    ordered = {key: by_key[key] for key in sorted(by_key)}
    stable = {key: tuple(row[c] for c in stable_names) for key, row in ordered.items()}
    return TableState(spec=spec, rows=ordered, stable=stable)


@dataclass(frozen=True)
class Snapshot:
    """A whole database state; tables are in spec order, rows in key order."""

    tables: Mapping[str, TableState]

    @classmethod
    def from_rows(cls, tables: dict[str, list[dict[str, Any]]], specs: dict[str, TableSpec]) -> Snapshot:
        """Build a snapshot from plain rows (e.g. a JSON state from an MCP backend)."""
        unknown = sorted(set(tables) - set(specs))
        if unknown:
            raise ValueError(f"snapshot: unknown table(s) {', '.join(unknown)}")
        return cls(
            {name: build_table(spec, tables.get(name, []), source="snapshot") for name, spec in specs.items()}
        )

    @classmethod
    def from_sqlite(
        cls,
        db: sqlite3.Connection,
        specs: dict[str, TableSpec],
        *,
        base: Snapshot | None = None,
        only: Iterable[str] | None = None,
    ) -> Snapshot:
        """Read tables from SQLite; with ``base`` and ``only``, unread tables are shared from ``base``."""
        wanted = set(specs) if only is None or base is None else set(only)
        tables: dict[str, TableState] = {}
        for name, spec in specs.items():
            if name not in wanted and base is not None:
                tables[name] = base.tables[name]
                continue
            columns = list(spec.columns)
            select = ", ".join(f'"{c}"' for c in columns)
            cursor = db.execute(f'SELECT {select} FROM "{name}"')
            tables[name] = build_table(
                spec, (dict(zip(columns, values)) for values in cursor), source="sqlite"
            )
        return cls(tables)

    def specs(self) -> dict[str, TableSpec]:
        return {name: table.spec for name, table in self.tables.items()}

    def to_rows(self) -> dict[str, list[dict[str, Any]]]:
        """Plain rows per table (normalised values), e.g. for storing or printing."""
        return {name: [dict(row) for row in table.rows.values()] for name, table in self.tables.items()}

    def same_state(self, other: Snapshot) -> bool:
        """True when every table holds the same keys with the same stable values."""
        return all(
            name in other.tables and table.stable == other.tables[name].stable
            for name, table in self.tables.items()
        ) and set(self.tables) == set(other.tables)
