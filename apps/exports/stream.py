"""Attempt-level export as CSV or JSONL, streamed: raw rows come from a (server-side) cursor in
chunks and leave as one piece of text per chunk, so memory stays flat however many attempts a
campaign has. The result JSON (transcript, diff, checks) is read only when asked for.

Speed: Django's per-row converters are skipped. Each chunk is turned into columns, every column
that needs it is formatted by one function from apps.exports.cells, and rows are joined by a
'%s' template, all in C loops; the text equals what csv.writer / json would write for ORM values.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from json.encoder import encode_basestring_ascii

from django.db import connections
from django.db.models import QuerySet
from django.db.models.expressions import Col
from django.db.models.sql.constants import LOUTER, MULTI

from apps.attempts.models import Attempt
from apps.attempts.selectors.exports import export_rows
from apps.exports.cells import Column, ColumnCells, csv_cells, fast_driver_types, json_cells

CHUNK_SIZE = 2000
# With the result JSON a row can be megabytes (whole transcripts): fetch fewer at a time.
RESULT_CHUNK_SIZE = 100
CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
# Columns whose values repeat across attempts: their formatted text is remembered (bounded).
REPEATING = frozenset(
    {"task_id", "domain", "status", "termination", "verdict", "categories", "task_hash", "provider"}
)


def attempt_export(queryset: QuerySet[Attempt], *, fmt: str, with_result: bool = False) -> Iterator[str]:
    """The attempts as CSV (header first) or JSON lines, ordered by campaign, task and index, in pieces.

    Nothing is queried until the first piece is asked for.
    """
    if fmt not in CONTENT_TYPES:
        raise ValueError(f"attempt export as {fmt!r}: choose one of {', '.join(CONTENT_TYPES)}")
    names, rows = export_rows(queryset, with_result=with_result)
    return _pieces(rows, names, fmt=fmt, chunk_size=RESULT_CHUNK_SIZE if with_result else CHUNK_SIZE)


def _pieces(rows: QuerySet, names: list[str], *, fmt: str, chunk_size: int) -> Iterator[str]:
    columns, chunks = _raw_chunks(rows, names, chunk_size=chunk_size)
    yield from (_csv_pieces if fmt == "csv" else _jsonl_pieces)(columns, chunks)


def _raw_chunks(
    rows: QuerySet, names: list[str], *, chunk_size: int
) -> tuple[list[Column], Iterator[list[tuple]]]:
    """The columns and the rows exactly as the driver returns them, chunk_size at a time.

    Same cursor as .iterator(chunk_size) (server-side on PostgreSQL unless disabled), without the
    ORM's converters; cells.Column keeps them for the columns that need them.
    """
    connection = connections[rows.db]
    compiler = rows.query.get_compiler(using=rows.db)
    chunked_fetch = not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    with fast_driver_types(connection):
        chunks = compiler.execute_sql(MULTI, chunked_fetch=chunked_fetch, chunk_size=chunk_size)
    expressions = [selected[0] for selected in compiler.select[: compiler.col_count]]
    if len(expressions) != len(names):
        raise AssertionError(f"selected {len(expressions)} columns for {len(names)} names")
    converters = compiler.get_converters(expressions)
    columns = []
    for index, (name, expression) in enumerate(zip(names, expressions)):
        convs = tuple(converters[index][0]) if index in converters else ()
        columns.append(
            Column(
                name,
                expression.output_field,
                _may_be_null(expression, rows.query),
                convs,
                expression,
                connection,
            )
        )
    return columns, chunks


def _may_be_null(expression, query) -> bool:
    """A NULL can arrive from a nullable field or from a column reached through an outer join."""
    if not isinstance(expression, Col):
        return True
    join = query.alias_map.get(expression.alias)
    return expression.target.null or getattr(join, "join_type", None) == LOUTER


def _formatted_rows(chunk: list[tuple], formatters: list[tuple[int, ColumnCells]]) -> Iterator[tuple]:
    """The chunk's rows with the formatted columns replaced: transposed, one map per column, transposed back."""
    columns: list[Iterable] = list(zip(*chunk))
    for index, format_column in formatters:
        columns[index] = format_column(columns[index])
    return zip(*columns)


def _csv_pieces(columns: list[Column], chunks: Iterator[list[tuple]]) -> Iterator[str]:
    """Header, then one piece of CSV lines per chunk (csv.writer's excel dialect: commas, CRLF)."""
    header = io.StringIO()
    csv.writer(header).writerow([column.name for column in columns])
    yield header.getvalue()
    formatters = [
        (index, cells)
        for index, column in enumerate(columns)
        if (cells := csv_cells(column, memoize=column.name in REPEATING)) is not None
    ]
    line = csv.excel.delimiter.join(["%s"] * len(columns)) + csv.excel.lineterminator
    for chunk in chunks:
        yield "".join(map(line.__mod__, _formatted_rows(chunk, formatters)))


def _jsonl_pieces(columns: list[Column], chunks: Iterator[list[tuple]]) -> Iterator[str]:
    """One JSON object per line, keys in column order, one piece per chunk."""
    formatters = [
        (index, cells)
        for index, column in enumerate(columns)
        if (cells := json_cells(column, memoize=column.name in REPEATING)) is not None
    ]
    line = "{" + ",".join(f"{encode_basestring_ascii(column.name)}:%s" for column in columns) + "}"
    for chunk in chunks:
        yield "\n".join(map(line.__mod__, _formatted_rows(chunk, formatters))) + "\n"
