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

Formats match what csv.writer and json.JSONEncoder(separators=(",", ":")) make of ORM values:
CSV writes None as an empty cell, JSON lists sorted by key, Decimals via str() and datetimes in
ISO 8601; JSON keeps key order and writes Decimals as numbers.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from json.encoder import encode_basestring_ascii
from typing import Any, Callable, Iterable

from django.conf import settings

MEMO_LIMIT = 10_000
INTEGER_TYPES = frozenset({"AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField", "SmallIntegerField",
                           "PositiveIntegerField", "PositiveBigIntegerField", "PositiveSmallIntegerField"})  # fmt: skip
TEXT_TYPES = frozenset({"CharField", "TextField", "SlugField", "EmailField", "URLField"})
JSON_BOOLEANS = {True: "true", False: "false", None: "null"}
JSON_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}  # float repr -> what json writes (allow_nan)

Cell = Callable[[Any], Any]
ColumnCells = Callable[[tuple], Iterable]  # a column of raw values -> its cells, in order


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

    def orm_value(self) -> Cell:
        """raw -> the value .values_list() would have returned (the ORM's converters in order)."""
        converters, expression, connection = self.converters, self.expression, self.connection
        if not converters:
            return _same
        if len(converters) == 1:
            (convert,) = converters
            return lambda value: convert(value, expression, connection)

        def convert_all(value):
            for convert in converters:
                value = convert(value, expression, connection)
            return value

        return convert_all


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
        return str
    return quote  # csv.writer turns anything else into text itself (repr for floats)


def _json_of_orm(kind: str) -> Cell:
    """ORM value (not None) -> JSON text, as the JSON encoder writes it."""
    if kind == "DateTimeField":
        return lambda value: encode_basestring_ascii(value.isoformat())
    if kind == "DecimalField":
        return lambda value: _json_float(float(value))
    return _json_line_value


def _orm_value_fast(column: Column) -> Cell:
    """raw -> ORM value, skipping converters whose result is known from the raw type on this backend."""
    orm_value = column.orm_value()
    vendor = column.connection.vendor
    if vendor == "sqlite" and column.kind == "DateTimeField" and settings.USE_TZ:
        # SQLite's driver parses declared datetime columns to naive datetimes (Django registers the
        # parser); the ORM then only attaches the connection's time zone.
        tz = column.connection.timezone

        def aware(value):
            if value.__class__ is datetime and value.tzinfo is None:
                return value.replace(tzinfo=tz)
            return orm_value(value)

        return aware
    return orm_value


def _with_none(format_orm: Cell, orm_value: Cell, empty: str) -> Cell:
    """raw (not None) -> text; `empty` when the ORM value is None (a JSON null, a failed parse)."""
    if orm_value is _same:
        return format_orm

    def cell(value):
        value = orm_value(value)
        return empty if value is None else format_orm(value)

    return cell


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
    if column.kind == "BooleanField" and column.connection.vendor == "sqlite":
        # SQLite's driver already returns bool for declared bool columns (Django registers b"1".__eq__),
        # so the ORM's convert_booleanfield_value returns the same value.
        return "BooleanField" in types
    return not column.converters and column.kind in types


def csv_cells(column: Column, *, memoize: bool) -> ColumnCells | None:
    """raw column -> CSV cells, or None when the raw values can be written as they are."""
    if _passes_through(column, INTEGER_TYPES | {"FloatField", "BooleanField"}):
        return None  # '%s' writes ints and bools as str() and floats as repr(), as csv.writer does
    return _column_of(_with_none(_csv_of_orm(column.kind), _orm_value_fast(column), ""), "", memoize=memoize)


def json_cells(column: Column, *, memoize: bool) -> ColumnCells | None:
    """raw column -> JSON texts, or None when the raw values can be written as they are."""
    if _passes_through(column, INTEGER_TYPES):
        return None  # '%s' writes ints as the JSON encoder does
    for kinds, cell in ((frozenset({"BooleanField"}), JSON_BOOLEANS.__getitem__), (frozenset({"FloatField"}), _json_float),
                        (TEXT_TYPES, encode_basestring_ascii)):  # fmt: skip
        if _passes_through(column, kinds):
            return lambda values: map(cell, values)
    return _column_of(_with_none(_json_of_orm(column.kind), _orm_value_fast(column), "null"), "null", memoize=memoize)
