"""Celery tasks of the figures app, registered under the names campaigns sends. Safe to run twice."""

from __future__ import annotations

from celery import shared_task

from apps.campaigns.services import FIGURES_REFRESH_TASK
from apps.figures.services import figures_refresh_claimed


@shared_task(name=FIGURES_REFRESH_TASK, ignore_result=True)
def refresh(campaign_id: int) -> bool:
    return figures_refresh_claimed(campaign_id=campaign_id)
