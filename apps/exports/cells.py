"""Raw database values -> CSV cells and JSON text, one column of a fetched chunk at a time.

The attempt export reads rows without Django's per-row converters (JSON decoding, SQLite's Decimal
quantize, datetime make_aware) because most of that work is undone again by the writer. Each column
gets one function, chosen once per export, that turns the value the database driver returned into
exactly the text the ORM value would have become:

- columns the ORM passes through untouched (ints, floats, text, PostgreSQL bools, Decimals and
  datetimes) are formatted by their type;
- columns with converters run the ORM's own converters first, except for raw types where the
  result is known without them (SQLite bools, naive SQLite datetimes);
- columns whose values repeat (categories, task ids, status) remember their formatted text.

The texts are what the export has always written for ORM values. CSV (csv.writer): None as an
empty cell, JSON columns compact with sorted keys, Decimals in plain notation (format 'f', never
0E-8), datetimes in ISO 8601, text that starts like a formula prefixed with an apostrophe.
JSON lines (json.JSONEncoder(separators=(",", ":"))): JSON columns compact in stored key order,
Decimals as numbers, datetimes as ISO 8601 strings, non-ASCII escaped.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from json.encoder import encode_basestring_ascii
from typing import Any

from django.conf import settings

from apps.exports.formulas import csv_text

MEMO_LIMIT = 10_000
INTEGER_TYPES = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "SmallAutoField",
        "IntegerField",
        "BigIntegerField",
        "SmallIntegerField",
        "PositiveIntegerField",
        "PositiveBigIntegerField",
        "PositiveSmallIntegerField",
    }
)
TEXT_TYPES = frozenset({"CharField", "TextField", "SlugField", "EmailField", "URLField"})
JSON_BOOLEANS = {True: "true", False: "false", None: "null"}
JSON_NON_FINITE = {
    "nan": "NaN",
    "inf": "Infinity",
    "-inf": "-Infinity",
}  # float repr -> what json writes (allow_nan)

Cell = Callable[[Any], Any]
ColumnCells = Callable[[Iterable], Iterable]  # a column of raw values -> its cells, in order


@dataclass(frozen=True)
class Column:
    """One selected column: its model field, whether a row may hold NULL there, and the ORM's converters."""

    name: str
    field: Any
    nullable: bool
    converters: tuple[Callable, ...]
    expression: Any
    connection: Any

    @property
    def kind(self) -> str:
        return self.field.get_internal_type()


@contextmanager
def fast_driver_types(connection) -> Iterator[None]:
    """Around executing the export's query: let the driver load what it can load faster.

    PostgreSQL: Django loads timestamptz with a pure-Python subclass of psycopg's loader (to set
    the tzinfo object), several times slower than psycopg's C loader. Both read the same wall
    time in the session's time zone, and Django keeps the session in its own zone, so when the two
    agree the C loader's datetimes give the same isoformat(); only this query's cursor uses it.
    """
    if connection.vendor != "postgresql" or not settings.USE_TZ:
        yield
        return
    from psycopg.types.datetime import TimestamptzLoader  # noqa: PLC0415 — PostgreSQL only: a SQLite deployment never loads the psycopg driver

    def native_timestamptz(execute, sql, params, many, context):
        cursor = context["cursor"].cursor  # psycopg's cursor under Django's wrapper
        if cursor.connection.info.parameter_status("TimeZone") == connection.timezone_name:
            cursor.adapters.register_loader(
                "timestamptz", TimestamptzLoader
            )  # psycopg swaps in its C version
        return execute(sql, params, many, context)

    with connection.execute_wrapper(native_timestamptz):
        yield


class BoundedMemo(dict):
    """raw value -> formatted text, for columns whose values repeat; stops remembering at MEMO_LIMIT
    entries so memory stays bounded whatever the data (a miss just formats again)."""

    def __init__(self, format_value: Cell):
        super().__init__()
        self.format_value = format_value

    def __missing__(self, value):
        text = self.format_value(value)
        if len(self) < MEMO_LIMIT:
            self[value] = text
        return text


def _same(value):
    return value


class _CsvQuoter:
    """text -> one CSV cell, quoted exactly as csv.writer quotes it (it writes the cell itself)."""

    suffix = csv.excel.delimiter + csv.excel.lineterminator

    def __init__(self):
        self.buffer = io.StringIO()
        # A second, empty cell keeps csv.writer from quoting a lone empty string.
        self.write = csv.writer(self.buffer).writerow

    def __call__(self, value) -> str:
        self.buffer.seek(0)
        self.buffer.truncate()
        self.write((value, None))
        return self.buffer.getvalue()[: -len(self.suffix)]


def _json_float(value: float) -> str:
    text = float.__repr__(value)
    return JSON_NON_FINITE.get(text, text)


def _json_decimal(value: Decimal) -> str:
    text = float.__repr__(float(value))
    return JSON_NON_FINITE.get(text, text)


def _json_floats(values: Iterable) -> Iterable[str]:
    texts = list(map(float.__repr__, values))
    return map(JSON_NON_FINITE.get, texts, texts)  # dict.get(text, text): only nan and infinities change


_json_sorted = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def _json_plain(value):
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


_json_line_value = json.JSONEncoder(separators=(",", ":"), default=_json_plain).encode


def _csv_of_orm(kind: str) -> Cell:
    """ORM value (not None) -> CSV cell, as csv.writer writes it after the export's own conversions."""
    quote = _CsvQuoter()
    if kind == "JSONField":
        return lambda value: quote(_json_sorted(value))
    if kind == "DateTimeField":
        return datetime.isoformat
    if kind == "DecimalField":
        return plain_decimal
    # csv.writer turns anything else into text itself (repr for floats); text that a spreadsheet
    # would run as a formula is made inert first (apps.exports.formulas).
    return lambda value: quote(csv_text(value))


def plain_decimal(value: Decimal) -> str:
    """A Decimal in plain notation: 0.00000000, never str()'s 0E-8."""
    return format(value, "f")


def _json_of_orm(kind: str) -> Cell:
    """ORM value (not None) -> JSON text, as the JSON encoder writes it."""
    if kind == "DateTimeField":
        return lambda value: encode_basestring_ascii(value.isoformat())
    if kind == "DecimalField":
        return _json_decimal
    return _json_line_value


def _raw_cell(column: Column, format_orm: Cell, empty: str, iso_text: Cell) -> Cell:
    """raw (not None) -> text: the ORM's converters, then `format_orm`; `empty` when the ORM value
    is None (a JSON null, an unparseable date). One closure per column, no per-value dispatch.
    `iso_text` writes a datetime's ISO text (the SQLite fast path builds that text itself)."""
    converters, expression, connection = column.converters, column.expression, column.connection
    if not converters:
        return format_orm
    if len(converters) == 1:
        (convert,) = converters

        def converted(value):
            value = convert(value, expression, connection)
            return empty if value is None else format_orm(value)

    else:

        def converted(value):
            for convert in converters:
                value = convert(value, expression, connection)
            return empty if value is None else format_orm(value)

    if _only_converter_is(column, "sqlite", "convert_datetimefield_value") and settings.USE_TZ:
        return _sqlite_datetime(connection.timezone, converted, iso_text)
    return converted


def _only_converter_is(column: Column, vendor: str, name: str) -> bool:
    """True when the column's one converter is the backend's `name` (not a custom field's own)."""
    return column.connection.vendor == vendor and column.converters == (
        getattr(column.connection.ops, name, None),
    )


def _sqlite_datetime(tz, converted: Cell, iso_text: Cell) -> Cell:
    """SQLite's driver already parses declared datetime columns to naive datetimes (Django registers
    the parser) and the ORM only attaches the connection's time zone. With a fixed-offset zone (UTC
    unless DATABASES sets TIME_ZONE) that is the same ISO suffix on every value, and a naive
    isoformat() plus the suffix is a third of the cost of replace(tzinfo=…).isoformat()."""
    if not isinstance(tz, timezone):
        return converted
    suffix = datetime(2000, 1, 1, tzinfo=tz).isoformat()[len("2000-01-01T00:00:00") :]

    def sqlite_datetime(value):
        if value.__class__ is datetime and value.tzinfo is None:
            return iso_text(value.isoformat() + suffix)
        return converted(value)

    return sqlite_datetime


def _column_of(cell: Cell, empty: str, *, memoize: bool) -> ColumnCells:
    """Apply `cell` to a column of raw values; NULLs become `empty` without a call (most costs and
    datetimes of unfinished attempts are NULL)."""
    if memoize:
        memo = BoundedMemo(lambda value: empty if value is None else cell(value))
        return lambda values: map(memo.__getitem__, values)
    return lambda values: [empty if value is None else cell(value) for value in values]


def _passes_through(column: Column, types: frozenset[str]) -> bool:
    """True when the raw value is the ORM value and the row template writes it as is."""
    if column.nullable:
        return False
    if column.kind == "BooleanField" and _only_converter_is(column, "sqlite", "convert_booleanfield_value"):
        # SQLite's driver already returns bool for declared bool columns (Django registers b"1".__eq__),
        # so the ORM's convert_booleanfield_value returns the same value.
        return "BooleanField" in types
    return not column.converters and column.kind in types


def csv_cells(column: Column, *, memoize: bool) -> ColumnCells | None:
    """raw column -> CSV cells, or None when the raw values can be written as they are."""
    if _passes_through(column, INTEGER_TYPES | {"FloatField", "BooleanField"}):
        return None  # '%s' writes ints and bools as str() and floats as repr(), as csv.writer does
    return _column_of(_raw_cell(column, _csv_of_orm(column.kind), "", _same), "", memoize=memoize)


def json_cells(column: Column, *, memoize: bool) -> ColumnCells | None:
    """raw column -> JSON texts, or None when the raw values can be written as they are."""
    if _passes_through(column, INTEGER_TYPES):
        return None  # '%s' writes ints as the JSON encoder does
    if _passes_through(column, frozenset({"FloatField"})):
        return _json_floats
    for kinds, cell in (
        (frozenset({"BooleanField"}), JSON_BOOLEANS.__getitem__),
        (TEXT_TYPES, encode_basestring_ascii),
    ):
        if _passes_through(column, kinds):
            return lambda values: map(cell, values)
    return _column_of(
        _raw_cell(column, _json_of_orm(column.kind), "null", encode_basestring_ascii), "null", memoize=memoize
    )
