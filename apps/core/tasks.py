"""Celery tasks of the core app."""

from __future__ import annotations

import socket

from celery import shared_task

from apps.core.services import record_worker_heartbeat


@shared_task(name="core.record_heartbeat", bind=True)
def record_heartbeat(self) -> str:
    """Record that the worker executing this task is alive; returns its hostname."""
    hostname = self.request.hostname or socket.gethostname()
    record_worker_heartbeat(hostname=hostname)
    return hostname
