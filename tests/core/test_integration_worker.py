"""A live Celery worker process executes tasks against PostgreSQL via Redis (integration run)."""

from __future__ import annotations

import time

import pytest

from apps.core.models import WorkerHeartbeat
from apps.core.tasks import record_heartbeat

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def wait_for_heartbeat(hostname: str, timeout: float = 60.0) -> WorkerHeartbeat:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        heartbeat = WorkerHeartbeat.objects.filter(hostname=hostname).first()
        if heartbeat is not None:
            return heartbeat
        time.sleep(0.2)
    raise AssertionError(f"no heartbeat from {hostname} within {timeout:.0f}s")


def test_live_worker_records_heartbeat_in_postgres(celery_worker_process):
    record_heartbeat.delay()
    heartbeat = wait_for_heartbeat(celery_worker_process.nodename)
    assert (heartbeat.hostname, heartbeat.beats) == (celery_worker_process.nodename, 1)


def test_task_queued_while_worker_is_dead_runs_after_restart(celery_worker_process):
    celery_worker_process.kill()
    assert celery_worker_process.alive is False
    record_heartbeat.delay()
    time.sleep(1.0)
    assert WorkerHeartbeat.objects.count() == 0
    celery_worker_process.start()
    heartbeat = wait_for_heartbeat(celery_worker_process.nodename)
    assert heartbeat.beats == 1
