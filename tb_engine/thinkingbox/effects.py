"""A ThinkingBox ``__reserved__geteffects`` answer -> S0/SR/SG snapshots and our classified diff.

ThinkingBox grades by hash equality and reports a *positional* diff (lists compared index by
index, so one inserted row can show as dozens of items). We key rows by primary key instead,
classify each difference against S0 (SPEC §3), and keep their hash verdict and positional diff
beside ours as evidence; a disagreement between the two verdicts is flagged, never hidden.

Table specs are inferred from the states themselves:

* primary key: ``id`` when every row has one; otherwise the first column whose values are
  present, scalar and unique in all three states (e.g. ``sku``, ``tracking_number``);
  otherwise the whole row (every stable column) is the key.
* column types from the values (bool, int, float, str, anything else json).
* unstable fields: exactly what the server itself leaves out of its hash, from its own
  declarations (``declarations.py``: ``UnstableField`` / ``unstable_extra_fields`` read with
  the servers' interpreter, or the ``unstable`` key of a geteffects answer), plus any a
  domain declares in ``DomainSpec.mcp["unstable"]``. Never a table kept by hand: a field we
  skip but the server hashes (a clock stamp) makes the two verdicts disagree.

The comparison also recomputes the server's two hashes from the states under those
declarations; when both match what the server reported, the declarations are proven right
for this answer (``declarations_verified``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tb_engine.diff import Writes, diff_states
from tb_engine.results import DiffItem
from tb_engine.snapshot import Snapshot
from tb_engine.spec import ColumnType, TableSpec
from tb_engine.thinkingbox.declarations import NO_DECLARATIONS, ServerDeclarations, from_effects_answer
from tb_engine.thinkingbox.errors import ThinkingBoxFormatError

STATE_KEYS = ("initial_db_state", "result_db_state", "golden_db_state")


@dataclass(frozen=True)
class EffectsStates:
    """The three states of one server as plain rows, with the table specs inferred for them."""

    initial: dict[str, list[dict[str, Any]]]
    result: dict[str, list[dict[str, Any]]]
    golden: dict[str, list[dict[str, Any]]]
    specs: dict[str, TableSpec]


@dataclass
class EffectsComparison:
    """Our classified diff for one server beside ThinkingBox's own hash verdict."""

    server: str
    diff: list[DiffItem]
    hash_pass: bool  # ThinkingBox: result_db_hash == golden_db_hash
    result_hash: str
    golden_hash: str
    raw_diff: list[Any] = field(default_factory=list)  # their positional diff, kept as evidence
    rubrics_yesno: list[str] = field(default_factory=list)
    declarations: ServerDeclarations = NO_DECLARATIONS
    # Our recomputation of (result hash, golden hash) equals theirs; None when they sent no hashes.
    declarations_verified: bool | None = None

    @property
    def our_pass(self) -> bool:
        return not self.diff

    @property
    def agree(self) -> bool:
        return self.our_pass == self.hash_pass

    def evidence(self) -> dict[str, Any]:
        return {
            "our_state_pass": self.our_pass,
            "their_hash_pass": self.hash_pass,
            "disagree": not self.agree,
            "result_db_hash": self.result_hash,
            "golden_db_hash": self.golden_hash,
            "positional_diff": self.raw_diff,
            "diff_items": len(self.diff),
            "declarations": self.declarations.source,
            "declarations_verified": self.declarations_verified,
        }


def is_db_effects(answer: Any) -> bool:
    """True when an effects answer carries the three database states (the sandbox servers' shape)."""
    return isinstance(answer, dict) and all(isinstance(answer.get(k), dict) for k in STATE_KEYS)


def _column_type(values: list[Any]) -> ColumnType:
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return "text"
    if kinds == {bool}:
        return "boolean"
    if kinds == {int}:
        return "integer"
    if kinds <= {int, float}:
        return "real"
    if kinds == {str}:
        return "text"
    return "json"


def _primary_key(rows_by_state: list[list[dict[str, Any]]], columns: list[str]) -> tuple[str, ...]:
    every_row = [row for rows in rows_by_state for row in rows]
    if every_row and all("id" in row and row["id"] is not None for row in every_row):
        return ("id",)
    if not every_row:
        return ("id",) if "id" in columns or not columns else (columns[0],)
    for column in columns:
        unique_everywhere = True
        for rows in rows_by_state:
            values = [row.get(column) for row in rows]
            if any(v is None or isinstance(v, (list, dict)) for v in values) or len(
                set(map(repr, values))
            ) != len(values):
                unique_everywhere = False
                break
        if unique_everywhere:
            return (column,)
    return tuple(columns)


def resolve_declarations(
    answer: dict[str, Any], declarations: ServerDeclarations | None
) -> ServerDeclarations:
    """The declarations to compare under: the given ones plus those the answer itself carries."""
    declared = from_effects_answer(answer)
    if declared is None:
        return declarations or NO_DECLARATIONS
    if declarations is None or not declarations.found:
        return declared
    return declarations.merged(declared)


def infer_table_specs(
    server: str,
    states: list[dict[str, list[dict[str, Any]]]],
    declarations: ServerDeclarations | None = None,
) -> dict[str, TableSpec]:
    """TableSpecs for every table seen in any of the states (see the module docstring for the rules)."""
    declarations = declarations or NO_DECLARATIONS
    names: list[str] = []
    for state in states:
        names.extend(name for name in state if name not in names)
    specs: dict[str, TableSpec] = {}
    for name in names:
        rows_by_state = [state.get(name) or [] for state in states]
        # Columns in the order first seen; a dict keeps that order without a list scan per cell
        # (which made spec inference a seventh of a ThinkingBox attempt's CPU).
        seen: dict[str, Any] = {}
        for rows in rows_by_state:
            for row in rows:
                seen.update(row)
        columns = list(seen)
        types = {c: _column_type([row.get(c) for rows in rows_by_state for row in rows]) for c in columns}
        unstable_columns = declarations.unstable_columns(name, columns)
        stable_columns = [c for c in columns if c not in unstable_columns]
        key = _primary_key(rows_by_state, stable_columns)
        specs[name] = TableSpec(
            name=name, columns=types, primary_key=key, unstable=frozenset(unstable_columns)
        )
    return specs


def effects_states(
    server: str, answer: dict[str, Any], declarations: ServerDeclarations | None = None
) -> EffectsStates:
    """Validate a geteffects answer and return its three states with inferred table specs."""
    states: list[dict[str, list[dict[str, Any]]]] = []
    for key in STATE_KEYS:
        state = answer.get(key)
        if not isinstance(state, dict):
            raise ThinkingBoxFormatError(f"geteffects answer for {server!r} has no {key} mapping")
        for table, rows in state.items():
            if rows is not None and not (isinstance(rows, list) and all(isinstance(r, dict) for r in rows)):
                raise ThinkingBoxFormatError(f"{key}.{table} must be a list of rows")
        states.append({table: list(rows or []) for table, rows in state.items()})
    initial, result, golden = states
    declarations = resolve_declarations(answer, declarations)
    return EffectsStates(initial, result, golden, specs=infer_table_specs(server, states, declarations))


def snapshot_of(rows: dict[str, list[dict[str, Any]]], specs: dict[str, TableSpec]) -> Snapshot:
    """One state as a Snapshot over exactly ``specs`` (tables missing from the state are empty)."""
    return Snapshot.from_rows({name: rows.get(name) or [] for name in specs}, specs)


def snapshots_of(states: EffectsStates, specs: dict[str, TableSpec] | None = None) -> dict[str, Snapshot]:
    """S0, SR and SG under one set of table specs, keyed initial / result / golden."""
    specs = specs or states.specs
    return {
        "initial": snapshot_of(states.initial, specs),
        "result": snapshot_of(states.result, specs),
        "golden": snapshot_of(states.golden, specs),
    }


def classified_diff(
    states: EffectsStates, writes: Writes | None = None, *, built: dict[str, Snapshot] | None = None
) -> list[DiffItem]:
    """Every SR-vs-SG difference classified against S0 (SPEC §3), by row key rather than list position.

    ``built``: S0, SR and SG (keyed initial / result / golden) already built from these states;
    used when they were built under exactly ``states.specs`` (the same input gives the same
    snapshots), else the snapshots are built here.
    """
    snaps = built if built is not None and _built_under(built, states.specs) else snapshots_of(states)
    return diff_states(snaps["initial"], snaps["result"], snaps["golden"], writes)


def _built_under(built: dict[str, Snapshot], specs: dict[str, TableSpec]) -> bool:
    return all(key in built and built[key].specs() == specs for key in ("initial", "result", "golden"))


def compare_effects(
    server: str,
    answer: dict[str, Any],
    declarations: ServerDeclarations | None = None,
    *,
    built: dict[str, Snapshot] | None = None,
    states: EffectsStates | None = None,
) -> EffectsComparison:
    """Our classified diff (SR vs SG against S0) for one geteffects answer, beside their hash verdict.

    ``built``: the snapshots of this answer's states a backend already built for grading; reused
    when their table specs equal those inferred here (building them again was a third of a
    ThinkingBox attempt's CPU). ``states``: ``effects_states(server, answer, declarations)`` when
    the caller already has it (validating and copying the three states again cost as much).
    """
    declarations = resolve_declarations(answer, declarations)
    if states is None:
        states = effects_states(server, answer, declarations)
    result_hash, golden_hash = answer.get("result_db_hash"), answer.get("golden_db_hash")
    verified = None
    if result_hash is not None and golden_hash is not None:
        verified = (
            declarations.state_hash(states.result) == result_hash
            and declarations.state_hash(states.golden) == golden_hash
        )
    return EffectsComparison(
        server=server,
        diff=classified_diff(states, built=built),
        hash_pass=result_hash is not None and result_hash == golden_hash,
        result_hash=str(result_hash or ""),
        golden_hash=str(golden_hash or ""),
        raw_diff=list(answer.get("diff") or []),
        rubrics_yesno=list(answer.get("rubrics_yesno") or []),
        declarations=declarations,
        declarations_verified=verified,
    )


def row_key(row: dict[str, Any], key_columns: tuple[str, ...]) -> str:
    """Printable row key: the value for a one-column key, ``col=value,…`` otherwise."""
    if len(key_columns) == 1:
        return str(row.get(key_columns[0]))
    return ",".join(f"{column}={row.get(column)}" for column in key_columns)


def state_writes(
    before: dict[str, list[dict[str, Any]]],
    after: dict[str, list[dict[str, Any]]],
    specs: dict[str, TableSpec],
) -> set[tuple[str, str, str | None]]:
    """Cells (table, key, field) and whole rows (field None) that differ between two states."""
    written: set[tuple[str, str, str | None]] = set()
    for table in set(before) | set(after):
        spec = specs.get(table)
        key_columns = spec.primary_key if spec else ("id",)
        old = {row_key(r, key_columns): r for r in before.get(table) or []}
        new = {row_key(r, key_columns): r for r in after.get(table) or []}
        for key in old.keys() ^ new.keys():
            written.add((table, key, None))
        for key in old.keys() & new.keys():
            for column in set(old[key]) | set(new[key]):
                if old[key].get(column) != new[key].get(column):
                    written.add((table, key, column))
    return written


def state_value_log(
    call: int,
    before: dict[str, list[dict[str, Any]]],
    after: dict[str, list[dict[str, Any]]],
    specs: dict[str, TableSpec],
) -> list[tuple[int, str, str, str | None, str, Any, Any]]:
    """What one call changed between two states, as value-log rows (tb_engine.process.WriteEntry):
    (call, table, row key, column, op, old, new) — insert/delete for whole rows (column None), update
    with the old and new value per cell; in table, key and column order (a server reports no order
    of its own within one call)."""
    entries: list[tuple[int, str, str, str | None, str, Any, Any]] = []
    for table in sorted(set(before) | set(after)):
        spec = specs.get(table)
        key_columns = spec.primary_key if spec else ("id",)
        old = {row_key(r, key_columns): r for r in before.get(table) or []}
        new = {row_key(r, key_columns): r for r in after.get(table) or []}
        for key in sorted(old.keys() | new.keys()):
            if key not in new:
                entries.append((call, table, key, None, "delete", None, None))
            elif key not in old:
                entries.append((call, table, key, None, "insert", None, None))
            else:
                for column in sorted(set(old[key]) | set(new[key])):
                    if old[key].get(column) != new[key].get(column):
                        entries.append(
                            (call, table, key, column, "update", old[key].get(column), new[key].get(column))
                        )
    return entries
