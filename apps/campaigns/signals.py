"""A worker that starts re-queues attempts left running by dead workers on the same host."""

from __future__ import annotations

import logging

from celery.signals import worker_process_init, worker_ready

log = logging.getLogger(__name__)


@worker_ready.connect
def _requeue_dead_predecessors(**_kwargs) -> None:
    from apps.campaigns.services import attempts_sweep

    try:
        requeued = attempts_sweep(same_host_dead_only=True)
    except Exception:  # the worker must start even if the sweep fails; the periodic sweep retries
        log.exception("start-up sweep failed")
        return
    if requeued:
        log.warning("re-queued %s attempts of dead workers", requeued)


@worker_ready.connect
@worker_process_init.connect
def _warm_suites(**_kwargs) -> None:
    """Parse built-in suites before the first message arrives (prefork children and thread pools)."""
    from django.db import connection

    from apps.campaigns.execution import warm_builtin_suites

    try:
        warm_builtin_suites()
    except Exception:
        log.exception("warming built-in suites failed")
    finally:
        connection.close()  # a prefork child must not keep a connection opened before its first task
