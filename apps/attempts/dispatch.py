"""Sending attempts to the workers: mark queued attempts dispatched, send one message each.

Messages are sent by task name (RUN_ATTEMPT_TASK): this app never imports the worker that runs
them, so the worker depends on attempts and nothing circles back. How many of a campaign's
attempts may be in flight (its window) is the campaign's business (campaigns.services.campaign_dispatch);
this module only marks and sends as many as it is told.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from apps.attempts import attempt_sql
from apps.attempts.models import Attempt
from thinkingbox_web.celery import app as celery_app

# Celery task name, registered by apps.worker.tasks (which imports this constant).
RUN_ATTEMPT_TASK = "worker.run_attempt"


def send_run_attempt(attempt_ids: Iterable[int], *, countdown: float | None = None) -> None:
    """One RUN_ATTEMPT_TASK message per attempt, by name.

    A signature by name runs through the registered task when this process has it (apps.worker
    registers it at start-up, so Celery's eager mode in tests and ``run_task`` still runs inline)
    and is a plain send otherwise.
    """
    for attempt_id in attempt_ids:
        message = celery_app.signature(RUN_ATTEMPT_TASK, args=(attempt_id,))
        if countdown is None:
            message.apply_async()
        else:
            message.apply_async(countdown=countdown)


def attempts_dispatch(*, campaign_id: int, limit: int) -> int:
    """Mark up to ``limit`` undispatched queued attempts of the campaign dispatched, in (index, task) order.

    Side effects: sets dispatched_at, sends RUN_ATTEMPT_TASK messages after commit. Duplicate
    messages are harmless: the claim is conditional. Returns the number dispatched.
    """
    # No savepoint when nested (the record's transaction): an error here fails the whole
    # transaction anyway, and a savepoint costs two more round trips per attempt.
    with transaction.atomic(savepoint=False):
        if limit <= 0:
            return 0
        ids = attempt_sql.mark_dispatched(campaign_id=campaign_id, limit=limit, now=timezone.now())
        if ids is None:  # not PostgreSQL: the same selection in two statements
            ids = list(
                Attempt.objects.select_for_update(skip_locked=True)
                .filter(campaign_id=campaign_id, status=Attempt.Status.QUEUED, dispatched_at__isnull=True)
                .order_by("index", "task_id")
                .values_list("id", flat=True)[:limit]
            )
            if ids:
                Attempt.objects.filter(id__in=ids).update(dispatched_at=timezone.now())
        if not ids:
            return 0
        transaction.on_commit(lambda: send_run_attempt(ids))
    return len(ids)
