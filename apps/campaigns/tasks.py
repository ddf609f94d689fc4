"""Celery tasks: take ids, claim rows conditionally, call a service. Safe to run twice."""

from __future__ import annotations

import threading
import time

from celery import shared_task
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from apps.campaigns import services

# A connection that finished a task this recently without a database error is trusted without
# Django's per-task health check (a SELECT 1 round trip before every attempt).
TRUSTED_FOR_S = 1.0
_thread = threading.local()  # connections are per thread (threads pool)


def _drop_stale_connections() -> bool:
    """Workers reuse connections across tasks (CELERY_DB_REUSE_MAX): drop broken or expired ones first.

    Returns True when the health check was skipped because the connection just served a task.
    Not inside a transaction: an inline (eager) run belongs to its caller's transaction.
    """
    if connection.in_atomic_block:
        return False
    close_old_connections()
    last_ok = getattr(_thread, "ok_at", None)
    if (
        connection.connection is not None
        and last_ok is not None
        and time.monotonic() - last_ok < TRUSTED_FOR_S
    ):
        connection.health_check_done = True
        return True
    return False


def _connection_served() -> None:
    if not connection.errors_occurred:
        _thread.ok_at = time.monotonic()


@shared_task(name="campaigns.execute_attempt", acks_late=True, ignore_result=True)
def execute_attempt(attempt_id: int) -> str:
    trusted = _drop_stale_connections()
    try:
        outcome = services.attempt_execute(attempt_id=attempt_id)
    except (InterfaceError, OperationalError):
        if not trusted:
            raise
        # The connection trusted without a health check had died (database restart): once more
        # on a fresh one. A claim that did go through makes this a no-op ("not-claimed").
        _thread.ok_at = None
        connection.close()
        outcome = services.attempt_execute(attempt_id=attempt_id)
    _connection_served()
    return outcome


@shared_task(name="campaigns.sweep", ignore_result=True)
def sweep() -> int:
    _drop_stale_connections()
    return services.attempts_sweep()
