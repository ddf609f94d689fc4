"""Campaign fixtures: the built-in suite in the database and a helper that drains queued attempts."""

from __future__ import annotations

import pytest


@pytest.fixture
def starter_suite(db):
    from apps.suites.services import suite_load_builtin

    return suite_load_builtin(name="starter", validate=False)


@pytest.fixture
def make_campaign(starter_suite, alice, team_a):
    from apps.agents.services import agent_config_for
    from apps.campaigns.services import campaign_create

    def make(agent: str = "golden", *, tasks: int = 3, n: int = 2, **kwargs):
        selected = list(starter_suite.tasks.order_by("task_id")[:tasks])
        return campaign_create(
            name=f"{agent} test",
            team=team_a,
            owner=alice,
            agent=agent_config_for(agent) if isinstance(agent, str) else agent,
            suite=starter_suite,
            tasks=selected,
            n_attempts=n,
            **kwargs,
        )

    return make


def drain(campaign, *, worker: str = "test-worker:1", patience_s: float = 60.0) -> list[str]:
    """Execute every queued attempt of the campaign in this process, as a worker would.

    In an integration run the session's live Celery worker consumes the same queue, so it may
    have claimed some of the campaign's attempts: wait until those are recorded too (a live
    claim holds an unexpired lease; a test's deliberately stale claim does not), so the caller
    sees the whole campaign finished.
    """
    import time

    from django.utils import timezone

    from apps.attempts.models import Attempt
    from apps.worker.attempts import attempt_execute

    outcomes = []
    deadline = time.monotonic() + patience_s
    while True:
        ids = list(
            Attempt.objects.filter(campaign=campaign, status=Attempt.Status.QUEUED).values_list(
                "id", flat=True
            )
        )
        for attempt_id in ids:
            outcomes.append(attempt_execute(attempt_id=attempt_id, worker=worker))
        if ids:
            continue
        live_elsewhere = Attempt.objects.filter(
            campaign=campaign, status=Attempt.Status.RUNNING, lease_expires_at__gt=timezone.now()
        ).exclude(worker=worker)
        if not live_elsewhere.exists() or time.monotonic() > deadline:
            return outcomes
        time.sleep(0.2)


def recount(campaign) -> dict:
    """(n done, c passed) per task counted straight from the attempts: what summaries must equal."""
    from django.db.models import Count, Q

    from apps.attempts.models import Attempt

    return {
        row["task_id"]: (row["n"], row["c"])
        for row in Attempt.objects.filter(campaign=campaign)
        .order_by()
        .values("task_id")
        .annotate(
            n=Count("id", filter=Q(status="done")), c=Count("id", filter=Q(status="done", verdict="pass"))
        )
    }


def summaries(campaign) -> dict:
    """(n done, c passed) per task as the stored TaskSummary rows say."""
    from apps.attempts.models import TaskSummary

    return {s.task_id: (s.n_done, s.n_pass) for s in TaskSummary.objects.filter(campaign=campaign)}


@pytest.fixture
def sent(monkeypatch):
    """Messages the campaign would send, captured (no broker traffic, no live worker needed)."""
    from apps.attempts.services import RUN_ATTEMPT_TASK
    from thinkingbox_web.celery import app

    captured: list[int] = []
    task = app.tasks[RUN_ATTEMPT_TASK]
    monkeypatch.setattr(task, "apply_async", lambda args, kwargs=None, **options: captured.append(args[0]))
    return captured


@pytest.fixture
def careless_in_one_query(make_campaign, sent):
    """A sim:careless campaign (6 tasks x 4) whose every attempt was recorded by attempt_sql's one-query path.

    PostgreSQL only (integration tests): elsewhere records take the ORM path.
    """
    from apps.attempts.models import Attempt
    from apps.campaigns.services import campaign_start
    from apps.worker.attempts import attempt_execute

    campaign = make_campaign("sim:careless", tasks=6, n=4)
    campaign_start(campaign=campaign)
    for attempt_id in Attempt.objects.filter(campaign=campaign).values_list("id", flat=True):
        assert attempt_execute(attempt_id=attempt_id, worker="w:1") == "done"
    return campaign
