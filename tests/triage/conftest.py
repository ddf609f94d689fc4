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
    from apps.attempts.models import Attempt
    from apps.attempts.summaries import summary_refresh

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


def stored_result(
    task,
    *,
    diff=(),
    checks=(),
    rubrics=(),
    tools=("find", "update_ticket", "create_refund"),
    termination="agent_done",
    verdict=None,
):
    """An engine AttemptResult with the given diff items, checks and rubrics (what a worker would record)."""
    from tb_engine.grading import is_clean_looking
    from tb_engine.results import AttemptResult
    from tb_engine.transcript import ToolCall, Transcript

    calls = [
        ToolCall(index=i, id=f"call_{i}", name=name, arguments={}, read_only=i == 0, changed_state=i > 0)
        for i, name in enumerate(tools)
    ]
    categories = {item.kind for item in diff}
    if any(not check.passed for check in checks):
        categories.add("check_failed")
    if any(rubric.answer is not True for rubric in rubrics):
        categories.add("rubric_failed")
    verdict = verdict or ("fail" if categories else "pass")
    return AttemptResult(
        task_id=task.task_id,
        task_hash=task.content_hash,
        status="done",
        termination=termination,
        verdict=verdict,
        transcript=Transcript(tool_calls=calls),
        diff=list(diff),
        checks=list(checks),
        rubrics=list(rubrics),
        categories=sorted(categories),
        clean_looking=is_clean_looking(verdict, termination, calls),
    )


@pytest.fixture
def signed_campaign(starter_suite, alice, team_a):
    """make(rows, name=, model=, team=, judge=) -> a finished campaign stored through campaign_import.

    Each row is (task_id, index, result kwargs for stored_result). The import records every attempt
    through AttemptOutcome.from_result, the path a worker's record takes, so signatures are real.
    """
    from apps.agents.models import AgentConfig
    from apps.campaigns.services import campaign_import

    def make(rows, *, name: str = "Model A", model: str = "model-a", team=None, judge=None, kind="openai"):
        agent, _ = AgentConfig.objects.get_or_create(
            name=f"agent {model}",
            defaults={"kind": kind, "model": model, "base_url": "http://127.0.0.1:9/v1"},
        )
        tasks = {t.task_id: t for t in starter_suite.tasks.filter(task_id__in={row[0] for row in rows})}
        campaign = campaign_import(
            name=name,
            team=team or team_a,
            owner=alice,
            agent=agent,
            suite=starter_suite,
            attempts=[
                (tasks[task_id], index, stored_result(tasks[task_id], **kwargs))
                for task_id, index, kwargs in rows
            ],
            source="test rows",
            harness="test",
        )
        if judge is not None:
            campaign.judge = judge
            campaign.save(update_fields=["judge"])
        return campaign

    return make
