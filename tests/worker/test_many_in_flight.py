"""Many slow attempts in flight on one real worker process (issue 25).

A campaign whose model answers each call after half a second, on a threads-pool worker of 32: the
attempts wait on the model side by side, so at least 16 are in flight at once, and every one of
them is recorded with its verdict — none lost, none an infrastructure error.
"""

from __future__ import annotations

import time

import pytest

from apps.agents.models import AgentConfig
from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_start
from tests.conftest import CeleryWorkerProcess
from tests.support.scripted_openai_server import GenericMode, ScriptedOpenAIServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def half_second_endpoint():
    """Every model call answers after 500 ms: one lookup, then a final reply."""
    server = ScriptedOpenAIServer(generic=GenericMode(tool_calls=1, delay_ms=500)).start()
    yield server
    server.stop()


@pytest.fixture
def threads_worker(celery_worker_process, tmp_path):
    """A threads-pool worker of 32 in place of the session's prefork worker (restarted afterwards)."""
    celery_worker_process.stop()
    worker = CeleryWorkerProcess(
        env=celery_worker_process.env,
        queue=celery_worker_process.queue,
        log_path=tmp_path / "threads-worker.log",
        pool="threads",
        concurrency=32,
    )
    worker.start()
    yield worker
    worker.stop()


def test_a_slow_endpoint_campaign_keeps_at_least_16_attempts_in_flight(
    threads_worker, half_second_endpoint, make_campaign
):
    agent = AgentConfig.objects.create(
        name="half-second model",
        kind=AgentConfig.Kind.OPENAI,
        model="slow-model",
        base_url=half_second_endpoint.base_url,
        max_concurrency=40,
        parameters={"retry": {"max_retries": 1, "timeout_s": 10.0}},
    )
    campaign = make_campaign(agent, tasks=10, n=4)

    campaign_start(campaign=campaign)
    peak = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        peak = max(peak, Attempt.objects.filter(campaign=campaign, status="running").count())
        if Campaign.objects.values_list("status", flat=True).get(pk=campaign.pk) == "done":
            break
        time.sleep(0.1)

    statuses = list(Attempt.objects.filter(campaign=campaign).values_list("status", flat=True))
    assert (len(statuses), set(statuses)) == (40, {"done"}), threads_worker.log_tail()
    assert peak >= 16
    assert half_second_endpoint.peak_in_flight >= 16
