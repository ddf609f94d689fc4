"""Campaigns through a real Celery worker process on PostgreSQL + Redis (the integration subset).

Slow attempts come from the OpenAI-compatible agent talking to a scripted server on 127.0.0.1
that answers after a delay, so a campaign is still running when we kill things.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from urllib.parse import urlparse

import pytest
from django.utils import timezone

from apps.agents.models import AgentConfig
from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_cancel, campaign_resume, campaign_start, campaigns_sweep
from tests.campaigns.conftest import recount, summaries
from tests.conftest import reset_broker_connections
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def slow_endpoint():
    """Every model call answers after 150 ms: one lookup, then a final reply (~0.3 s an attempt)."""
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=1, delay_ms=150)).start()
    yield server
    server.stop()


def _endpoint_agent(server: ScriptedOpenAIServer, *, name: str, model: str = "slow-model") -> AgentConfig:
    return AgentConfig.objects.create(
        name=name,
        kind=AgentConfig.Kind.OPENAI,
        model=model,
        base_url=server.base_url,
        max_concurrency=8,
        parameters={"retry": {"max_retries": 1, "base_delay_s": 0.05, "max_delay_s": 0.1, "timeout_s": 5.0}},
    )


def _wait(predicate, *, timeout: float, sweep: bool = False, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if sweep:
            campaigns_sweep()
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _campaign_status(campaign) -> str:
    return Campaign.objects.values_list("status", flat=True).get(pk=campaign.pk)


def test_campaign_of_50_attempts_completes_through_live_worker(celery_worker_process, make_campaign):
    campaign = make_campaign("sim:explorer", tasks=10, n=5)

    campaign_start(campaign=campaign)
    _wait(lambda: _campaign_status(campaign) == "done", timeout=120, what="campaign done")

    attempts = Attempt.objects.filter(campaign=campaign)
    assert attempts.count() == 50
    assert set(attempts.values_list("status", flat=True)) == {"done"}
    assert summaries(campaign) == recount(campaign)
    assert sum(n for n, _ in summaries(campaign).values()) == 50


def test_sigkilled_worker_loses_and_duplicates_nothing(
    celery_worker_process, make_campaign, slow_endpoint, settings
):
    settings.ATTEMPT_REDISPATCH_SECONDS = (
        3  # the sweep in this process re-sends messages the dead worker held
    )
    campaign = make_campaign(_endpoint_agent(slow_endpoint, name="slow agent"), tasks=10, n=5)
    campaign_start(campaign=campaign)
    _wait(
        lambda: Attempt.objects.filter(campaign=campaign, status="done").count() >= 5,
        timeout=60,
        what="5 done",
    )

    celery_worker_process.kill()
    running_when_killed = Attempt.objects.filter(campaign=campaign, status="running").count()
    celery_worker_process.start()
    _wait(
        lambda: _campaign_status(campaign) == "done",
        timeout=180,
        sweep=True,
        what="campaign done after restart",
    )

    attempts = Attempt.objects.filter(campaign=campaign)
    triples = list(attempts.values_list("task_id", "index"))
    assert len(triples) == 50
    assert len(set(triples)) == 50
    assert set(attempts.values_list("status", flat=True)) == {"done"}
    assert running_when_killed >= 1
    assert summaries(campaign) == recount(campaign)


def test_broker_holds_a_running_attempts_message_and_the_worker_reserves_no_more_than_it_runs(
    celery_worker_process, make_campaign, slow_endpoint, settings
):
    # CELERY_TASK_ACKS_LATE and CELERY_WORKER_PREFETCH_MULTIPLIER=1 as the broker sees them. A window
    # of 8 messages and a worker running 2 at a time: late acks keep the 2 running attempts'
    # messages at the broker (unacked: redelivered if the worker dies), and a prefetch of one per
    # process reserves nothing beyond them, so 6 stay in the queue for any other worker.
    # (Early acks would show 4 queued + 2 reserved; a prefetch of 4 would show 0 queued + 8.)
    import redis

    slow_endpoint.generic.delay_ms = 700  # attempts of ~1.4 s: long enough to look at the broker
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    unacked_before = broker.hlen("unacked")  # kombu's hash of delivered, unacknowledged messages
    campaign = make_campaign(_endpoint_agent(slow_endpoint, name="window of 8"), tasks=10, n=5)
    campaign_start(campaign=campaign)
    seen = []
    deadline = time.monotonic() + 60
    try:
        while (6, 2) not in seen and time.monotonic() < deadline:
            if Attempt.objects.filter(campaign=campaign, status="running").count() == 2:
                seen.append((broker.llen(queue), broker.hlen("unacked") - unacked_before))
            time.sleep(0.05)
    finally:
        campaign_cancel(campaign=campaign)
        _wait(
            lambda: not Attempt.objects.filter(campaign=campaign, status="running").exists(),
            timeout=30,
            what="no running attempts",
        )

    assert (6, 2) in seen, seen


def test_campaign_survives_redis_restart(celery_worker_process, make_campaign, slow_endpoint, settings):
    settings.ATTEMPT_REDISPATCH_SECONDS = 3  # messages queued in Redis die with it; the sweep re-sends them
    broker = urlparse(settings.CELERY_BROKER_URL)
    redis_server = shutil.which("redis-server")
    assert redis_server, "the integration run needs redis-server"
    campaign = make_campaign(_endpoint_agent(slow_endpoint, name="slow agent"), tasks=10, n=5)
    campaign_start(campaign=campaign)
    _wait(
        lambda: Attempt.objects.filter(campaign=campaign, status="done").count() >= 5,
        timeout=60,
        what="5 done",
    )

    subprocess.run(
        ["redis-cli", "-h", broker.hostname, "-p", str(broker.port), "shutdown", "nosave"], check=False
    )
    time.sleep(1.0)
    subprocess.run(
        [
            redis_server,
            "--bind",
            broker.hostname,
            "--port",
            str(broker.port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "yes",
        ],
        check=True,
    )
    try:
        _wait(
            lambda: _campaign_status(campaign) == "done",
            timeout=180,
            sweep=True,
            what="campaign done after Redis restart",
        )
    finally:
        reset_broker_connections()  # this process's pooled connections died with the old server

    attempts = Attempt.objects.filter(campaign=campaign)
    assert attempts.count() == 50
    assert set(attempts.values_list("status", flat=True)) == {"done"}


def test_messages_lost_in_a_redis_restart_are_resent_within_seconds_and_no_attempt_runs_twice(
    celery_worker_process, make_campaign, slow_endpoint, settings
):
    # Nothing in this process sweeps, and the worker's periodic re-send of lost messages is 120 s
    # away: only the worker's own reaction to the broker coming back can revive the campaign.
    broker = urlparse(settings.CELERY_BROKER_URL)
    campaign = make_campaign(_endpoint_agent(slow_endpoint, name="restart agent"), tasks=10, n=3)
    campaign_start(campaign=campaign)
    _wait(
        lambda: Attempt.objects.filter(campaign=campaign, status="done").count() >= 4,
        timeout=60,
        what="4 done",
    )

    subprocess.run(
        ["redis-cli", "-h", broker.hostname, "-p", str(broker.port), "shutdown", "nosave"], check=False
    )
    # Down for longer than an attempt (~0.3 s): the running attempts finish meanwhile and their
    # hand-off to the next attempt fails too, so no message at all survives the restart.
    time.sleep(3.0)
    subprocess.run(
        [
            shutil.which("redis-server"),
            "--bind",
            broker.hostname,
            "--port",
            str(broker.port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "yes",
        ],
        check=True,
    )
    back_at = timezone.now()
    try:
        _wait(
            lambda: _campaign_status(campaign) == "done", timeout=60, what="campaign done after Redis restart"
        )
    finally:
        reset_broker_connections()  # this process's pooled connections died with the old server

    attempts = Attempt.objects.filter(campaign=campaign)
    first_start_after = min(attempts.filter(started_at__gt=back_at).values_list("started_at", flat=True))
    assert (first_start_after - back_at).total_seconds() < 10
    assert sorted(attempts.values_list("status", "retries")) == [("done", 0)] * 30
    # One tool call and a final reply per attempt: 60 model calls means no attempt ran twice.
    assert len(slow_endpoint.requests) == 60


def test_cancel_stops_new_attempts_and_ends_running_ones_cancelled(
    celery_worker_process, make_campaign, slow_endpoint
):
    slow_endpoint.generic.delay_ms = 700  # long attempts: several are running when we cancel
    campaign = make_campaign(_endpoint_agent(slow_endpoint, name="slower agent"), tasks=10, n=5)
    campaign_start(campaign=campaign)
    _wait(
        lambda: Attempt.objects.filter(campaign=campaign, status="running").exists(),
        timeout=60,
        what="a running attempt",
    )

    campaign_cancel(campaign=campaign)
    started_before_cancel = set(
        Attempt.objects.filter(campaign=campaign, started_at__isnull=False).values_list("id", flat=True)
    )
    _wait(
        lambda: not Attempt.objects.filter(campaign=campaign, status="running").exists(),
        timeout=30,
        what="no running attempts",
    )

    started_after = set(
        Attempt.objects.filter(campaign=campaign, started_at__isnull=False).values_list("id", flat=True)
    )
    assert started_after == started_before_cancel
    statuses = set(Attempt.objects.filter(campaign=campaign).values_list("status", flat=True))
    assert statuses <= {"done", "cancelled"}
    assert Attempt.objects.filter(campaign=campaign, status="cancelled").count() >= 40
    assert _campaign_status(campaign) == "cancelled"


def test_endpoint_outage_gives_infra_errors_then_resume_completes(
    celery_worker_process, make_campaign, slow_endpoint
):
    slow_endpoint.generic.delay_ms = 0
    slow_endpoint.script("outage-model", [{"status": 500, "repeat": 10_000}])
    agent = _endpoint_agent(slow_endpoint, name="flaky agent", model="outage-model")
    campaign = make_campaign(agent, tasks=2, n=2)
    campaign_start(campaign=campaign)
    _wait(lambda: _campaign_status(campaign) == "done", timeout=120, what="campaign done with infra errors")

    attempts = Attempt.objects.filter(campaign=campaign)
    assert set(attempts.values_list("status", "verdict")) == {("infra_error", "")}
    assert all(s.n_done == 0 and s.n_infra_error == 2 for s in TaskSummary.objects.filter(campaign=campaign))
    assert "500" in attempts.first().error_detail

    slow_endpoint.unscript("outage-model")  # the endpoint is back: generic answers again
    campaign_resume(campaign=Campaign.objects.get(pk=campaign.pk))
    _wait(lambda: _campaign_status(campaign) == "done", timeout=120, what="resumed campaign done")

    assert set(attempts.values_list("status", flat=True)) == {"done"}
    assert sum(s.n_done for s in TaskSummary.objects.filter(campaign=campaign)) == 4
