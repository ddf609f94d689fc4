"""Celery tasks: take ids, claim rows conditionally, call a service. Safe to run twice."""

from __future__ import annotations

from celery import shared_task

from apps.campaigns import services


@shared_task(name="campaigns.execute_attempt", acks_late=True, ignore_result=True)
def execute_attempt(attempt_id: int) -> str:
    return services.attempt_execute(attempt_id=attempt_id)


@shared_task(name="campaigns.sweep", ignore_result=True)
def sweep() -> int:
    return services.attempts_sweep()
