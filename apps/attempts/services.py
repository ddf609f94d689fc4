"""Writes of the attempt record: the only code that writes the attempt, signature and count tables.

One attempt on a worker (claim, heartbeat, record) reads top to bottom in apps.attempts.recording,
with its raw-SQL PostgreSQL path in apps.attempts.attempt_sql; this module is the app's front
door for them and holds the writes the campaigns app asks for on a campaign's attempts (queue,
add, cancel, re-queue, import) and the housekeeping (sweep, lost messages, signature backfill).
Nothing here changes a campaign row: what follows for the campaign is the caller's.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import socket
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import reset_queries, transaction
from django.db.models import F
from django.utils import timezone

from apps.attempts.bulk_insert import attempt_rows_insert, bulk_import_cache, encoded_json
from apps.attempts.dispatch import RUN_ATTEMPT_TASK, attempts_dispatch
from apps.attempts.models import Attempt
from apps.attempts.outcomes import USAGE_FIELDS, AttemptOutcome, last_run, superseded_run
from apps.attempts.process_rows import ProcessBackfill, backfill_process_rows
from apps.attempts.recording import (
    Recorded,
    attempt_claim,
    attempt_claim_prepare,
    attempt_heartbeat,
    attempt_record,
    attempts_heartbeat,
)
from apps.attempts.regrading import GradingChange, gradings_apply
from apps.attempts.signature_rows import SignatureRow, signatures_store
from apps.attempts.signatures import BackfillReport, backfill_signatures
from apps.attempts.summaries import summaries_create, summary_refresh
from apps.suites.models import Task
from tb_engine.process import ProcessReport
from tb_engine.results import AttemptResult

__all__ = [
    "GradingChange",
    "gradings_apply",
    "RUN_ATTEMPT_TASK",
    "AttemptOutcome",
    "BackfillReport",
    "Recorded",
    "SweepReport",
    "attempt_claim",
    "attempt_claim_prepare",
    "attempt_heartbeat",
    "attempts_heartbeat",
    "attempt_record",
    "attempts_add",
    "attempts_backfill_signatures",
    "attempts_cancel_queued",
    "attempts_dispatch",
    "attempts_import",
    "attempts_queue",
    "attempts_requeue_unfinished",
    "attempts_resend_lost",
    "attempts_sweep",
    "summary_refresh",
    "worker_identity",
]


def worker_identity() -> str:
    """hostname:pid — lets a restarted worker on the same host recognise its dead predecessors."""
    return f"{socket.gethostname()}:{os.getpid()}"


# --- A campaign's attempts ------------------------------------------------------------------------


def attempts_queue(*, campaign_id: int, task_ids: list[int], n_attempts: int) -> int:
    """Create the missing queued attempts (task, index < n_attempts) of a campaign and its zero summaries.

    Side effects: Attempt rows (queued), one TaskSummary per task (missing ones only). Returns the
    number of attempts created. Safe to call twice.
    """
    existing = set(Attempt.objects.filter(campaign_id=campaign_id).values_list("task_id", "index"))
    new = [
        Attempt(campaign_id=campaign_id, task_id=task_id, index=index)
        for index in range(n_attempts)
        for task_id in task_ids
        if (task_id, index) not in existing
    ]
    Attempt.objects.bulk_create(new, batch_size=2000)
    summaries_create(campaign_id=campaign_id, task_ids=task_ids)
    return len(new)


def attempts_add(*, campaign_id: int, add: dict[int, tuple[int, int]]) -> None:
    """Queue more attempts of a campaign: task id -> (first new index, how many). Side effects: Attempt rows."""
    Attempt.objects.bulk_create(
        [
            Attempt(campaign_id=campaign_id, task_id=task_id, index=first + k)
            for task_id, (first, count) in sorted(add.items())
            for k in range(count)
        ]
    )


def attempts_cancel_queued(*, campaign_id: int) -> int:
    """Queued attempts of the campaign become cancelled now (running ones end cancelled when they record).

    Side effects: those Attempt rows. Returns how many were cancelled.
    """
    return Attempt.objects.filter(campaign_id=campaign_id, status=Attempt.Status.QUEUED).update(
        status=Attempt.Status.CANCELLED, finished_at=timezone.now()
    )


def attempts_requeue_unfinished(*, campaign_id: int) -> int:
    """Re-queue every attempt of the campaign that did not finish (cancelled or infra_error).

    Side effects: each run that had usage is kept as a superseded run (still billed); the
    attempts go back to queued, undispatched, with a fresh retry budget. Returns how many.
    """
    unfinished = Attempt.objects.filter(
        campaign_id=campaign_id, status__in=[Attempt.Status.CANCELLED, Attempt.Status.INFRA_ERROR]
    )
    _supersede_last_runs(unfinished)
    return unfinished.update(
        status=Attempt.Status.QUEUED, dispatched_at=None, worker="", lease_expires_at=None, retries=0
    )


def _supersede_last_runs(attempts) -> None:
    """Keep each attempt's run of record as a superseded run before it is re-run (its usage columns stay)."""
    billed = [*USAGE_FIELDS, "agent_cost", "eval_cost"]
    changed = []
    # Attempts that never billed a token (most cancelled ones) are not even loaded.
    billed_some = attempts.exclude(input_tokens=0, output_tokens=0, eval_tokens=0)
    for attempt in billed_some.only(
        "id", "status", "error_detail", "finished_at", "superseded_runs", *billed
    ):
        values = {name: getattr(attempt, name) for name in billed}
        own = last_run(values, attempt.superseded_runs)
        if not any(own[name] for name in USAGE_FIELDS):
            continue  # nothing was billed for it (e.g. cancelled before it ran)
        at = (attempt.finished_at or timezone.now()).isoformat()
        reason = f"resume of {attempt.status}"
        attempt.superseded_runs = [
            *attempt.superseded_runs,
            superseded_run(own, error=attempt.error_detail, at=at, reason=reason),
        ]
        changed.append(attempt)
    Attempt.objects.bulk_update(changed, ["superseded_runs"], batch_size=500)


IMPORT_BATCH_ROWS = 2000  # rows converted and inserted at a time: memory stays flat on a million-row import


def _batched(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


@dataclass(frozen=True)
class ImportRow:
    """One result run elsewhere, ready to store: its columns (JSON ones already encoded) and signature.

    Made by ``attempt_import_row``, which may run in another process (a big import converts rows
    in parallel); ``attempts_import_rows`` stores a stream of them.
    """

    task_id: int
    index: int
    fields: dict
    signature: SignatureRow | None  # attempt_id and campaign_id filled in when stored


def attempt_import_row(*, task_id: int, index: int, result: AttemptResult) -> ImportRow:
    """The row and signature an imported (unpriced) engine result is stored as."""
    outcome = AttemptOutcome.from_result(result, agent_cost=None, eval_cost=None)
    return ImportRow(
        task_id=task_id,
        index=index,
        fields=encoded_json(outcome.as_fields(json_nul_shown=False)),
        signature=outcome.signature_row(attempt_id=0, campaign_id=0, task_id=task_id),
    )


def attempts_import(
    *, campaign_id: int, attempts: Iterable[tuple[Task, int, AttemptResult]], finished_at: datetime
) -> int:
    """Store results run elsewhere as the campaign's finished attempts (unpriced); returns how many.

    ``attempts`` (task, index, engine result) may be a generator over a file: see attempts_import_rows.
    """
    rows = (
        attempt_import_row(task_id=task.pk, index=index, result=result) for task, index, result in attempts
    )
    return attempts_import_rows(campaign_id=campaign_id, rows=rows, finished_at=finished_at)


def attempts_import_rows(*, campaign_id: int, rows: Iterable[ImportRow], finished_at: datetime) -> int:
    """Store prepared rows as the campaign's finished attempts; returns how many.

    ``rows`` is consumed IMPORT_BATCH_ROWS at a time (it may be a generator over a file), so only
    one batch is held at once, and written with COPY (``bulk_insert``); the caller's transaction
    keeps the import all-or-nothing. Side effects: one Attempt per row, their signature rows, the
    campaign's TaskSummary and SignatureCount rows.
    """
    with bulk_import_cache():
        stored = _import_batches(campaign_id=campaign_id, rows=rows, finished_at=finished_at)
        summary_refresh(campaign_id=campaign_id)
    return stored


def _import_batches(*, campaign_id: int, rows: Iterable[ImportRow], finished_at: datetime) -> int:
    stored = 0
    for batch in _batched(rows, IMPORT_BATCH_ROWS):
        ids = attempt_rows_insert(
            [
                {
                    "campaign_id": campaign_id,
                    "task_id": row.task_id,
                    "index": row.index,
                    "finished_at": finished_at,
                }
                | row.fields
                for row in batch
            ]
        )
        signatures_store(
            [
                dataclasses.replace(row.signature, attempt_id=attempt_id, campaign_id=campaign_id)
                for attempt_id, row in zip(ids, batch, strict=True)
                if row.signature is not None
            ],
            fresh=True,
        )
        stored += len(ids)
        # With DEBUG on, Django logs every query's SQL: a million-row import's batches would all stay.
        reset_queries()
    return stored


# --- Housekeeping: dead workers, lost messages, signatures -----------------------------------------


@dataclass(frozen=True)
class SweepReport:
    requeued: int  # running attempts of dead workers sent back to the queue
    exhausted: int  # running attempts of dead workers past their retry budget: now infra_error (worker lost)


def attempts_sweep(*, now=None, same_host_dead_only: bool = False) -> SweepReport:
    """Re-queue attempts whose worker died and forget messages that were never claimed.

    A running attempt is stale when its lease expired, or at once when its worker ran on this
    host and that process no longer exists. Each re-queue spends one retry; past the budget the
    attempt is infra_error (worker lost). Queued attempts dispatched longer than
    ATTEMPT_REDISPATCH_SECONDS ago become undispatched. Topping up the campaigns' windows is the
    caller's (campaigns.services.campaigns_sweep).
    """
    now = now or timezone.now()
    host = socket.gethostname()
    stale_ids: list[int] = []
    exhausted_ids: list[int] = []
    running = Attempt.objects.filter(status=Attempt.Status.RUNNING).values_list(
        "id", "worker", "lease_expires_at", "retries"
    )
    for attempt_id, worker, lease, retries in running:
        dead_here = _dead_on_this_host(worker, host)
        expired = lease is not None and lease < now and not same_host_dead_only
        if dead_here or expired:
            (stale_ids if retries < settings.ATTEMPT_MAX_RETRIES else exhausted_ids).append(attempt_id)
    with transaction.atomic():
        if stale_ids:
            Attempt.objects.filter(id__in=stale_ids, status=Attempt.Status.RUNNING).update(
                status=Attempt.Status.QUEUED,
                worker="",
                lease_expires_at=None,
                dispatched_at=None,
                retries=F("retries") + 1,
            )
        if exhausted_ids:
            Attempt.objects.filter(id__in=exhausted_ids, status=Attempt.Status.RUNNING).update(
                status=Attempt.Status.INFRA_ERROR,
                error_detail="worker lost",
                finished_at=now,
                lease_expires_at=None,
            )
        # Messages lost with a dead worker's prefetch: queued, dispatched long ago, never claimed.
        lost_after = timedelta(seconds=settings.ATTEMPT_REDISPATCH_SECONDS)
        Attempt.objects.filter(status=Attempt.Status.QUEUED, dispatched_at__lt=now - lost_after).update(
            dispatched_at=None
        )
    return SweepReport(requeued=len(stale_ids), exhausted=len(exhausted_ids))


def attempts_resend_lost(*, sent_before) -> int:
    """Forget the messages of queued attempts dispatched before ``sent_before`` (a broker restart lost them).

    Side effects: clears those attempts' dispatched_at, so the next dispatch sends them again.
    Returns how many.
    """
    return Attempt.objects.filter(status=Attempt.Status.QUEUED, dispatched_at__lt=sent_before).update(
        dispatched_at=None
    )


def _dead_on_this_host(worker: str, host: str) -> bool:
    name, _, pid = worker.rpartition(":")
    if name != host or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def attempts_backfill_signatures(
    *, campaign_ids: list[int] | None = None, recompute: bool = False
) -> BackfillReport:
    """Give every stored failed attempt its SPEC §8 signature (all of them again with ``recompute``).

    Side effects: AttemptSignature / SignatureVariant rows of the attempts whose signature changed;
    the touched campaigns' TaskSummary.updated_at (pages cached by summary stamp recompute).
    """
    return backfill_signatures(campaign_ids=campaign_ids, recompute=recompute)


def attempts_backfill_process_risk(
    *,
    analyse_stored: Callable[[int, dict[str, Any]], ProcessReport | None],
    campaign_ids: list[int] | None = None,
    recompute: bool = False,
) -> ProcessBackfill:
    """Give stored done attempts their process-risk rows (tb_engine.process; docs/process_risk.md).

    ``analyse_stored(task_id, result)`` analyses a stored result that carries no analysis of its own
    (or every one with ``recompute``); None when it cannot (the caller knows the task's domain).
    Side effects: AttemptProcessRisk rows of the scanned attempts replaced; attempt rows untouched.
    """
    return backfill_process_rows(
        analyse_stored=analyse_stored, campaign_ids=campaign_ids, recompute=recompute
    )
