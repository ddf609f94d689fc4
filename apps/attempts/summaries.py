"""Per-(campaign, task) summaries, recomputed from attempts so they always equal a recount.

Recomputing (rather than incrementing) keeps the summary right whatever happened before: a
re-run attempt, a resume, an attempt recorded twice by a confused worker. It stays cheap because a
pair has at most N attempts and the recount is one statement over the (campaign, task, index) index.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.utils import timezone

from apps.attempts.models import Attempt, AttemptSignature, SignatureCount, TaskSummary

# n_t of SPEC §5: done and judged. An unjudged attempt (a rubric the judge could not answer,
# nothing else failed) is excluded like an infra error and counted apart as coverage (SPEC §2).
_DONE = "status = 'done' AND verdict <> 'unjudged'"
# Summary column -> SQL aggregate over the pair's attempts. Tokens and cost cover every billed
# attempt (infra errors included, SPEC §5), not only finished ones.
_COLUMNS = {
    "n_done": f"COUNT(*) FILTER (WHERE {_DONE})",
    "n_pass": f"COUNT(*) FILTER (WHERE {_DONE} AND verdict = 'pass')",
    "n_infra_error": "COUNT(*) FILTER (WHERE status = 'infra_error')",
    "n_unjudged": "COUNT(*) FILTER (WHERE status = 'done' AND verdict = 'unjudged')",
    "n_cancelled": "COUNT(*) FILTER (WHERE status = 'cancelled')",
    "n_clean_looking": f"COUNT(*) FILTER (WHERE {_DONE} AND clean_looking)",
    "input_tokens": "COALESCE(SUM(input_tokens), 0)",
    "cached_input_tokens": "COALESCE(SUM(cached_input_tokens), 0)",
    "output_tokens": "COALESCE(SUM(output_tokens), 0)",
    "reasoning_tokens": "COALESCE(SUM(reasoning_tokens), 0)",
    "eval_tokens": "COALESCE(SUM(eval_tokens), 0)",
    "agent_cost": "COALESCE(SUM(agent_cost), 0)",
    "eval_cost": "COALESCE(SUM(eval_cost), 0)",
    "unpriced_attempts": "COUNT(*) FILTER (WHERE agent_cost IS NULL AND (input_tokens > 0 OR output_tokens > 0))",
}


def _recount_sql(where: str) -> str:
    summary, attempt = TaskSummary._meta.db_table, Attempt._meta.db_table
    columns = ", ".join(_COLUMNS)
    aggregates = ", ".join(_COLUMNS.values())
    return (
        f"UPDATE {summary} SET ({columns}, updated_at) = ("
        f"SELECT {aggregates}, %s FROM {attempt} a "
        f"WHERE a.campaign_id = {summary}.campaign_id AND a.task_id = {summary}.task_id) "
        f"WHERE {where}"
    )


# SignatureCount column -> SQL aggregate over a pair's signature rows (its failed attempts) of one
# (signature, termination).
_SIGNATURE_COLUMNS = {
    "failures": "COUNT(*)",
    "clean": "COUNT(*) FILTER (WHERE clean_looking)",
    "first_id": "MIN(attempt_id)",
    "last_id": "MAX(attempt_id)",
    "first_clean_id": "MIN(attempt_id) FILTER (WHERE clean_looking)",
    "last_clean_id": "MAX(attempt_id) FILTER (WHERE clean_looking)",
}
_SIGNATURE_KEY = ("campaign_id", "task_id", "signature", "termination")
_SIGNATURE_SOURCE = ("campaign_id", "task_id", "digest", "termination")  # the same, in AttemptSignature


def signature_counts_sql(where: str, params: list, *, with_unsigned: bool = True) -> list[tuple[str, list]]:
    """Recount the SignatureCount rows of the pairs matching ``where`` from their signature rows.

    Two statements: drop the rows, then insert the recount (an upsert, so a concurrent recount of
    the same pair that committed in between is overwritten by this one's newer reading, never a
    unique-constraint error). ``where`` names columns both tables have (campaign_id, task_id) and
    takes ``params``; returns (statement, its params) pairs.
    """
    counts, signatures = SignatureCount._meta.db_table, AttemptSignature._meta.db_table
    attempt = Attempt._meta.db_table
    key, source = ", ".join(_SIGNATURE_KEY), ", ".join(_SIGNATURE_SOURCE)
    columns = ", ".join(_SIGNATURE_COLUMNS)
    aggregates = ", ".join(_SIGNATURE_COLUMNS.values())
    updates = ", ".join(f"{name} = excluded.{name}" for name in _SIGNATURE_COLUMNS)
    rows = f"SELECT attempt_id, {source}, clean_looking FROM {signatures} WHERE {where}"
    if with_unsigned:
        # Failed attempts stored before signatures existed count under the empty signature until
        # the backfill signs them (the grouped view shows them as "not signed yet").
        rows += (
            f" UNION ALL SELECT a.id, a.campaign_id, a.task_id, '', a.termination, a.clean_looking "
            f"FROM {attempt} a WHERE a.status = 'done' AND a.verdict = 'fail' AND {where} "
            f"AND NOT EXISTS (SELECT 1 FROM {signatures} s WHERE s.attempt_id = a.id)"
        )
    return [
        (f"DELETE FROM {counts} WHERE {where}", list(params)),
        (
            f"INSERT INTO {counts} ({key}, {columns}) SELECT {source}, {aggregates} FROM ({rows}) r "
            f"GROUP BY {source} ON CONFLICT ({key}) DO UPDATE SET {updates}",
            list(params) * (2 if with_unsigned else 1),
        ),
    ]


def signature_counts_refresh(*, campaign_ids: list[int], with_unsigned: bool = True) -> None:
    """Recount the SignatureCount rows of these campaigns from their signature rows (after a backfill).

    ``with_unsigned=False`` skips the search for unsigned failed attempts (a backfill that just
    signed every failed attempt of these campaigns knows there are none).
    """
    if not campaign_ids:
        return
    where = f"campaign_id IN ({', '.join(['%s'] * len(campaign_ids))})"
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        for sql, params in signature_counts_sql(where, list(campaign_ids), with_unsigned=with_unsigned):
            cursor.execute(sql, params)


def summaries_create(*, campaign_id: int, task_ids: list[int]) -> None:
    """Zero summaries for a campaign's tasks (missing ones only), so refreshes only ever update."""
    TaskSummary.objects.bulk_create(
        [TaskSummary(campaign_id=campaign_id, task_id=task_id) for task_id in task_ids], ignore_conflicts=True
    )


def summary_refresh(*, campaign_id: int, task_id: int | None = None) -> None:
    """Recompute the summaries of a campaign (or of one of its tasks) from its attempts.

    Side effects: updates TaskSummary rows (creating missing ones). The row lock taken first
    serialises concurrent refreshes of a pair, and the recount statement that follows reads
    after the lock is held, so the last refresh always sees every committed attempt.
    """
    # No savepoint when nested in attempt_record's transaction (two round trips saved).
    with transaction.atomic(savepoint=False):
        if task_id is None:
            # order_by(): Attempt's default ordering would add its columns to the DISTINCT and
            # return one row per attempt (a million for a big import) instead of one per task.
            task_ids = list(
                Attempt.objects.filter(campaign_id=campaign_id)
                .order_by()
                .values_list("task_id", flat=True)
                .distinct()
            )
            summaries_create(campaign_id=campaign_id, task_ids=task_ids)
            where, params = "campaign_id = %s", [campaign_id]
        else:
            if not _lock_pair(campaign_id, task_id):
                summaries_create(campaign_id=campaign_id, task_ids=[task_id])
            where, params = "campaign_id = %s AND task_id = %s", [campaign_id, task_id]
        with connection.cursor() as cursor:
            cursor.execute(_recount_sql(where), [timezone.now(), *params])
            for sql, statement_params in signature_counts_sql(where, params):
                cursor.execute(sql, statement_params)


def lock_pair_sql(campaign_id: int, task_id: int) -> tuple[str, list]:
    """SELECT … FOR UPDATE (where supported) of a pair's summary row."""
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    return f"SELECT id FROM {TaskSummary._meta.db_table} WHERE campaign_id = %s AND task_id = %s{lock}", [
        campaign_id,
        task_id,
    ]


def recount_sql(campaign_id: int, task_id: int, now) -> tuple[str, list]:
    """The recount of one pair; run it after lock_pair_sql, in a later statement of the same transaction."""
    return _recount_sql("campaign_id = %s AND task_id = %s"), [now, campaign_id, task_id]


def signature_recount_sql(campaign_id: int, task_id: int) -> list[tuple[str, list]]:
    """The SignatureCount recount of one pair (statements and params); like recount_sql, after the lock."""
    return signature_counts_sql("campaign_id = %s AND task_id = %s", [campaign_id, task_id])


def _lock_pair(campaign_id: int, task_id: int) -> bool:
    """Lock the pair's summary row; whether it exists."""
    with connection.cursor() as cursor:
        cursor.execute(*lock_pair_sql(campaign_id, task_id))
        return cursor.fetchone() is not None
