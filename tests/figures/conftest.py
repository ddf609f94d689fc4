"""Figure fixtures: campaigns run in-process (golden agent, simulated personas) or with per-task counts set directly.

Every app that shows figures (dashboard, exports, training, triage, api) imports these.
"""

from __future__ import annotations

import pytest

from tests.campaigns.conftest import drain, make_campaign, starter_suite  # noqa: F401 (fixtures)


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Figures are cached per summary stamp; tests must not see another test's entries."""
    from django.core.cache import cache

    from apps.figures.tables import forget_process_figures

    cache.clear()
    forget_process_figures()
    yield
    cache.clear()
    forget_process_figures()


@pytest.fixture
def run_campaign(make_campaign, monkeypatch):
    """make_campaign + start + drain: a finished campaign whose summaries are current.

    Dispatch is switched off and drain() runs every attempt here instead: with inline Celery each
    finished attempt would dispatch the next one inside itself, nesting one call deeper per attempt.
    """
    from apps.campaigns import services
    from apps.campaigns.services import campaign_start

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)

    def run(
        agent: str = "golden", *, tasks: int = 3, n: int = 2, name: str | None = None, task_ids=(), **kwargs
    ):
        campaign = make_campaign(agent, tasks=tasks, n=n, **kwargs)
        if task_ids:
            campaign.tasks.set(campaign.suite.tasks.filter(task_id__in=task_ids))
        if name:
            campaign.name = name
            campaign.save(update_fields=["name"])
        campaign_start(campaign=campaign)
        drain(campaign)
        campaign.refresh_from_db()
        return campaign

    return run


@pytest.fixture
def summaries_campaign(make_campaign):
    """A campaign whose per-task counts are set directly: {task_id: (n_done, n_pass)} (for exact figures)."""
    from apps.attempts.models import TaskSummary

    def make(counts: dict[str, tuple[int, int]], *, name: str, n: int, agent: str = "sim:steady"):
        campaign = make_campaign(agent, tasks=1, n=n)
        campaign.name = name
        campaign.save(update_fields=["name"])
        tasks = {t.task_id: t for t in campaign.suite.tasks.filter(task_id__in=list(counts))}
        campaign.tasks.set(tasks.values())
        TaskSummary.objects.bulk_create(
            TaskSummary(campaign=campaign, task=tasks[task_id], n_done=done, n_pass=passed)
            for task_id, (done, passed) in counts.items()
        )
        return campaign

    return make
