"""Classified diff of SR against SG relative to S0 (SPEC §3), and the S0 -> SR effects list."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from tb_engine.results import DiffItem, DiffKind, Effect
from tb_engine.snapshot import Snapshot, TableState, _canonical_json, stable_columns

WriteKey = tuple[str, str, "str | None"]
Writes = Mapping[WriteKey, tuple[int, ...]]


def _classify(result_changed: bool, golden_changed: bool) -> DiffKind:
    if result_changed and golden_changed:
        return "wrong_value"
    return "extra_effect" if result_changed else "missing_effect"


class _WriteIndex:
    """Tool-call indexes by cell and by row, for effect attribution."""

    def __init__(self, writes: Writes | None):
        self.cells: Mapping[WriteKey, tuple[int, ...]] = writes or {}
        rows: dict[tuple[str, str], set[int]] = defaultdict(set)
        for (table, key, _field), indexes in self.cells.items():
            rows[(table, key)].update(indexes)
        self.rows = rows

    def cell(self, table: str, key: str | None, field: str) -> tuple[int, ...]:
        if key is None:
            return ()
        found = set(self.cells.get((table, key, field), ())) | set(self.cells.get((table, key, None), ()))
        return tuple(sorted(found))

    def row(self, table: str, key: str | None) -> tuple[int, ...]:
        return tuple(sorted(self.rows.get((table, key), ()))) if key is not None else ()


def _row_items(
    table: str,
    initial: TableState,
    result: TableState,
    golden: TableState,
    keys: tuple[str | None, str | None, str | None],
    writes: _WriteIndex,
) -> list[DiffItem]:
    """Diff items for one aligned row identity (initial, result and golden keys; None where absent)."""
    key_i, key_r, key_g = keys
    row_i = initial.rows.get(key_i) if key_i is not None else None
    row_r = result.rows.get(key_r) if key_r is not None else None
    row_g = golden.rows.get(key_g) if key_g is not None else None
    shown_key = next(key for key in (key_r, key_i, key_g) if key is not None)  # an identity has at least one
    if row_r is None or row_g is None:
        stable_i = initial.stable.get(key_i) if key_i is not None else None
        stable_r = result.stable.get(key_r) if key_r is not None else None
        stable_g = golden.stable.get(key_g) if key_g is not None else None
        kind = _classify(stable_r != stable_i, stable_g != stable_i)
        return [
            DiffItem(kind, table, shown_key, None, row_i, row_r, row_g, writes.row(table, key_r or key_i))
        ]
    items = []
    for column in stable_columns(result.spec):
        value_r, value_g = row_r[column], row_g[column]
        if value_r == value_g:
            continue
        value_i = row_i[column] if row_i is not None else None
        result_changed = row_i is None or value_r != value_i
        golden_changed = row_i is None or value_g != value_i
        kind = _classify(result_changed, golden_changed)
        items.append(
            DiffItem(
                kind, table, shown_key, column, value_i, value_r, value_g, writes.cell(table, key_r, column)
            )
        )
    return items


def _signature(table: TableState, key: str) -> str:
    return _canonical_json(table.stable[key])


def _match_generated(
    result: TableState, golden: TableState, new_r: list[str], new_g: list[str]
) -> list[tuple[str | None, str | None]]:
    """Pair rows both runs inserted by stable content; leftovers pair by closest content, else stand alone."""
    by_signature: dict[str, list[str]] = defaultdict(list)
    for key in new_g:
        by_signature[_signature(golden, key)].append(key)
    pairs: list[tuple[str | None, str | None]] = []
    left_r = []
    for key in new_r:
        bucket = by_signature.get(_signature(result, key))
        if bucket:
            pairs.append((key, bucket.pop(0)))
        else:
            left_r.append(key)
    left_g = [key for bucket in by_signature.values() for key in bucket]
    left_g.sort()
    # A leftover attempt row that agrees with a leftover golden row on most stable fields is the
    # "same" record with wrong values (e.g. a refund of the wrong amount), not one extra + one missing:
    # pair when at least half of the stable fields agree.
    width = len(stable_columns(result.spec))
    for key_r in left_r:
        best, best_score = None, (width - 1) // 2
        for key_g in left_g:
            score = sum(a == b for a, b in zip(result.stable[key_r], golden.stable[key_g]))
            if score > best_score:
                best, best_score = key_g, score
        if best is not None:
            left_g.remove(best)
        pairs.append((key_r, best))
    pairs.extend((None, key_g) for key_g in left_g)
    return pairs


def _table_identities(
    initial: TableState, result: TableState, golden: TableState
) -> Iterator[tuple[str | None, str | None, str | None]]:
    """Row identities (key in S0, key in SR, key in SG) whose stable values differ between SR and SG."""
    if result.stable == golden.stable:
        return
    old_keys = initial.rows.keys()
    if not result.spec.generated_key:
        for key in sorted(result.stable.keys() | golden.stable.keys()):
            if result.stable.get(key) != golden.stable.get(key):
                yield (key if key in old_keys else None, key, key)
        return
    for key in sorted((result.stable.keys() | golden.stable.keys()) & old_keys):
        if result.stable.get(key) != golden.stable.get(key):
            yield (key, key, key)
    new_r = sorted(k for k in result.stable if k not in old_keys)
    new_g = sorted(k for k in golden.stable if k not in old_keys)
    for key_r, key_g in _match_generated(result, golden, new_r, new_g):
        if key_r is not None and key_g is not None and result.stable[key_r] == golden.stable[key_g]:
            continue
        yield (None, key_r, key_g)


def diff_states(
    initial: Snapshot, result: Snapshot, golden: Snapshot, writes: Writes | None = None
) -> list[DiffItem]:
    """Every SR-vs-SG difference, classified against S0 and attributed to the attempt's tool calls."""
    index = _WriteIndex(writes)
    items: list[DiffItem] = []
    for name, table_i in initial.tables.items():
        table_r, table_g = result.tables[name], golden.tables[name]
        for keys in _table_identities(table_i, table_r, table_g):
            items.extend(_row_items(name, table_i, table_r, table_g, keys, index))
    return items


def effects(initial: Snapshot, result: Snapshot, writes: Writes | None = None) -> list[Effect]:
    """What the attempt changed, S0 -> SR (all columns, unstable ones included), for the UI."""
    index = _WriteIndex(writes)
    found: list[Effect] = []
    for name, table_i in initial.tables.items():
        table_r = result.tables[name]
        if table_r.rows is table_i.rows or table_r.rows == table_i.rows:
            continue
        for key in sorted(table_i.rows.keys() | table_r.rows.keys()):
            before, after = table_i.rows.get(key), table_r.rows.get(key)
            if before == after:
                continue
            if before is None or after is None:
                op: Literal["insert", "delete"] = "insert" if before is None else "delete"
                found.append(Effect(op, name, key, None, before, after, index.row(name, key)))
                continue
            for column in table_r.spec.columns:
                if before[column] != after[column]:
                    found.append(
                        Effect(
                            "update",
                            name,
                            key,
                            column,
                            before[column],
                            after[column],
                            index.cell(name, key, column),
                        )
                    )
    return found


def diff_kinds(items: Iterable[DiffItem]) -> list[str]:
    """The sorted set of diff classes present (the state part of an attempt's failure categories)."""
    return sorted({item.kind for item in items})


def describe_item(item: DiffItem) -> str:
    """One readable line, e.g. ``tickets[20].status: solved (golden: hold) — wrong value, written by call #6``."""
    label = item.kind.replace("_", " ")
    where = f"{item.table}[{item.key}]" + (f".{item.field}" if item.field else "")
    if item.field is None:
        result = "row present" if item.result is not None else "row absent"
        golden = "present" if item.golden is not None else "absent"
        text = f"{where}: {result} (golden: {golden}) — {label}"
        if item.result is not None:
            text += f"; row {_short(item.result)}"
        elif item.golden is not None:
            text += f"; golden row {_short(item.golden)}"
    else:
        text = f"{where}: {_short(item.result)} (golden: {_short(item.golden)}) — {label}"
    if item.written_by:
        calls = ", ".join(f"#{i}" for i in item.written_by)
        text += f", written by call{'s' if len(item.written_by) > 1 else ''} {calls}"
    return text


def _short(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return _canonical_json(value)
