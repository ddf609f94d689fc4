"""SQLite sandboxes: one prepared in-memory template per domain and per task, a private copy per attempt.

Each task template is copied with the sqlite3 backup API into private in-memory databases
(no DDL per attempt). A copy serves one attempt at a time inside one outer transaction;
when the attempt ends the transaction is rolled back, which restores the copy byte for byte
to S0 and lets the next attempt reuse it without paying SQLite's schema parse again (that
parse, not the copy, dominated the cost of a fresh connection). A copy whose outer
transaction a tool broke (a stray COMMIT/ROLLBACK) is discarded, never reused.

Triggers write every insert, delete and changed column into ``_tb_effects`` keyed by the
current tool-call index, so each call knows exactly which rows and cells it wrote.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from tb_engine.interfaces import ToolSchema
from tb_engine.snapshot import Snapshot
from tb_engine.spec import DomainSpec, TableSpec, TaskSpec
from tb_engine.tooling import META_TABLE, SANDBOX_NOW, ToolError, dump_json

EFFECTS_TABLE = "_tb_effects"
STATE_TABLE = "_tb_state"
SQL_TYPES = {"text": "TEXT", "integer": "INTEGER", "real": "REAL", "boolean": "INTEGER", "json": "TEXT"}
TASK_TEMPLATE_CACHE_SIZE = 512
IDLE_COPIES_PER_TASK = 4  # pooled private copies per task (one per concurrently running attempt)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _key_sql(spec: TableSpec, alias: str) -> str:
    """SQL expression for the printable row key; must equal snapshot.key_function."""
    parts = [f"CAST({alias}.{_quote(c)} AS TEXT)" for c in spec.primary_key]
    if len(parts) == 1:
        return parts[0]
    return " || ',' || ".join(f"'{c}=' || {p}" for c, p in zip(spec.primary_key, parts))


def _schema_sql(tables: dict[str, TableSpec]) -> list[str]:
    statements = [
        f"CREATE TABLE {META_TABLE} (name TEXT PRIMARY KEY, value TEXT)",
        f"CREATE TABLE {STATE_TABLE} (call INTEGER NOT NULL)",
        f"CREATE TABLE {EFFECTS_TABLE} (call INTEGER, tbl TEXT, rkey TEXT, col TEXT, op TEXT, old, new)",
    ]
    for name, spec in tables.items():
        columns = ", ".join(f"{_quote(c)} {SQL_TYPES[t]}" for c, t in spec.columns.items())
        pk = ", ".join(_quote(c) for c in spec.primary_key)
        statements.append(f"CREATE TABLE {_quote(name)} ({columns}, PRIMARY KEY ({pk}))")
    return statements


def _trigger_sql(tables: dict[str, TableSpec]) -> list[str]:
    # Three triggers per table (not one per column): every new connection parses the whole schema
    # on first use, so schema size is per-attempt cost. The update trigger logs one row per column
    # that actually changed, which gives cell-level attribution, with its old and new value (the
    # process analysis sees a cell changed and changed back: tb_engine.process).
    statements = []
    log = f"INSERT INTO {EFFECTS_TABLE} (call, tbl, rkey, col, op, old, new) SELECT call, "
    for name, spec in tables.items():
        literal = "'" + name.replace("'", "''") + "'"
        statements.append(
            f"CREATE TRIGGER {_quote('_tb_ins_' + name)} AFTER INSERT ON {_quote(name)} BEGIN "
            f"{log}{literal}, {_key_sql(spec, 'NEW')}, NULL, 'insert', NULL, NULL FROM {STATE_TABLE}; END"
        )
        statements.append(
            f"CREATE TRIGGER {_quote('_tb_del_' + name)} AFTER DELETE ON {_quote(name)} BEGIN "
            f"{log}{literal}, {_key_sql(spec, 'OLD')}, NULL, 'delete', NULL, NULL FROM {STATE_TABLE}; END"
        )
        changed = " UNION ALL ".join(
            f"SELECT '{c.replace(chr(39), chr(39) * 2)}' AS col, OLD.{_quote(c)} AS old, NEW.{_quote(c)} AS new "
            f"WHERE OLD.{_quote(c)} IS NOT NEW.{_quote(c)}"
            for c in spec.columns
        )
        statements.append(
            f"CREATE TRIGGER {_quote('_tb_upd_' + name)} AFTER UPDATE ON {_quote(name)} BEGIN "
            f"{log}{literal}, {_key_sql(spec, 'NEW')}, changed.col, 'update', changed.old, changed.new "
            f"FROM {STATE_TABLE}, ({changed}) AS changed; END"
        )
    return statements


def _stored(column_type: str, value: Any) -> Any:
    if value is None:
        return None
    if column_type == "json":
        return value if isinstance(value, str) else dump_json(value)
    if column_type == "boolean":
        return int(bool(value))
    return value


def upsert_rows(db: sqlite3.Connection, spec: TableSpec, rows: list[dict[str, Any]]) -> None:
    """Insert rows, or update the given columns of rows whose primary key already exists."""
    for row in rows:
        columns = list(row)
        names = ", ".join(_quote(c) for c in columns)
        marks = ", ".join("?" for _ in columns)
        updates = [c for c in columns if c not in spec.primary_key]
        pk = ", ".join(_quote(c) for c in spec.primary_key)
        action = (
            "DO UPDATE SET " + ", ".join(f"{_quote(c)} = excluded.{_quote(c)}" for c in updates)
            if updates
            else "DO NOTHING"
        )
        db.execute(
            f"INSERT INTO {_quote(spec.name)} ({names}) VALUES ({marks}) ON CONFLICT ({pk}) {action}",
            [_stored(spec.columns[c], row[c]) for c in columns],
        )


_SIMPLE_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}
_SIMPLE_PROPERTY_KEYS = {
    "type",
    "enum",
    "description",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "title",
}


def _property_check(schema: dict[str, Any]) -> Callable[[Any], bool] | None:
    if not set(schema) <= _SIMPLE_PROPERTY_KEYS or schema.get("type") not in _SIMPLE_TYPES:
        return None
    type_ok = _SIMPLE_TYPES[schema["type"]]
    enum = schema.get("enum")
    if enum is not None and not all(isinstance(item, str) for item in enum):
        return None  # Python's `in` treats True == 1; jsonschema does not
    bounds = [
        (schema.get(k), op)
        for k, op in (
            ("minimum", lambda v, b: v >= b),
            ("maximum", lambda v, b: v <= b),
            ("exclusiveMinimum", lambda v, b: v > b),
            ("exclusiveMaximum", lambda v, b: v < b),
            ("minLength", lambda v, b: len(v) >= b),
            ("maxLength", lambda v, b: len(v) <= b),
        )
        if k in schema
    ]

    def check(value: Any) -> bool:
        if not type_ok(value) or (enum is not None and value not in enum):
            return False
        return all(op(value, bound) for bound, op in bounds)

    return check


def fast_argument_check(schema: dict[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """A quick exact validity test for flat object schemas (the common tool shape), or None when the
    schema uses anything else. It only answers "valid"; errors are always explained by jsonschema."""
    if not set(schema) <= {"type", "properties", "required", "additionalProperties", "description", "title"}:
        return None
    if schema.get("type") != "object" or schema.get("additionalProperties", True) not in (True, False):
        return None
    checks = {}
    for name, prop in (schema.get("properties") or {}).items():
        check = _property_check(prop) if isinstance(prop, dict) else None
        if check is None:
            return None
        checks[name] = check
    required = tuple(schema.get("required") or ())
    closed = schema.get("additionalProperties", True) is False

    def valid(arguments: dict[str, Any]) -> bool:
        for name in required:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            check = checks.get(name)
            if check is None:
                if closed:
                    return False
            elif not check(value):
                return False
        return True

    return valid


def _fresh_connection() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    db.row_factory = sqlite3.Row
    return db


@dataclass(frozen=True)
class ToolOutcome:
    result: Any
    error: str | None
    changed_state: bool


class Sandbox:
    """One attempt's private database plus the domain's tools over it."""

    def __init__(
        self,
        db: sqlite3.Connection,
        runtime: DomainRuntime,
        initial: Snapshot,
        release: Callable[[sqlite3.Connection, bool], None] | None = None,
    ) -> None:
        self.db: sqlite3.Connection | None = db  # None once closed (the copy went back to the pool)
        self.runtime = runtime
        self.initial = initial
        self._release = release
        self._reusable = True

    def _open_db(self) -> sqlite3.Connection:
        if self.db is None:
            raise RuntimeError("sandbox already closed: its copy belongs to another attempt now")
        return self.db

    def call_tool(self, name: str, arguments: Any, *, index: int) -> ToolOutcome:
        """Validate and run one tool call; failures come back as ``error``, never as exceptions."""
        tool = self.runtime.tools.get(name)
        if tool is None or tool.impl is None:
            return ToolOutcome(None, f"unknown tool {name!r}", False)
        parsed, problem = self.runtime.check_arguments(name, arguments)
        if problem:
            return ToolOutcome(None, problem, False)
        db = self._open_db()
        db.execute(f"UPDATE {STATE_TABLE} SET call = ?", (index,))
        db.execute("SAVEPOINT tool_call")
        error = None
        result = None
        try:
            result = tool.impl(db, **parsed)
        except ToolError as exc:
            error = str(exc) or type(exc).__name__
        except Exception as exc:  # a tool bug must not kill the attempt; it is reported as the call's error
            error = f"tool failed: {type(exc).__name__}: {exc}"
        if not db.in_transaction:
            # The tool ended our outer transaction itself: finish this attempt, never reuse the copy.
            self._reusable = False
            db.execute("BEGIN")
            db.execute("SAVEPOINT tool_call")
        if error is not None:
            db.execute("ROLLBACK TO tool_call")
        db.execute("RELEASE tool_call")
        changed = (
            db.execute(f"SELECT 1 FROM {EFFECTS_TABLE} WHERE call = ? LIMIT 1", (index,)).fetchone()
            is not None
        )
        return ToolOutcome(result, error, changed)

    def writes(self) -> dict[tuple[str, str, str | None], tuple[int, ...]]:
        """(table, row key, column or None for insert/delete) -> indexes of the calls that wrote it."""
        found: dict[tuple[str, str, str | None], set[int]] = {}
        for call, table, key, column in self._open_db().execute(
            f"SELECT call, tbl, rkey, col FROM {EFFECTS_TABLE}"
        ):
            found.setdefault((table, key, column), set()).add(call)
        return {where: tuple(sorted(calls)) for where, calls in found.items()}

    def value_log(self) -> list[tuple[int, str, str, str | None, str, Any, Any]]:
        """Every logged write in order: (call, table, row key, column, op, old, new) — values for updates."""
        return [
            (call, table, key, column, op, old, new)
            for call, table, key, column, op, old, new in self._open_db().execute(
                f"SELECT call, tbl, rkey, col, op, old, new FROM {EFFECTS_TABLE} ORDER BY rowid"
            )
        ]

    def snapshot(self) -> Snapshot:
        """The current state; tables no call wrote are shared with S0 instead of re-read."""
        db = self._open_db()
        touched = [row[0] for row in db.execute(f"SELECT DISTINCT tbl FROM {EFFECTS_TABLE}")]
        if not touched:
            return self.initial
        return Snapshot.from_sqlite(db, self.runtime.tables, base=self.initial, only=touched)

    def close(self) -> None:
        """End the attempt: its copy is rolled back to S0 and pooled, or closed."""
        db, self.db = self.db, None
        if db is None:
            return
        if self._release is None:
            db.close()
        else:
            self._release(db, self._reusable)


class TaskTemplate:
    """A domain template with one task's patch applied, plus its S0; copied for every attempt."""

    def __init__(self, runtime: DomainRuntime, task: TaskSpec):
        self.runtime = runtime
        self.db = runtime.copy_template()
        db = self.db
        db.execute("BEGIN")
        for table, rows in task.data_patch.items():
            upsert_rows(db, runtime.tables[table], rows)
        db.execute(f"DELETE FROM {EFFECTS_TABLE}")
        db.execute("COMMIT")
        self.initial = Snapshot.from_sqlite(db, runtime.tables)
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []  # private copies at S0, not in use

    def new_sandbox(self) -> Sandbox:
        """A private copy of this task's initial state, held by one attempt until closed."""
        with self._lock:
            copy = self._idle.pop() if self._idle else None
            if copy is None:
                copy = _fresh_connection()
                self.db.backup(copy)
        copy.execute("BEGIN")
        return Sandbox(copy, self.runtime, self.initial, release=self._release)

    def _release(self, copy: sqlite3.Connection, reusable: bool) -> None:
        try:
            if copy.in_transaction:
                copy.execute("ROLLBACK")
            else:
                reusable = False
        except sqlite3.Error:
            reusable = False
        with self._lock:
            if reusable and len(self._idle) < IDLE_COPIES_PER_TASK:
                self._idle.append(copy)
                return
        copy.close()


class DomainRuntime:
    """Per-domain prepared state: the template database, tool schemas and compiled validators."""

    def __init__(self, domain: DomainSpec):
        self.name = domain.name
        self.tables = domain.tables
        self.tools = domain.tools
        self.schemas = [
            ToolSchema(t.name, t.description, t.parameters, t.read_only) for t in domain.tools.values()
        ]
        self.validators = {name: Draft202012Validator(t.parameters) for name, t in domain.tools.items()}
        self.fast_checks = {name: fast_argument_check(t.parameters) for name, t in domain.tools.items()}
        self._template = _fresh_connection()
        db = self._template
        db.execute("BEGIN")
        for statement in _schema_sql(domain.tables):
            db.execute(statement)
        db.execute(f"INSERT INTO {STATE_TABLE} (call) VALUES (-1)")
        db.execute(f"INSERT INTO {META_TABLE} (name, value) VALUES ('now', ?)", (SANDBOX_NOW,))
        for table, rows in domain.base_data.items():
            upsert_rows(db, domain.tables[table], rows)
        for statement in _trigger_sql(domain.tables):
            db.execute(statement)
        db.execute("COMMIT")
        self._lock = threading.Lock()
        self._tasks: OrderedDict[str, TaskTemplate] = OrderedDict()
        self.golden_cache: dict[str, Any] = {}  # task hash -> golden Snapshot (filled by tb_engine.golden)

    def copy_template(self) -> sqlite3.Connection:
        copy = _fresh_connection()
        with self._lock:
            self._template.backup(copy)
        return copy

    def task_template(self, task: TaskSpec) -> TaskTemplate:
        """The cached template for this task's content hash (LRU-bounded)."""
        task_hash = task_hash_of(task)
        with self._lock:
            template = self._tasks.get(task_hash)
            if template is not None:
                self._tasks.move_to_end(task_hash)
                return template
        template = TaskTemplate(self, task)
        with self._lock:
            self._tasks[task_hash] = template
            while len(self._tasks) > TASK_TEMPLATE_CACHE_SIZE:
                evicted, _ = self._tasks.popitem(last=False)
                self.golden_cache.pop(evicted, None)
        return template

    def check_arguments(self, name: str, arguments: Any) -> tuple[dict[str, Any], str | None]:
        """Parse and schema-check arguments; returns (arguments, None) or ({}, error text)."""
        if arguments is None or arguments == "":
            arguments = {}
        if isinstance(arguments, (str, bytes)):
            try:
                arguments = json.loads(arguments)
            except ValueError as exc:
                return {}, f"arguments are not valid JSON: {exc}"
        if not isinstance(arguments, dict):
            return {}, f"arguments must be a JSON object, got {type(arguments).__name__}"
        fast = self.fast_checks.get(name)
        if fast is not None and fast(arguments):
            return arguments, None
        error = best_match(self.validators[name].iter_errors(arguments))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            return {}, f"invalid arguments for {name} at {where}: {error.message}"
        return arguments, None


_task_hashes: dict[int, str] = {}


def task_hash_of(task: TaskSpec) -> str:
    """task.content_hash(), computed once per task object (it serialises the whole task)."""
    key = id(task)
    cached = _task_hashes.get(key)
    if cached is None:
        cached = _task_hashes[key] = task.content_hash()
        weakref.finalize(task, _task_hashes.pop, key, None)
    return cached


_runtimes: dict[int, DomainRuntime] = {}
_runtimes_lock = threading.Lock()
# One builder at a time: the first attempts of a fresh threads-pool worker all need the same few
# domains, and building each one in every thread at once only multiplies the work under the GIL.
_runtime_build_lock = threading.Lock()


def domain_runtime(domain: DomainSpec) -> DomainRuntime:
    """The prepared runtime of a domain object (built once; dropped when the domain object is freed)."""
    key = id(domain)
    runtime = _runtimes.get(key)
    if runtime is not None:
        return runtime
    with _runtime_build_lock:
        runtime = _runtimes.get(key)
        if runtime is None:
            runtime = DomainRuntime(domain)
            with _runtimes_lock:
                _runtimes[key] = runtime
                weakref.finalize(domain, _runtimes.pop, key, None)
    return runtime


def new_sandbox(domain: DomainSpec, task: TaskSpec) -> Sandbox:
    """A fresh isolated sandbox holding the task's initial state."""
    return domain_runtime(domain).task_template(task).new_sandbox()
