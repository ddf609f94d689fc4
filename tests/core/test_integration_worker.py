"""A live Celery worker process executes tasks against PostgreSQL via Redis (integration run)."""

from __future__ import annotations

import time

import pytest

from apps.core.models import WorkerHeartbeat
from apps.core.tasks import record_heartbeat

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def wait_for_heartbeat(hostname: str, *, beats: int = 1, timeout: float = 60.0) -> WorkerHeartbeat:
    """The worker's heartbeat row once it has counted `beats` beats."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        heartbeat = WorkerHeartbeat.objects.filter(hostname=hostname).first()
        if heartbeat is not None and heartbeat.beats >= beats:
            return heartbeat
        time.sleep(0.2)
    raise AssertionError(f"no {beats} heartbeats from {hostname} within {timeout:.0f}s")


def test_live_worker_records_heartbeat_in_postgres(celery_worker_process):
    # A worker also beats once when it becomes ready (apps.worker.signals): count from what is there.
    existing = WorkerHeartbeat.objects.filter(hostname=celery_worker_process.nodename).first()
    before = existing.beats if existing is not None else 0
    record_heartbeat.delay()
    heartbeat = wait_for_heartbeat(celery_worker_process.nodename, beats=before + 1)
    assert (heartbeat.hostname, heartbeat.beats) == (celery_worker_process.nodename, before + 1)


def test_task_queued_while_worker_is_dead_runs_after_restart(celery_worker_process):
    celery_worker_process.kill()
    assert celery_worker_process.alive is False
    record_heartbeat.delay()
    time.sleep(1.0)
    assert WorkerHeartbeat.objects.count() == 0
    celery_worker_process.start()
    # The restarted worker's own beat when ready, then the task queued while it was dead.
    heartbeat = wait_for_heartbeat(celery_worker_process.nodename, beats=2)
    assert heartbeat.beats == 2
