"""Hand-written SQL for the statements every attempt runs: claim, record, summary recount, dispatch.

Kept beside the ORM because the campaign benchmark shows it matters. ``bench/campaign_throughput.py``,
default configuration (PostgreSQL + Redis, 10,140 golden attempts on one worker with 2 prefork
processes; 2 cores shared with other work), run back to back:

    with this module  RESULT attempts_per_s=172.6 p50_attempt_ms=2.3 p95_attempt_ms=7.0 db_bytes_per_attempt=4316 scaling_at_64=0.88
    ORM only          RESULT attempts_per_s=95.5 p50_attempt_ms=7.3 p95_attempt_ms=14.6 db_bytes_per_attempt=4330 scaling_at_64=0.85

Over repeated runs this module gave 169-209 attempts/s, the ORM alone 67-120 (the same
conditional UPDATEs through querysets, the claimed rows loaded with ``select_related``, record,
recount and dispatch step by step): the ORM path falls below the 100 attempts/s the campaigns
issue asked for and triples the time an attempt spends around the engine. The endpoint-bound
figure (scaling_at_64) does not depend on it.

An attempt of the golden agent takes a few milliseconds in the engine; the ORM work around it
(query compilation, a six-model select_related, savepoints) and 17 database round trips per
attempt used to cost three times as much. On PostgreSQL an attempt is now two round trips:

* claim + load: ``WITH claimed AS (UPDATE … RETURNING …) SELECT … JOIN …`` returns the claimed
  attempt with its campaign, agent, price sheet, task, suite and domain. Planning that join cost
  ten times its execution, so each database session PREPAREs it once (``_prepare_claim``);
* record + recount + dispatch: four statements sent as one simple-protocol query, which
  PostgreSQL runs as one transaction (``record_in_one_query``).

Elsewhere (SQLite, or inside a caller's transaction) the same conditional statements run one by
one. The conditions are exactly the ORM versions' (claims need a queued attempt of a running
campaign; records need the claiming worker and a running campaign), so idempotency, leases and
cancellation behave as before. Column lists come from the models' ``_meta`` and values go through
the fields' own ``get_db_prep_save`` and the ORM's db converters (``_orm_converters``), so a model
change cannot silently drift.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.db import DatabaseError, ProgrammingError, connections, transaction
from django.db import connection as default_connection
from django.db.backends.signals import connection_created
from django.db.models import Field, Model

from apps.agents.models import AgentConfig, PriceSheet
from apps.attempts.models import Attempt, campaign_model
from apps.attempts.signature_rows import SignatureRow, signature_store_sql
from apps.attempts.summaries import lock_pair_sql, recount_sql, signature_recount_sql
from apps.suites.models import Domain, Suite, Task

# Attempt columns the worker needs (everything else, e.g. the result JSON, stays deferred).
_ATTEMPT_COLUMNS = (
    "id",
    "campaign_id",
    "task_id",
    "index",
    "status",
    "retries",
    "worker",
    "lease_expires_at",
    "dispatched_at",
    "started_at",
    "superseded_runs",  # the record bills them with the new run (usually empty)
)


def _campaign_running() -> str:
    return campaign_model().Status.RUNNING


def _related() -> tuple[tuple[type[Model], str, tuple[str, ...]], ...]:
    """(model, alias, deferred field names): the related rows run_engine_attempt and pricing read."""
    return (
        (campaign_model(), "c", ()),
        (AgentConfig, "ag", ()),
        (PriceSheet, "ps", ()),
        (Task, "t", ("spec",)),  # parsed once per process (the worker caches specs by content hash)
        (Suite, "s", ("description",)),
        (Domain, "d", ("policy",)),
    )


_JOINS = (
    "JOIN {campaign} c ON c.id = claimed.campaign_id "
    "JOIN {agent} ag ON ag.id = c.agent_id "
    "LEFT JOIN {price} ps ON ps.id = c.price_sheet_id "
    "JOIN {task} t ON t.id = claimed.task_id "
    "JOIN {suite} s ON s.id = t.suite_id "
    "JOIN {domain} d ON d.id = t.domain_id"
)


@dataclass
class _Part:
    """One model's slice of the result row: its columns and the converters the ORM would apply."""

    model: type[Model]
    attnames: tuple[str, ...]
    converters: tuple[tuple[int, tuple[Callable, ...], Any], ...]  # (offset in slice, converters, expression)

    def build(self, values: list[Any], db: str, connection) -> Model:
        for offset, converters, expression in self.converters:
            value = values[offset]
            for convert in converters:
                value = convert(value, expression, connection)
            values[offset] = value
        return self.model.from_db(db, self.attnames, values)


@dataclass
class _ClaimPlan:
    claim_sql: str  # PostgreSQL: claim and load in one statement; else: the conditional UPDATE
    load_sql: str  # the SELECT used after the UPDATE on other databases
    parts: list[_Part]
    one_statement: bool


def _quote(connection, name: str) -> str:
    return connection.ops.quote_name(name)


def _column(field: Field) -> str:
    """A concrete field's column (only non-concrete fields, never selected here, have none)."""
    if field.column is None:
        raise TypeError(f"{field} has no column")
    return field.column


def _part(
    model: type[Model], alias: str, deferred: tuple[str, ...], connection, only: tuple[str, ...] | None = None
):
    fields = [
        f
        for f in model._meta.concrete_fields
        if f.name not in deferred and (only is None or f.attname in only)
    ]
    columns = [f"{alias}.{_quote(connection, _column(f))}" for f in fields]
    converters = []
    for offset, field in enumerate(fields):
        expression, found = _orm_converters(field, alias, connection)
        if found:
            converters.append((offset, found, expression))
    return columns, _Part(model, tuple(f.attname for f in fields), tuple(converters))


def _orm_converters(field: Field, alias: str, connection) -> tuple[Any, tuple[Callable, ...]]:
    """The converters the ORM applies to ``field``'s column when it loads a row: (column expression, converters).

    The one use of Django internals here (``Field.get_col``, ``get_db_converters`` of the backend
    and of the column): raw rows need exactly the conversions a queryset applies (JSON decoding,
    aware datetimes, SQLite booleans and decimals), and no public API hands them out.
    tests/attempts/test_attempt_sql.py compares every loaded field with the ORM's own load, so a
    change of these internals fails there.
    """
    expression = field.get_col(alias)
    found = tuple(connection.ops.get_db_converters(expression)) + tuple(
        expression.get_db_converters(connection)
    )
    return expression, found


# Plans depend only on the database (vendor, quoting): one per connection alias, built once.
_PLANS: dict[str, _ClaimPlan] = {}


def _claim_plan(connection) -> _ClaimPlan:
    plan = _PLANS.get(connection.alias)
    if plan is not None:
        return plan
    q = lambda name: _quote(connection, name)  # noqa: E731
    tables = {
        "attempt": q(Attempt._meta.db_table),
        "campaign": q(campaign_model()._meta.db_table),
        "agent": q(AgentConfig._meta.db_table),
        "price": q(PriceSheet._meta.db_table),
        "task": q(Task._meta.db_table),
        "suite": q(Suite._meta.db_table),
        "domain": q(Domain._meta.db_table),
    }
    attempt_columns, attempt_part = _part(Attempt, "claimed", (), connection, only=_ATTEMPT_COLUMNS)
    select_columns, parts = list(attempt_columns), [attempt_part]
    for model, alias, deferred in _related():
        columns, part = _part(model, alias, deferred, connection)
        select_columns += columns
        parts.append(part)
    joins = _JOINS.format(**tables)
    update = (
        f"UPDATE {tables['attempt']} SET {q('status')} = %s, {q('worker')} = %s, {q('started_at')} = %s, "
        f"{q('lease_expires_at')} = %s WHERE {q('id')} = %s AND {q('status')} = %s AND EXISTS (SELECT 1 FROM "
        f"{tables['campaign']} rc WHERE rc.id = {tables['attempt']}.{q('campaign_id')} AND rc.{q('status')} = %s)"
    )
    one_statement = connection.vendor == "postgresql"
    returning = ", ".join(q(f.column) for f in Attempt._meta.concrete_fields if f.attname in _ATTEMPT_COLUMNS)
    plan = _ClaimPlan(
        claim_sql=(
            f"WITH claimed AS ({update} RETURNING {returning}) SELECT {', '.join(select_columns)} FROM claimed {joins}"
            if one_statement
            else update
        ),
        load_sql=f"SELECT {', '.join(select_columns)} FROM {tables['attempt']} claimed {joins} WHERE claimed.id = %s",
        parts=parts,
        one_statement=one_statement,
    )
    _PLANS[connection.alias] = plan
    return plan


def claim_and_load(*, attempt_id: int, worker: str, now, lease_expires_at, connection=None) -> Attempt | None:
    """Claim a queued attempt of a running campaign for ``worker``; the attempt with its related rows, or None.

    The returned attempt carries campaign (with agent and price_sheet) and task (with suite and
    domain) already loaded; its other fields (result, …) are deferred and load on access.
    """
    connection = connection or default_connection
    plan = _claim_plan(connection)
    params = [
        Attempt.Status.RUNNING,
        worker,
        now,
        lease_expires_at,
        attempt_id,
        Attempt.Status.QUEUED,
        _campaign_running(),
    ]
    params = _prep_datetimes(connection, params)
    with connection.cursor() as cursor:
        if plan.one_statement:
            row = _execute_claim(connection, cursor, plan, params)
        else:
            cursor.execute(plan.claim_sql, params)
            if cursor.rowcount != 1:
                return None
            cursor.execute(plan.load_sql, [attempt_id])
            row = cursor.fetchone()
    if row is None:
        return None
    return _build(plan, list(row), connection)


# PostgreSQL plans the seven-relation claim in about a millisecond, ten times what executing it
# takes: each worker connection prepares it once (PREPARE) and then only EXECUTEs it. Where
# prepared statements do not survive between statements (a transaction-pooling proxy), the
# first failure switches this process back to plain statements.
PREPARED_CLAIM = "tb_claim_v1"
_prepared_statements_work = True
# Connection wrappers whose current database session has the claim prepared. A new session
# (Django's connection_created signal) has none, whatever the wrapper's previous one had.
_PREPARED_SESSIONS: weakref.WeakSet = weakref.WeakSet()


def _forget_prepared(sender, connection, **kwargs) -> None:
    _PREPARED_SESSIONS.discard(connection)


connection_created.connect(_forget_prepared, dispatch_uid="tb_attempt_sql_forget_prepared")


def _prepare_claim(connection, cursor, plan: _ClaimPlan) -> bool:
    """PREPARE the claim once per database session; whether prepared statements can be used."""
    global _prepared_statements_work
    if not _prepared_statements_work:
        return False
    wrapper = connections[connection.alias]  # this thread's wrapper (django.db.connection is a proxy)
    if wrapper in _PREPARED_SESSIONS:
        return True
    numbered = plan.claim_sql
    for number in range(1, plan.claim_sql.count("%s") + 1):
        numbered = numbered.replace("%s", f"${number}", 1)
    try:
        cursor.execute(f"PREPARE {PREPARED_CLAIM} AS {numbered}")
    except ProgrammingError:
        if not _is_prepared(cursor):  # not "already exists": prepared statements do not work here
            _prepared_statements_work = False
            return False
    except DatabaseError:
        _prepared_statements_work = False
        return False
    _PREPARED_SESSIONS.add(wrapper)
    return True


def _execute_claim(connection, cursor, plan: _ClaimPlan, params: list[Any]):
    global _prepared_statements_work
    if not _prepared_statements_work or _in_transaction(connection):
        cursor.execute(plan.claim_sql, params)
        return cursor.fetchone()
    if not _prepare_claim(connection, cursor, plan):
        cursor.execute(plan.claim_sql, params)
        return cursor.fetchone()
    try:
        cursor.execute(f"EXECUTE {PREPARED_CLAIM} ({', '.join(['%s'] * len(params))})", params)
    except ProgrammingError:
        if _is_prepared(cursor):
            raise  # a real error of the statement itself
        _prepared_statements_work = False  # prepared on one server session, executed on another
        cursor.execute(plan.claim_sql, params)
    return cursor.fetchone()


def warm_connection(connection=None) -> None:
    """Open the connection and prepare the claim statement (as the first claim would)."""
    connection = connection or default_connection
    plan = _claim_plan(connection)
    if not plan.one_statement:
        return
    with connection.cursor() as cursor:
        _prepare_claim(connection, cursor, plan)


def _is_prepared(cursor) -> bool:
    cursor.execute("SELECT 1 FROM pg_prepared_statements WHERE name = %s", [PREPARED_CLAIM])
    return cursor.fetchone() is not None


def _in_transaction(connection) -> bool:
    """Inside a caller's atomic block (autocommit is off there): its statements must stay its own."""
    return not transaction.get_autocommit(using=connection.alias)


def _prep_datetimes(connection, params: list[Any]) -> list[Any]:
    started_at = Attempt._meta.get_field("started_at")
    return [started_at.get_db_prep_save(p, connection) if isinstance(p, datetime) else p for p in params]


def _build(plan: _ClaimPlan, row: list[Any], connection) -> Attempt:
    db = connection.alias
    objects: list[Any] = []  # the joined rows' model instances, unpacked by position below
    start = 0
    for part in plan.parts:
        width = len(part.attnames)
        values = row[start : start + width]
        start += width
        if part.model is PriceSheet and values[0] is None:  # LEFT JOIN: no price sheet
            objects.append(None)
            continue
        objects.append(part.build(values, db, connection))
    attempt, campaign, agent, sheet, task, suite, domain = objects
    campaign.agent = agent
    campaign.price_sheet = sheet
    domain.suite = suite
    task.suite = suite
    task.domain = domain
    attempt.campaign = campaign
    attempt.task = task
    return attempt


def _owned_update_sql(
    connection, attempt_id: int, worker: str, values: dict[str, Any], require_running_campaign: bool
) -> tuple[str, list[Any]]:
    q = lambda name: _quote(connection, name)  # noqa: E731
    table = q(Attempt._meta.db_table)
    assignments, params = [], []
    for name, value in values.items():
        field = cast(Field, Attempt._meta.get_field(name))  # the row's own columns, no reverse relation
        assignments.append(f"{q(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    sql = f"UPDATE {table} SET {', '.join(assignments)} WHERE {q('id')} = %s AND {q('status')} = %s AND {q('worker')} = %s"
    params += [attempt_id, Attempt.Status.RUNNING, worker]
    if require_running_campaign:
        sql += (
            f" AND EXISTS (SELECT 1 FROM {q(campaign_model()._meta.db_table)} rc "
            f"WHERE rc.id = {table}.{q('campaign_id')} AND rc.{q('status')} = %s)"
        )
        params.append(_campaign_running())
    return sql, params


def update_owned(
    *, attempt_id: int, worker: str, values: dict[str, Any], require_running_campaign: bool, connection=None
) -> bool:
    """Write ``values`` to a running attempt owned by ``worker`` (and of a running campaign); whether it was."""
    connection = connection or default_connection
    sql, params = _owned_update_sql(connection, attempt_id, worker, values, require_running_campaign)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


def extend_leases(*, attempt_ids: list[int], worker: str, until, connection=None) -> set[int]:
    """Set ``lease_expires_at`` of those running attempts still owned by ``worker`` in a running
    campaign, in one statement; the ids it was set on."""
    connection = connection or default_connection
    if not attempt_ids:
        return set()
    q = lambda name: _quote(connection, name)  # noqa: E731
    table = q(Attempt._meta.db_table)
    lease_field = cast(Field, Attempt._meta.get_field("lease_expires_at"))
    marks = ", ".join(["%s"] * len(attempt_ids))
    sql = (
        f"UPDATE {table} SET {q(lease_field.column)} = %s WHERE {q('id')} IN ({marks}) "
        f"AND {q('status')} = %s AND {q('worker')} = %s "
        f"AND EXISTS (SELECT 1 FROM {q(campaign_model()._meta.db_table)} rc "
        f"WHERE rc.id = {table}.{q('campaign_id')} AND rc.{q('status')} = %s) RETURNING {q('id')}"
    )
    params = [lease_field.get_db_prep_save(until, connection), *attempt_ids]
    params += [Attempt.Status.RUNNING, worker, _campaign_running()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


def _dispatch_sql(connection, campaign_id: int, limit: int, now, guard: str = "") -> tuple[str, list[Any]]:
    q = lambda name: _quote(connection, name)  # noqa: E731
    table = q(Attempt._meta.db_table)
    sql = (
        f"UPDATE {table} SET {q('dispatched_at')} = %s WHERE {q('id')} IN ("
        f"SELECT {q('id')} FROM {table} WHERE {q('campaign_id')} = %s AND {q('status')} = %s "
        f"AND {q('dispatched_at')} IS NULL ORDER BY {q('index')}, {q('task_id')} LIMIT %s FOR UPDATE SKIP LOCKED)"
        f"{guard} RETURNING {q('id')}, {q('index')}, {q('task_id')}"
    )
    return sql, [now, campaign_id, Attempt.Status.QUEUED, limit]


def _sorted_ids(rows) -> list[int]:
    return [row[0] for row in sorted(rows, key=lambda r: (r[1], r[2]))]


def mark_dispatched(*, campaign_id: int, limit: int, now, connection=None) -> list[int] | None:
    """PostgreSQL: mark up to ``limit`` undispatched queued attempts dispatched, in (index, task) order.

    One statement (rows locked by a concurrent dispatcher are skipped). None on other databases:
    the caller uses the ORM version.
    """
    connection = connection or default_connection
    if connection.vendor != "postgresql":
        return None
    sql, params = _dispatch_sql(connection, campaign_id, limit, now)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return _sorted_ids(cursor.fetchall())


@dataclass
class OneQueryRecord:
    recorded: bool  # False: not ours any more, or the campaign is no longer running (nothing was written)
    summary_found: bool  # False: the pair had no summary row yet (the caller creates and refreshes it)
    dispatched: list[int]  # attempts marked dispatched; their messages are the caller's to send


def record_in_one_query(
    *,
    attempt: Attempt,
    worker: str,
    values: dict[str, Any],
    now,
    signature: SignatureRow | None = None,
    connection=None,
) -> OneQueryRecord | None:
    """Record an outcome, recount its summary and dispatch the campaign's next attempt: one round trip.

    PostgreSQL outside a transaction only (None otherwise: the caller takes the step by step
    path). The statements (record, the attempt's signature row, summary lock and recount,
    SignatureCount recount, dispatch) travel as one simple-protocol query, which PostgreSQL runs as one
    transaction — each statement with its own snapshot, so the recount, which follows the
    summary row lock, sees every committed attempt of the pair — and rolls back as a whole on
    error. The signature row and the dispatch only change when this worker's record went through
    (their guard reads the row the first statement wrote: same transaction, later statement).
    """
    connection = connection or default_connection
    if connection.vendor != "postgresql" or _in_transaction(connection):
        return None
    q = lambda name: _quote(connection, name)  # noqa: E731
    record_sql, record_params = _owned_update_sql(connection, attempt.id, worker, values, True)
    lock_sql, lock_params = lock_pair_sql(attempt.campaign_id, attempt.task_id)
    recount, recount_params = recount_sql(attempt.campaign_id, attempt.task_id, now)
    table = q(Attempt._meta.db_table)
    guard = (
        f" AND EXISTS (SELECT 1 FROM {table} mine WHERE mine.{q('id')} = %s AND mine.{q('worker')} = %s "
        f"AND mine.{q('status')} = %s AND mine.{q('finished_at')} = %s)"
    )
    dispatch_sql, dispatch_params = _dispatch_sql(connection, attempt.campaign_id, 1, now, guard)
    finished_at = Attempt._meta.get_field("finished_at").get_db_prep_save(values["finished_at"], connection)
    mine = [attempt.id, worker, values["status"], finished_at]
    dispatch_params += mine
    # The signature row (SPEC §8) before the recounts that read it; a no-op unless this record went through.
    stored = signature_store_sql(signature, attempt_id=attempt.id, guard=(guard, mine))
    signature_counts = signature_recount_sql(attempt.campaign_id, attempt.task_id)
    after_record = [*stored, (lock_sql, lock_params), (recount, recount_params), *signature_counts]
    sql = ";\n".join([record_sql, *(s for s, _ in after_record), dispatch_sql])
    params = [*record_params, *(p for _, statement_params in after_record for p in statement_params)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params + dispatch_params)
        recorded = cursor.rowcount == 1
        for _ in stored:
            cursor.nextset()
        cursor.nextset()
        summary_found = cursor.fetchone() is not None
        cursor.nextset()  # the summary recount
        for _ in signature_counts:
            cursor.nextset()
        cursor.nextset()  # the dispatch
        dispatched = _sorted_ids(cursor.fetchall())
    return OneQueryRecord(recorded=recorded, summary_found=summary_found, dispatched=dispatched)
