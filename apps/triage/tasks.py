"""Celery task of triage, registered under the name triage's services send: a requested suite validation.

Safe to run twice: the run row is claimed with a conditional update first.
"""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections, transaction

from apps.triage.services import CLUSTERS_STORE_TASK, VALIDATE_SUITE_TASK, cluster_indexes_store
from apps.triage.validation import suite_validation_run


@shared_task(name=VALIDATE_SUITE_TASK, acks_late=True, ignore_result=True)
def validate_suite(run_id: int) -> str:
    # Workers keep connections across tasks: drop broken or expired ones first, but never inside a
    # transaction (an inline, eager run belongs to its caller's).
    if transaction.get_autocommit():
        close_old_connections()
    return suite_validation_run(run_id=run_id)


@shared_task(name=CLUSTERS_STORE_TASK, acks_late=True, ignore_result=True)
def clusters_store(campaign_ids: list[int]) -> int:
    if transaction.get_autocommit():
        close_old_connections()
    return cluster_indexes_store(campaign_ids=campaign_ids)
