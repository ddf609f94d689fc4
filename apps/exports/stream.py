"""Attempt-level export as CSV or JSONL, streamed: rows come from .values_list().iterator(chunk_size)
and leave in batches, so memory stays flat however many attempts a campaign has. The result JSON
(transcript, diff, checks) is read only when asked for."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime
from decimal import Decimal
from typing import Callable, Iterable, Iterator

from django.db.models import QuerySet

from apps.campaigns.models import Attempt

CHUNK_SIZE = 2000
# (output name, ORM path) in column order.
FIELDS: tuple[tuple[str, str], ...] = (
    ("attempt_id", "id"), ("campaign_id", "campaign_id"), ("task_id", "task__task_id"), ("domain", "task__domain__name"),
    ("index", "index"), ("status", "status"), ("termination", "termination"), ("verdict", "verdict"),
    ("categories", "categories"), ("clean_looking", "clean_looking"), ("input_tokens", "input_tokens"),
    ("cached_input_tokens", "cached_input_tokens"), ("output_tokens", "output_tokens"), ("reasoning_tokens", "reasoning_tokens"),
    ("eval_tokens", "eval_tokens"), ("agent_cost", "agent_cost"), ("eval_cost", "eval_cost"), ("tool_calls", "tool_calls"),
    ("diff_items", "diff_items"), ("duration_ms", "duration_ms"), ("retries", "retries"), ("task_hash", "task_hash"),
    ("started_at", "started_at"), ("finished_at", "finished_at"),
)  # fmt: skip


def attempt_rows(queryset: QuerySet[Attempt], *, with_result: bool = False) -> tuple[list[str], Iterator[tuple]]:
    """Column names and a server-side iterator of value tuples (result JSON only if `with_result`)."""
    names = [name for name, _ in FIELDS] + (["result"] if with_result else [])
    paths = [path for _, path in FIELDS] + (["result"] if with_result else [])
    rows = queryset.order_by("campaign_id", "task_id", "index").values_list(*paths).iterator(chunk_size=CHUNK_SIZE)
    return names, rows


def _json_text(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _csv_converters(names: list[str]) -> list[tuple[int, Callable]]:
    """(column, converter) for the columns csv.writer cannot write as they come.

    Chosen once per export instead of type-testing every value: ints, floats, bools and strings
    are written as they are, and csv.writer already writes None as an empty cell.
    """
    by_name = {"categories": _json_text, "result": _json_text, "agent_cost": str, "eval_cost": str,
               "started_at": datetime.isoformat, "finished_at": datetime.isoformat}  # fmt: skip
    return [(index, by_name[name]) for index, name in enumerate(names) if name in by_name]


def stream_csv(names: list[str], rows: Iterable[tuple], *, batch: int = 1000) -> Iterator[str]:
    """Header, then CSV lines joined into batches of `batch` rows (one yield per batch)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(names)
    converters = _csv_converters(names)
    count = 0
    for row in rows:
        row = list(row)
        for index, convert in converters:
            if row[index] is not None:
                row[index] = convert(row[index])
        writer.writerow(row)
        count += 1
        if count % batch == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _json_value(value):
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def stream_jsonl(names: list[str], rows: Iterable[tuple], *, batch: int = 1000) -> Iterator[str]:
    """One JSON object per line, in batches of `batch` lines."""
    encode = json.JSONEncoder(separators=(",", ":"), default=_json_value).encode
    lines: list[str] = []
    for row in rows:
        lines.append(encode(dict(zip(names, row))))
        if len(lines) == batch:
            yield "\n".join(lines) + "\n"
            lines = []
    if lines:
        yield "\n".join(lines) + "\n"
