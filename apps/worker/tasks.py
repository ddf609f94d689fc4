"""Celery tasks: take ids, claim rows conditionally, call a service. Safe to run twice.

Registered under the names apps.attempts.services (RUN_ATTEMPT_TASK) and apps.campaigns.services
(SWEEP_TASK, RESEND_LOST_TASK) send. A requested suite validation is triage's task (apps.triage.tasks);
it runs in the same worker processes.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from apps.attempts.services import RUN_ATTEMPT_TASK
from apps.campaigns.services import RESEND_LOST_TASK, SWEEP_TASK, campaigns_resend_lost, campaigns_sweep
from apps.worker import attempts, broker
from apps.worker.connections import connection_distrusted, connection_served, drop_stale_connections
from apps.worker.memory import MemoryBudget

_budget: MemoryBudget | None = None


def memory_budget() -> MemoryBudget:
    """This worker process's memory budget (TB_WORKER_MEMORY_MB; 0: none)."""
    global _budget
    if _budget is None or _budget.limit_mb != settings.WORKER_MEMORY_MB:
        _budget = MemoryBudget(settings.WORKER_MEMORY_MB)
    return _budget


@shared_task(bind=True, name=RUN_ATTEMPT_TASK, acks_late=True, ignore_result=True, max_retries=None)
def run_attempt(self, attempt_id: int) -> str:
    if memory_budget().over():
        # Not claimed: the message goes back to the queue for this or another worker, a little later.
        raise self.retry(countdown=settings.WORKER_MEMORY_RETRY_SECONDS)
    trusted = drop_stale_connections()
    try:
        outcome = attempts.attempt_execute(attempt_id=attempt_id)
    except (InterfaceError, OperationalError):
        if not trusted:
            raise
        # The connection trusted without a health check had died (database restart): once more
        # on a fresh one. A claim that did go through makes this a no-op ("not-claimed").
        connection_distrusted()
        outcome = attempts.attempt_execute(attempt_id=attempt_id)
    connection_served()
    return outcome


@shared_task(name=SWEEP_TASK, ignore_result=True)
def sweep() -> int:
    drop_stale_connections()
    return campaigns_sweep()


@shared_task(name=RESEND_LOST_TASK, ignore_result=True)
def resend_lost() -> int:
    """Re-send the messages a broker restart lost (sent by each worker when it reconnects)."""
    started_at = broker.broker_started_at()
    if started_at is None:
        return 0
    drop_stale_connections()
    return campaigns_resend_lost(sent_before=started_at)
