"""Campaign services: attempts are claimed once, recorded once, summarised exactly."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.agents.models import AgentConfig
from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.models import Campaign
from apps.campaigns.services import (
    campaign_cancel,
    campaign_replicate,
    campaign_resume,
    campaign_start,
    campaign_window,
    campaigns_sweep,
)
from apps.worker.attempts import attempt_execute
from tests.campaigns.conftest import drain, recount, summaries

pytestmark = pytest.mark.django_db


def test_campaign_start_creates_n_attempts_per_task(make_campaign):
    campaign = make_campaign(tasks=3, n=4)

    created = campaign_start(campaign=campaign)

    assert created == 12
    assert Attempt.objects.filter(campaign=campaign, status="queued").count() == 12
    assert Campaign.objects.get(pk=campaign.pk).status == "running"


def test_campaign_start_twice_creates_no_duplicates(make_campaign):
    campaign = make_campaign(tasks=2, n=3)
    campaign_start(campaign=campaign)

    assert campaign_start(campaign=campaign) == 0
    assert Attempt.objects.filter(campaign=campaign).count() == 6


def test_golden_campaign_completes_and_summaries_equal_recount(make_campaign):
    campaign = make_campaign(tasks=3, n=2)
    campaign_start(campaign=campaign)

    outcomes = drain(campaign)

    assert outcomes == ["done"] * 6
    assert Campaign.objects.get(pk=campaign.pk).status == "done"
    assert summaries(campaign) == recount(campaign)
    assert set(summaries(campaign).values()) == {(2, 2)}


def test_simulated_campaign_stores_failures_with_categories(make_campaign):
    campaign = make_campaign("sim:careless", tasks=6, n=3)
    campaign_start(campaign=campaign)

    drain(campaign)

    failed = Attempt.objects.filter(campaign=campaign, verdict="fail")
    assert failed.count() > 0
    for attempt in failed:
        kinds = {item["kind"] for item in attempt.result["diff"]}
        assert set(attempt.categories) >= kinds
        assert attempt.diff_items == len(attempt.result["diff"])
    assert summaries(campaign) == recount(campaign)


def test_attempt_execute_twice_records_once(make_campaign):
    campaign = make_campaign(tasks=1, n=1)
    campaign_start(campaign=campaign)
    attempt = Attempt.objects.get(campaign=campaign)

    first = attempt_execute(attempt_id=attempt.id, worker="w:1")
    second = attempt_execute(attempt_id=attempt.id, worker="w:2")

    attempt.refresh_from_db()
    assert (first, second) == ("done", "not-claimed")
    assert attempt.worker == "w:1"
    assert Attempt.objects.filter(campaign=campaign).count() == 1


def test_cancel_stops_queued_attempts_from_starting(make_campaign):
    campaign = make_campaign(tasks=2, n=3)
    campaign_start(campaign=campaign)
    first = Attempt.objects.filter(campaign=campaign).first()
    attempt_execute(attempt_id=first.id)

    cancelled = campaign_cancel(campaign=campaign)

    assert cancelled == 5
    assert drain(campaign) == []
    statuses = sorted(Attempt.objects.filter(campaign=campaign).values_list("status", flat=True))
    assert statuses == ["cancelled"] * 5 + ["done"]
    assert TaskSummary.objects.get(campaign=campaign, task=first.task).n_done == 1


def test_running_attempt_of_cancelled_campaign_ends_cancelled(make_campaign):
    campaign = make_campaign(tasks=1, n=1)
    campaign_start(campaign=campaign)
    attempt = Attempt.objects.get(campaign=campaign)
    # Claimed by a worker, then the campaign is cancelled before the worker records its result.
    Attempt.objects.filter(pk=attempt.pk).update(
        status="running", worker="w:1", lease_expires_at=timezone.now()
    )
    campaign_cancel(campaign=campaign)
    Attempt.objects.filter(pk=attempt.pk).update(status="queued", worker="")

    assert attempt_execute(attempt_id=attempt.id, worker="w:1") == "not-claimed"


def _dead_endpoint_agent() -> AgentConfig:
    with socket.socket() as sock:  # a port nobody listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return AgentConfig.objects.create(
        name="dead endpoint",
        kind=AgentConfig.Kind.OPENAI,
        model="gpt-4o-mini",
        base_url=f"http://127.0.0.1:{port}/v1",
        parameters={"retry": {"max_retries": 1, "base_delay_s": 0.0, "max_delay_s": 0.0, "timeout_s": 2.0}},
    )


def test_endpoint_outage_ends_in_infra_error_not_failure(make_campaign, settings):
    settings.ATTEMPT_MAX_RETRIES = 2
    campaign = make_campaign(_dead_endpoint_agent(), tasks=2, n=2)
    campaign_start(campaign=campaign)

    drain(campaign)

    attempts = Attempt.objects.filter(campaign=campaign)
    assert sorted(set(attempts.values_list("status", flat=True))) == ["infra_error"]
    assert set(attempts.values_list("verdict", flat=True)) == {""}
    assert set(attempts.values_list("retries", flat=True)) == {2}
    summary = TaskSummary.objects.filter(campaign=campaign).first()
    assert (summary.n_done, summary.n_pass, summary.n_infra_error) == (0, 0, 2)
    assert Campaign.objects.get(pk=campaign.pk).status == "done"


def test_resume_reruns_infra_errors(make_campaign, settings):
    settings.ATTEMPT_MAX_RETRIES = 0
    agent = _dead_endpoint_agent()
    campaign = make_campaign(agent, tasks=1, n=2)
    campaign_start(campaign=campaign)
    drain(campaign)
    # The endpoint is "back": point the campaign's agent at the golden replay.
    AgentConfig.objects.filter(pk=agent.pk).update(kind=AgentConfig.Kind.GOLDEN, base_url="")

    requeued = campaign_resume(campaign=Campaign.objects.get(pk=campaign.pk))
    drain(campaign)

    assert requeued == 2
    assert (
        sorted(Attempt.objects.filter(campaign=campaign).values_list("status", "verdict"))
        == [("done", "pass")] * 2
    )


def test_sweep_requeues_attempt_whose_lease_expired(make_campaign):
    campaign = make_campaign(tasks=1, n=1)
    campaign_start(campaign=campaign)
    attempt = Attempt.objects.get(campaign=campaign)
    Attempt.objects.filter(pk=attempt.pk).update(
        status="running", worker="far-away-host:1", lease_expires_at=timezone.now() - timedelta(seconds=5)
    )

    requeued = campaigns_sweep()

    attempt.refresh_from_db()
    assert (requeued, attempt.status, attempt.retries) == (1, "queued", 1)
    assert drain(campaign) == ["done"]


def test_sweep_requeues_dead_worker_on_this_host_at_once(make_campaign):
    campaign = make_campaign(tasks=1, n=1)
    campaign_start(campaign=campaign)
    attempt = Attempt.objects.get(campaign=campaign)
    dead_pid = 2**22 + 12345  # above pid_max on Linux: no such process
    Attempt.objects.filter(pk=attempt.pk).update(
        status="running",
        worker=f"{socket.gethostname()}:{dead_pid}",
        lease_expires_at=timezone.now() + timedelta(hours=1),
    )

    assert campaigns_sweep(same_host_dead_only=True) == 1
    assert drain(campaign) == ["done"]


def test_dispatch_window_bounds_messages_in_flight(make_campaign):
    campaign = make_campaign(tasks=3, n=4, window=3)

    campaign_start(campaign=campaign)

    assert Attempt.objects.filter(campaign=campaign, dispatched_at__isnull=False).count() == 3


def test_campaign_window_is_the_campaigns_own_not_the_agents_max_concurrency(make_campaign, settings):
    settings.CAMPAIGN_DEFAULT_WINDOW, settings.CAMPAIGN_MAX_WINDOW = 100, 150
    narrow_endpoint = AgentConfig.objects.create(name="narrow endpoint", kind="golden", max_concurrency=2)

    default = make_campaign(narrow_endpoint)
    chosen = make_campaign(narrow_endpoint, window=7)
    too_wide = make_campaign(narrow_endpoint, window=1000)

    assert [campaign_window(c) for c in (default, chosen, too_wide)] == [100, 7, 150]


def test_a_replicate_keeps_its_campaigns_window(make_campaign, alice):
    campaign = make_campaign(window=5)
    replicate = campaign_replicate(campaign=campaign, owner=alice, start=False)
    assert replicate.window == 5


def test_new_agent_configs_cap_their_endpoint_at_256_requests():
    assert AgentConfig.objects.create(name="fresh", kind="openai").max_concurrency == 256


def test_small_campaign_is_dispatched_at_once_beside_a_huge_one(make_campaign):
    huge = make_campaign(tasks=6, n=10, window=4)
    campaign_start(campaign=huge)
    small = make_campaign(tasks=2, n=1)

    campaign_start(campaign=small)

    # Each campaign has its own window at the broker, so the small one never queues behind the
    # huge one's 60 attempts: both its attempts are in flight, and the huge one holds only 4.
    assert Attempt.objects.filter(campaign=small, dispatched_at__isnull=False).count() == 2
    assert Attempt.objects.filter(campaign=huge, dispatched_at__isnull=False).count() == 4
