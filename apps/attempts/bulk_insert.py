"""New Attempt rows in bulk without the ORM: COPY on PostgreSQL, one executemany elsewhere.

A million-row ``tb infer`` import spent about half its time in ``bulk_create`` (every column of
every row prepared field by field, then quoted into SQL text). Here each column's conversion is chosen once,
the ids are reserved first (so signature rows can point at the attempts without reading them back)
and the rows go in as one COPY. It runs in the caller's transaction: a later failure rolls the
rows back like any other write.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from django.db import connection, models

from apps.attempts.models import Attempt
from apps.core.text import without_nul

# Columns whose Python value the driver cannot take as it is (Django adapts them per backend).
_ADAPTED = {"DateTimeField", "DateField", "TimeField", "DecimalField", "DurationField", "UUIDField"}


def _fields() -> list[models.Field]:
    return [f for f in Attempt._meta.concrete_fields if not f.primary_key]


class JsonText(str):
    """A JSON column's value already encoded (``encoded_json``): written as it is."""

    __slots__ = ()


def encoded_json(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with each JSON column's value encoded as JsonText, NUL characters shown as ␀.

    Lets the encoding happen where the row is made (another process, in a parallel import) and
    travel as one string instead of a nested structure. The values may still hold NULs
    (``AttemptOutcome.as_fields(json_nul_shown=False)``): PostgreSQL refuses them, and finding
    them in the encoded text saves walking the value first.
    """
    json_fields = _json_fields()
    encoded = {}
    for name, value in fields.items():
        if name in json_fields:
            encoder = json_fields[name].encoder
            text = json.dumps(value, cls=encoder)
            if "\\u0000" in text:
                text = json.dumps(without_nul(value), cls=encoder)
            value = JsonText(text)
        encoded[name] = value
    return encoded


@functools.cache
def _json_fields() -> dict[str, models.JSONField]:
    return {f.name: f for f in _fields() if isinstance(f, models.JSONField)}


def _converter(field: models.Field) -> Callable[[Any], Any] | None:
    if isinstance(field, models.JSONField):
        encoder = field.encoder
        # Text both backends parse as the column's JSON (jsonb on PostgreSQL, text on SQLite).
        return lambda value: str(value) if isinstance(value, JsonText) else json.dumps(value, cls=encoder)
    if field.get_internal_type() in _ADAPTED:
        return _last_value_kept(lambda value: field.get_db_prep_save(value, connection))
    return None


def _last_value_kept(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``convert`` that reuses its last answer for the same value: an import's rows share their
    time stamps and empty costs, and Django's adaptation of each was a tenth of the insert's time."""
    last: list[Any] = [object(), None]

    def converted(value: Any) -> Any:
        if value is not last[0]:
            last[:] = [value, convert(value)]
        return last[1]

    return converted


def _reserve_ids(count: int) -> list[int]:
    """``count`` new primary keys, taken before the rows are written."""
    table = Attempt._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [table, count]
            )
            return [row[0] for row in cursor.fetchall()]
        # SQLite lets one writer in at a time and the caller's transaction already wrote (the
        # campaign row), so nobody else can take these ids; sqlite_sequence keeps AUTOINCREMENT's
        # promise never to hand out a deleted row's id again.
        cursor.execute(
            f"SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = %s), 0), "
            f"COALESCE((SELECT MAX(id) FROM {table}), 0))",
            [table],
        )
        start = cursor.fetchone()[0]
    return list(range(start + 1, start + count + 1))


# SQLite's page cache during a bulk import, in KiB (a negative cache_size is KiB). The default 2 MB
# cannot hold the pages of the attempt table's indexes once they pass a few hundred thousand rows,
# so every batch reads them back: bench/import_tb_results.py, 1e6 rows on SQLite, 2 cores, quiet
# machine: 4,185 rows/s at peak RSS 321 MB with the default, 5,043 rows/s at 391 MB with this.
# Set on the importing connection only: the web tier's threads keep the small default.
SQLITE_IMPORT_CACHE_KIB = 65536


@contextlib.contextmanager
def bulk_import_cache() -> Iterator[None]:
    """On SQLite, a larger page cache for this connection while the block runs; elsewhere nothing."""
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA cache_size")
        before = cursor.fetchone()[0]
        cursor.execute(f"PRAGMA cache_size = -{SQLITE_IMPORT_CACHE_KIB}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA cache_size = {int(before)}")


def attempt_rows_insert(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Insert new attempts given as {field attname (``campaign_id``, ``task_id``, ``status``…): value}
    (others take their defaults); returns their ids in order.

    Must run inside a transaction (``transaction.atomic``), the caller's, which keeps it
    all-or-nothing. Side effects: one campaigns_attempt row per mapping.
    """
    if not rows:
        return []
    if not connection.in_atomic_block:
        raise RuntimeError("attempt_rows_insert must run inside transaction.atomic()")
    fields = _fields()
    known = {f.attname for f in fields}
    unknown = sorted({key for row in rows for key in row} - known)
    if unknown:
        raise ValueError(f"attempt_rows_insert: not Attempt columns: {', '.join(unknown)}")
    # (attname, conversion or None when the driver takes the value as it is, default)
    plan = [(f.attname, _converter(f), f.get_default()) for f in fields]
    ids = _reserve_ids(len(rows))
    values = (
        [
            pk,
            *(
                row.get(attname, default) if convert is None else convert(row.get(attname, default))
                for attname, convert, default in plan
            ),
        ]
        for pk, row in zip(ids, rows, strict=True)
    )
    table = connection.ops.quote_name(Attempt._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in ["id", *(f.column or f.name for f in fields)])
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The driver's own cursor: Django's wrapper has no copy(); the statement runs in the
            # connection's open transaction all the same.
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in values:
                    copy.write_row(row)
        else:
            marks = ", ".join(["%s"] * (len(fields) + 1))
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(values))
    return ids
