"""Celery tasks of the drift watch, sent by name: the beat's tick and the alert webhook."""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections

from apps.drift.services import TICK_TASK, WEBHOOK_TASK, drift_tick, webhook_deliver

WEBHOOK_RETRIES = 3


@shared_task(name=TICK_TASK, ignore_result=True)
def tick() -> dict:
    close_old_connections()  # workers keep connections across tasks; drop broken or expired ones first
    report = drift_tick()
    return {"evaluated": report.evaluated, "probed": report.probed, "started": report.started}


@shared_task(name=WEBHOOK_TASK, bind=True, ignore_result=True, max_retries=WEBHOOK_RETRIES)
def send_webhook(self, run_id: int) -> str:
    delivery = webhook_deliver(run_id=run_id)
    if not delivery.ok and self.request.retries < WEBHOOK_RETRIES and not self.request.is_eager:
        raise self.retry(countdown=10 * 3**self.request.retries)
    return delivery.status
