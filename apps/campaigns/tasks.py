"""Celery tasks: take ids, claim rows conditionally, call a service. Safe to run twice."""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections, connection

from apps.campaigns import services


def _drop_stale_connections() -> None:
    """Workers reuse connections across tasks (CELERY_DB_REUSE_MAX): drop broken or expired ones first.

    Not inside a transaction: an inline (eager) run belongs to its caller's transaction.
    """
    if not connection.in_atomic_block:
        close_old_connections()


@shared_task(name="campaigns.execute_attempt", acks_late=True, ignore_result=True)
def execute_attempt(attempt_id: int) -> str:
    _drop_stale_connections()
    return services.attempt_execute(attempt_id=attempt_id)


@shared_task(name="campaigns.sweep", ignore_result=True)
def sweep() -> int:
    _drop_stale_connections()
    return services.attempts_sweep()
