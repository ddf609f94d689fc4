"""One attempt on a worker, top to bottom: claim → (the engine runs it) → record → recount → sign → hand the slot on.

Life of an attempt: created ``queued`` by its campaign; *dispatched* (a Celery message sent,
apps.attempts.dispatch); *claimed* by a worker with a conditional UPDATE (attempt_claim, so
re-delivered messages are no-ops); kept alive by heartbeats while the engine runs it
(apps.worker); recorded with a second conditional UPDATE that only the claiming worker of a
still running campaign can win (attempt_record). Infrastructure errors go back to ``queued`` with
backoff until the retry budget is spent, then stay ``infra_error`` — never a failure.

Recording writes the attempt row, its failure signature (AttemptSignature), the pair's
TaskSummary and SignatureCount recounts, and hands the freed slot to the campaign's next attempt,
all in one transaction. On PostgreSQL the common case is one round trip (attempt_sql.record_in_one_query);
everything else takes the step-by-step path below. What follows for the *campaign* (finish it,
wake its adaptive dispatcher) is the caller's: campaigns.services.campaign_after_record with the
Recorded this returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.attempts import attempt_sql
from apps.attempts.dispatch import send_run_attempt
from apps.attempts.models import Attempt, campaign_model
from apps.attempts.outcomes import AttemptOutcome, billed_fields, superseded_run
from apps.attempts.process_rows import process_rows_store
from apps.attempts.signature_rows import signatures_store
from apps.attempts.summaries import summary_refresh
from thinkingbox_web.embedded import tasks_run_inline


@dataclass(frozen=True)
class Recorded:
    """How a claimed attempt's record went, for the worker's log and the campaign's follow-up."""

    what: str  # the outcome's status, "retry", "cancelled" or "lost-lease"
    handed_on: bool  # the campaign's next attempt was dispatched in the record's transaction


# --- Claim and heartbeat --------------------------------------------------------------------------


def attempt_claim(*, attempt_id: int, worker: str) -> Attempt | None:
    """Atomically move a queued attempt of a running campaign to running for this worker.

    Returns the claimed attempt with its campaign (agent, price sheet) and task (suite, domain)
    loaded — one statement on PostgreSQL — or None when it was not claimable.
    """
    now = timezone.now()
    lease = timedelta(seconds=settings.ATTEMPT_LEASE_SECONDS)
    return attempt_sql.claim_and_load(
        attempt_id=attempt_id, worker=worker, now=now, lease_expires_at=now + lease
    )


def attempt_claim_prepare() -> None:
    """Open this thread's database connection and prepare the claim statement, as the first claim would."""
    attempt_sql.warm_connection()


def attempt_heartbeat(*, attempt_id: int, worker: str) -> bool:
    """Extend the lease; False when the attempt is no longer ours or its campaign was cancelled."""
    lease = timedelta(seconds=settings.ATTEMPT_LEASE_SECONDS)
    return attempt_sql.update_owned(
        attempt_id=attempt_id,
        worker=worker,
        values={"lease_expires_at": timezone.now() + lease},
        require_running_campaign=True,
    )


def attempts_heartbeat(*, attempt_ids: list[int], worker: str) -> set[int]:
    """Extend the leases of many attempts in one statement; the ids that are still ours (the others
    were taken over by the sweep, or their campaign is no longer running)."""
    lease = timedelta(seconds=settings.ATTEMPT_LEASE_SECONDS)
    return attempt_sql.extend_leases(attempt_ids=attempt_ids, worker=worker, until=timezone.now() + lease)


# --- Record ---------------------------------------------------------------------------------------


def attempt_record(
    *, attempt: Attempt, worker: str, outcome: AttemptOutcome | None, hand_on: Callable[[], int]
) -> Recorded:
    """Record how a claimed attempt ended (None: it was cancelled).

    ``hand_on`` dispatches the campaign's next attempt into the freed slot and returns how many it
    sent (campaigns.services.campaign_dispatch with limit 1); it runs inside the record's
    transaction. Side effects: the attempt row (status, result, usage, cost), its signature row,
    its task summary and signature counts, dispatch of the campaign's next attempt. Only the
    claiming worker of a still running campaign records a result: otherwise "lost-lease" (another
    worker's result wins) or "cancelled". An infrastructure error within the retry budget
    re-queues the attempt ("retry").
    """
    if outcome is not None and not _retries_infra_error(attempt, outcome) and not tasks_run_inline():
        # The common case in one round trip (PostgreSQL); anything unusual takes the path below,
        # and so does inline (eager) Celery, where ``hand_on`` stays the one dispatch point.
        fast = attempt_sql.record_in_one_query(
            attempt=attempt,
            worker=worker,
            values=_outcome_fields(outcome, attempt),
            now=timezone.now(),
            signature=outcome.signature_row(
                attempt_id=attempt.id, campaign_id=attempt.campaign_id, task_id=attempt.task_id
            ),
        )
        if fast is not None and fast.recorded:
            _store_process_risk(attempt, outcome)
            if not fast.summary_found:
                summary_refresh(campaign_id=attempt.campaign_id, task_id=attempt.task_id)
            send_run_attempt(fast.dispatched)
            return Recorded(what=outcome.status, handed_on=bool(fast.dispatched))
    # Record, summarise and hand the slot to the campaign's next attempt in one transaction.
    with transaction.atomic():
        what, recorded = _record(attempt=attempt, worker=worker, outcome=outcome)
        if not recorded:
            return Recorded(what="lost-lease", handed_on=False)
        summary_refresh(campaign_id=attempt.campaign_id, task_id=attempt.task_id)
        handed_on = what != "retry" and hand_on() > 0
    return Recorded(what=what, handed_on=handed_on)


def _retries_infra_error(attempt: Attempt, outcome: AttemptOutcome) -> bool:
    return outcome.status == Attempt.Status.INFRA_ERROR and attempt.retries < settings.ATTEMPT_MAX_RETRIES


def _outcome_fields(outcome: AttemptOutcome, attempt: Attempt) -> dict:
    """The row's columns for ``outcome``; usage and cost billed with the attempt's superseded runs.

    The superseded runs were loaded with the claim: only the owning worker changes them (a
    re-queue after an infra error), so they cannot change between claim and record.
    """
    fields = outcome.as_fields()
    if attempt.superseded_runs:
        fields.update(billed_fields(fields, attempt.superseded_runs))
    fields.update(finished_at=timezone.now(), lease_expires_at=None)
    return fields


def _record(*, attempt: Attempt, worker: str, outcome: AttemptOutcome | None) -> tuple[str, bool]:
    """Write the attempt's end state; (what happened, whether this worker still owned it)."""
    if outcome is None:
        return "cancelled", _record_cancelled(attempt_id=attempt.id, worker=worker)
    if _retries_infra_error(attempt, outcome):
        return "retry", _requeue_after_infra_error(attempt=attempt, worker=worker, outcome=outcome)
    if _record_outcome(attempt=attempt, worker=worker, outcome=outcome):
        return outcome.status, True
    # Not recorded: the campaign was cancelled meanwhile (the attempt ends cancelled) or the
    # lease passed to another worker (its result wins).
    if _campaign_cancelled(attempt.campaign_id):
        return "cancelled", _record_cancelled(attempt_id=attempt.id, worker=worker)
    return "lost-lease", False


def _campaign_cancelled(campaign_id: int) -> bool:
    """Read through the campaign model (never written here)."""
    campaign = campaign_model()
    return campaign.objects.filter(pk=campaign_id, status=campaign.Status.CANCELLED).exists()


def _record_outcome(*, attempt: Attempt, worker: str, outcome: AttemptOutcome) -> bool:
    """Only the owning worker of a still-running campaign may record a result (and its signature)."""
    recorded = attempt_sql.update_owned(
        attempt_id=attempt.id,
        worker=worker,
        values=_outcome_fields(outcome, attempt),
        require_running_campaign=True,
    )
    if recorded:
        row = outcome.signature_row(
            attempt_id=attempt.id, campaign_id=attempt.campaign_id, task_id=attempt.task_id
        )
        signatures_store([row] if row else [], attempt_ids=[attempt.id])
        _store_process_risk(attempt, outcome)
    return recorded


def _store_process_risk(attempt: Attempt, outcome: AttemptOutcome) -> None:
    """The attempt's process-risk row, when it has findings (most have none: no statement then).

    On the one-query path this follows the record's transaction: the findings are in the stored
    result either way, and ``manage.py backfill_process_risk`` rebuilds any row missing.
    """
    row = outcome.process_row(attempt_id=attempt.id, campaign_id=attempt.campaign_id, task_id=attempt.task_id)
    if row is not None:
        process_rows_store([row], attempt_ids=[attempt.id])


def _record_cancelled(*, attempt_id: int, worker: str) -> bool:
    return (
        Attempt.objects.filter(id=attempt_id, status=Attempt.Status.RUNNING, worker=worker).update(
            status=Attempt.Status.CANCELLED, finished_at=timezone.now(), lease_expires_at=None
        )
        == 1
    )


def _requeue_after_infra_error(*, attempt: Attempt, worker: str, outcome: AttemptOutcome) -> bool:
    """Back to queued with capped exponential backoff; the retry is a new message.

    The failed run's usage stays billed: it becomes one of the attempt's superseded runs and its
    usage columns hold what all of them cost until the retry records its own run on top.
    """
    retries = attempt.retries + 1
    now = timezone.now()
    fields = outcome.as_fields()
    runs = [
        *attempt.superseded_runs,
        superseded_run(fields, error=fields["error_detail"], at=now.isoformat(), reason="retry"),
    ]
    updated = Attempt.objects.filter(id=attempt.id, status=Attempt.Status.RUNNING, worker=worker).update(
        status=Attempt.Status.QUEUED,
        retries=retries,
        superseded_runs=runs,
        **billed_fields(None, runs),
        error_detail=fields["error_detail"],
        worker="",
        lease_expires_at=None,
        dispatched_at=now,
    )
    if updated:
        base = settings.ATTEMPT_RETRY_BACKOFF_SECONDS
        countdown = min(base * (2 ** (retries - 1)), settings.ATTEMPT_RETRY_BACKOFF_MAX_SECONDS)
        transaction.on_commit(lambda: send_run_attempt([attempt.id], countdown=countdown))
    return updated == 1
