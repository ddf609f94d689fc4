"""Reads a re-grade (apps.regrade) needs of the attempt record: stored results and gradings."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Sum

from apps.attempts.models import Attempt, TaskSummary

# What grading decided, as stored in the result (the rest of it — transcript, effects — is the
# attempt's behaviour, which a re-grade never changes).
GRADING_KEYS = ("verdict", "categories", "clean_looking", "diff", "checks", "rubrics", "task_hash")


@dataclass(frozen=True)
class StoredAttempt:
    id: int
    campaign_id: int
    task_id: int
    status: str
    verdict: str
    result: dict[str, Any]


def attempts_to_regrade(
    *,
    campaign_ids: list[int],
    task_ids: list[int] | None = None,
    with_messages: bool = False,
    chunk_size: int = 2000,
) -> Iterator[StoredAttempt]:
    """Every attempt of the campaigns with what a re-grade reads of its result, task by task.

    ``result`` holds the grading keys, ``termination``, ``effects``, the S0 digest
    (``extra.initial_digest``), a ThinkingBox attempt's state record (``extra.thinkingbox.state_record``) and the transcript's tool calls (name, read_only,
    error: all the verdict reads of them); the messages only ``with_messages``
    (a judge answering a new rubric reads the final reply). On PostgreSQL the projection is made by
    the database, so the rest of each stored result (tool results, messages) never leaves it.
    ``task_ids``: only the attempts of these tasks.
    """
    if connection.vendor == "postgresql" and not with_messages:
        yield from _projected_postgres(campaign_ids, task_ids, chunk_size)
        return
    attempts = Attempt.objects.filter(campaign_id__in=campaign_ids)
    if task_ids is not None:
        attempts = attempts.filter(task_id__in=task_ids)
    rows = attempts.order_by("task_id", "campaign_id", "index").values_list(
        "pk", "campaign_id", "task_id", "status", "verdict", "result"
    )
    for pk, campaign_id, task_id, status, verdict, result in rows.iterator(chunk_size=chunk_size):
        yield StoredAttempt(pk, campaign_id, task_id, status, verdict, result or {})


_PROJECTED_KEYS = ("termination", "effects", *GRADING_KEYS)
_PROJECTION_SQL = (
    "SELECT a.id, a.campaign_id, a.task_id, a.status, a.verdict, "
    + ", ".join(f"a.result -> '{key}'" for key in _PROJECTED_KEYS)
    + ", a.result -> 'extra' -> 'initial_digest', a.result -> 'extra' -> 'thinkingbox' -> 'state_record'"
    + ", (SELECT jsonb_agg(jsonb_build_object('name', c -> 'name', 'read_only', c -> 'read_only',"
    " 'error', c -> 'error')) FROM jsonb_array_elements("
    " CASE jsonb_typeof(a.result -> 'transcript' -> 'tool_calls') WHEN 'array'"
    " THEN a.result -> 'transcript' -> 'tool_calls' ELSE '[]'::jsonb END) c)"
    f" FROM {Attempt._meta.db_table} a WHERE a.campaign_id = ANY(%s) AND (%s::bigint[] IS NULL OR a.task_id = ANY(%s))"
    " ORDER BY a.task_id, a.campaign_id, a.index"
)


def _json(value: Any) -> Any:
    """A jsonb value as Python (Django's psycopg setup may hand jsonb over as text)."""
    return json.loads(value) if isinstance(value, str) else value


def _projected_postgres(
    campaign_ids: list[int], task_ids: list[int] | None, chunk_size: int
) -> Iterator[StoredAttempt]:
    with transaction.atomic(), connection.cursor() as cursor:
        # A named (server-side) cursor: the rows stream in chunks instead of arriving all at once.
        with connection.connection.cursor(name="attempts_to_regrade") as stream:
            stream.itersize = chunk_size
            stream.execute(_PROJECTION_SQL, [list(campaign_ids), task_ids, task_ids])
            for row in stream:
                (
                    pk,
                    campaign_id,
                    task_id,
                    status,
                    verdict,
                    *values,
                    initial_digest,
                    state_record,
                    tool_calls,
                ) = row
                result = {key: _json(value) for key, value in zip(_PROJECTED_KEYS, values, strict=True)}
                extra: dict[str, Any] = {}
                if initial_digest is not None:  # which S0 the attempt ran against
                    extra["initial_digest"] = _json(initial_digest)
                if (
                    state_record is not None
                ):  # a ThinkingBox attempt's raw SR record (thinkingbox.state_record)
                    extra["thinkingbox"] = {"state_record": _json(state_record)}
                if extra:
                    result["extra"] = extra
                tool_calls = _json(tool_calls)
                result["status"] = status
                result["transcript"] = {"tool_calls": tool_calls or []}
                yield StoredAttempt(pk, campaign_id, task_id, status, verdict, result)
        del cursor


def attempt_gradings(*, attempt_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The grading each attempt carries now (GRADING_KEYS of its result), by attempt id."""
    found: dict[int, dict[str, Any]] = {}
    ids = list(attempt_ids)
    for start in range(0, len(ids), 2000):
        rows = Attempt.objects.filter(pk__in=ids[start : start + 2000]).values_list("pk", "verdict", "result")
        for pk, verdict, result in rows:
            grading = {key: (result or {}).get(key) for key in GRADING_KEYS}
            grading["verdict"] = verdict
            found[pk] = grading
    return found


def campaign_agent_costs(*, campaign_ids: list[int]) -> dict[int, float | None]:
    """Each campaign's billed agent cost (None when nothing of it is priced)."""
    rows = (
        TaskSummary.objects.filter(campaign_id__in=campaign_ids)
        .values("campaign_id")
        .annotate(cost=Sum("agent_cost"), unpriced=Sum("unpriced_attempts"), judged=Sum("n_done"))
    )
    costs: dict[int, float | None] = dict.fromkeys(campaign_ids)
    for row in rows:
        cost = row["cost"] or Decimal(0)
        unpriced_only = not cost and (row["unpriced"] or 0) > 0
        costs[row["campaign_id"]] = None if unpriced_only else float(cost)
    return costs
