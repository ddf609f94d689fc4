"""Triage fixtures: campaigns whose attempts are written directly, so each test knows every verdict."""

from __future__ import annotations

import pytest

from tests.campaigns.conftest import make_campaign, starter_suite  # noqa: F401 (fixtures)
from tests.figures.conftest import _fresh_cache, run_campaign, summaries_campaign  # noqa: F401 (fixtures)

T1, T2, T3 = (
    "retail/ticket_hold_carrier_exception",
    "neobank/freeze_misplaced_card",
    "travel/cancel_flexible_full_refund",
)


@pytest.fixture(autouse=True)
def _seeded_labels(db):
    """The data migration seeds the taxonomy, but transactional (browser) tests flush tables between tests."""
    from apps.triage.models import Label
    from apps.triage.taxonomy import seed_labels

    seed_labels(Label)


@pytest.fixture
def attempts_campaign(make_campaign, team_a):
    """make(rows, name=, team=) -> campaign with one done attempt per row.

    A row is (task_id, index, verdict, categories, clean_looking); the campaign's tasks are the
    rows' tasks and its summaries are refreshed, like a finished campaign.
    """
    from apps.campaigns.models import Attempt
    from apps.campaigns.summaries import summary_refresh

    def make(rows, *, name: str = "Careless", team=None, n: int = 4):
        campaign = make_campaign("sim:careless", tasks=1, n=n)
        campaign.name = name
        if team is not None:
            campaign.team = team
        campaign.save()
        task_ids = sorted({row[0] for row in rows})
        tasks = {t.task_id: t for t in campaign.suite.tasks.filter(task_id__in=task_ids)}
        campaign.tasks.set(tasks.values())
        Attempt.objects.filter(campaign=campaign).delete()
        Attempt.objects.bulk_create(
            Attempt(
                campaign=campaign,
                task=tasks[task_id],
                index=index,
                status=Attempt.Status.DONE,
                verdict=verdict,
                termination="agent_done",
                categories=list(categories),
                clean_looking=clean,
                tool_calls=3,
            )
            for task_id, index, verdict, categories, clean in rows
        )
        summary_refresh(campaign_id=campaign.pk)
        return campaign

    return make


@pytest.fixture
def flagged(attempts_campaign, trish):
    """Two campaigns on T1 (always fails, flagged grader bug) and T2 (always passes): pass@1 50% with T1, 100% without."""
    from apps.triage import services
    from apps.triage.models import Label

    rows = [(T1, i, "fail", [], True) for i in range(4)] + [(T2, i, "pass", [], False) for i in range(4)]
    a, b = attempts_campaign(rows, name="Alpha"), attempts_campaign(rows, name="Beta")
    services.attempt_toggle_label(
        attempt=a.attempts.filter(task__task_id=T1).first(),
        label=Label.objects.get(name="grader bug"),
        actor=trish,
    )
    return a, b
