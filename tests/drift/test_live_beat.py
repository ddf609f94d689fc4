"""Drift watches under a real `celery beat` and a real worker on PostgreSQL + Redis (integration).

Two watches run at once: one of a simulated persona, scheduled every minute, whose behaviour is
seeded to change silently between its first and second run (the alert and the local webhook must
follow); one of an OpenAI-compatible agent on a scripted endpoint, scheduled hourly, whose
`system_fingerprint` changes after its first run (a probe must start the next run early).
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
from django.utils import timezone

from apps.agents.models import AgentConfig
from apps.drift.models import WatchRun
from apps.drift.services import watch_create
from tests.conftest import CeleryWorkerProcess, database_url_for
from tests.support.celery_beat import CeleryBeatProcess
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _wait(predicate, *, timeout: float, what: str, logs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    tails = "\n\n".join(process.log_tail() for process in logs)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{tails}")


def _evaluated(watch, number: int) -> WatchRun | None:
    return WatchRun.objects.filter(watch=watch, number=number, status="done").first()


@pytest.fixture
def scheduler(django_db_setup, tmp_path, webhook_server):
    """A worker and a beat of their own on a fresh queue: ticks every 2 s, alerts to the local webhook."""
    from django.conf import settings
    from django.db import connections

    queue = f"tbdrift-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for(connections["default"].settings_dict),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "SECRET_KEY": settings.SECRET_KEY,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "localhost",
        "PYTHONPATH": str(settings.BASE_DIR),
        "TB_DRIFT_TICK_SECONDS": "2",
        "TB_DRIFT_WEBHOOK_URL": webhook_server.url,
        "TB_ATTEMPT_HEARTBEAT_SECONDS": "1",
    }
    worker = CeleryWorkerProcess(env=env, queue=queue, log_path=tmp_path / "worker.log")
    beat = CeleryBeatProcess(env=env, workdir=tmp_path)
    yield worker, beat
    beat.stop()
    worker.stop()


@pytest.fixture
def endpoint():
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=1)).start()
    server.system_fingerprint = "fp_before"
    yield server
    server.stop()


def test_watches_under_a_live_beat_alert_on_a_seeded_change_and_run_early_on_a_new_fingerprint(
    scheduler, endpoint, webhook_server, alice, team_a, starter_suite
):
    worker, beat = scheduler
    # Cautious (pass@1 ~75%) until `switch_at`, steady (~40%) after. The moment is moved to "now"
    # once run 1 is in (machine load decides how long a run takes), so run 1 is all before it and
    # run 2, a minute later, all after.
    changing = AgentConfig.objects.create(
        name="cautious, then steady (simulation)",
        kind=AgentConfig.Kind.SIMULATED,
        persona="cautious",
        model="sim-cautious",
        parameters={"switch_at": "2999-01-01T00:00:00+00:00", "switch_to": "steady"},
    )
    every_minute = watch_create(
        name="every minute",
        team=team_a,
        owner=alice,
        agent=changing,
        suite=starter_suite,
        n_attempts=4,
        interval_minutes=1,
        probe_minutes=0,
    )
    endpoint_agent = AgentConfig.objects.create(
        name="scripted endpoint agent",
        kind=AgentConfig.Kind.OPENAI,
        model="watched-model",
        base_url=endpoint.base_url,
        max_concurrency=4,
        parameters={"retry": {"max_retries": 1, "base_delay_s": 0.05, "max_delay_s": 0.1, "timeout_s": 5.0}},
    )
    hourly = watch_create(
        name="hourly endpoint",
        team=team_a,
        owner=alice,
        agent=endpoint_agent,
        suite=starter_suite,
        tasks=list(starter_suite.tasks.order_by("task_id")[:2]),
        n_attempts=1,
        interval_minutes=60,
        probe_minutes=1,
        webhook=False,
    )
    worker.start()
    beat.start()
    logs = (worker, beat)

    first_hourly = _wait(
        lambda: _evaluated(hourly, 1), timeout=90, what="the endpoint watch's first run", logs=logs
    )
    assert first_hourly.provider[0]["system_fingerprint"] == "fp_before"
    endpoint.system_fingerprint = "fp_after"  # the provider swaps the model behind the same name

    first = _wait(lambda: _evaluated(every_minute, 1), timeout=120, what="run 1 evaluated", logs=logs)
    switched = timezone.now()
    AgentConfig.objects.filter(pk=changing.pk).update(
        parameters={"switch_at": switched.isoformat(), "switch_to": "steady"}
    )
    assert first.campaign.finished_at < switched
    second = _wait(lambda: _evaluated(every_minute, 2), timeout=180, what="run 2 evaluated", logs=logs)
    assert second.started_at > switched
    early = _wait(lambda: _evaluated(hourly, 2), timeout=120, what="the early run", logs=logs)

    # The every-minute watch ran twice on the schedule and caught the seeded change.
    assert (first.trigger, second.trigger) == ("schedule", "schedule")
    assert (second.started_at - first.started_at).total_seconds() >= 60
    assert second.alert is True
    assert second.result["vs_baseline"]["pass_at_1"]["clears"] is True
    assert second.result["vs_baseline"]["pass_at_1"]["value"] < 0
    assert second.alert_reasons[0].startswith("pass@1 -")
    delivered = _wait(
        lambda: [d for d in webhook_server.received if d["body"]["run"]["id"] == second.pk],
        timeout=30,
        what="the webhook",
        logs=logs,
    )
    assert delivered[0]["body"]["reasons"] == second.alert_reasons
    second.refresh_from_db()
    assert second.webhook_status == "sent, HTTP 200"

    # The endpoint watch's second run came from the probe, long before its hourly schedule.
    assert early.trigger == "provider_change"
    assert (early.started_at - first_hourly.started_at).total_seconds() < 5 * 60
    assert early.provider_changed is True
    assert early.provider[0]["system_fingerprint"] == "fp_after"
