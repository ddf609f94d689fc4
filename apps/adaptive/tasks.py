"""Celery tasks of the adaptive app, registered under the names campaigns sends. Safe to run twice."""

from __future__ import annotations

from celery import shared_task
from django.contrib.auth import get_user_model

from apps.adaptive.services import adaptive_dispatch, calibration_create
from apps.campaigns.services import ADAPTIVE_DISPATCH_TASK
from apps.core.models import Team
from apps.suites.models import Suite

CALIBRATE_TASK = "adaptive.calibrate"


@shared_task(name=ADAPTIVE_DISPATCH_TASK, ignore_result=True)
def dispatch(campaign_id: int) -> str:
    return adaptive_dispatch(campaign_id=campaign_id)


@shared_task(name=CALIBRATE_TASK, ignore_result=True)
def calibrate(suite_id: int, team_id: int, user_id: int | None = None) -> int:
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    row = calibration_create(
        suite=Suite.objects.get(pk=suite_id), team=Team.objects.get(pk=team_id), user=user
    )
    return row.pk
