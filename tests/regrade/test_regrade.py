"""Issue 29, re-grading without re-running: a changed golden end state, the impact report against a
full re-run of the same seeded agents, applying it, and the old verdicts kept."""

from __future__ import annotations

import dataclasses

import pytest

from apps.attempts.models import Attempt
from apps.figures import selectors as figures
from apps.regrade.models import RegradeRun
from apps.regrade.selectors import figure_versions, impact_report, verdict_history
from apps.regrade.services import RegradeError, regrade_apply, regrade_preview
from apps.suites.models import Task
from apps.worker.execution import agent_config, attempt_seed
from apps.worker.selectors import task_domain, task_spec_of
from tb_engine.attempt_setup import AttemptSetup

pytestmark = pytest.mark.django_db

CHANGED_TASK = "insurance/glass_claim_no_deductible"
TASKS = (CHANGED_TASK, "retail/missing_item_partial_refund", "neobank/freeze_misplaced_card")
PERSONAS = ("sim:careless", "sim:cautious", "sim:explorer")


def _campaigns(run_campaign):
    return [
        run_campaign(persona, tasks=56, n=6, name=persona, seed=7 + i, task_ids=TASKS)
        for i, persona in enumerate(PERSONAS)
    ]


def _change_golden_end_state(task: Task) -> Task:
    """Drop the task's last golden write: the golden end state no longer has that effect."""
    spec = task.spec
    spec["golden"] = spec["golden"][:-1]
    task.spec = spec
    task.content_hash = task_spec_of_dict(spec).content_hash()
    task.save(update_fields=["spec", "content_hash"])
    return task


def task_spec_of_dict(spec):
    from tb_engine.spec_json import task_from_dict

    return task_from_dict(spec)


def _full_rerun_verdicts(campaign, task: Task, old_spec) -> dict[int, str]:
    """Each attempt of ``task`` run again from scratch: the same seeded agent (built from the task it
    saw) on a fresh sandbox, graded against the new definition."""
    new_spec = task_spec_of(task)
    verdicts = {}
    for attempt in Attempt.objects.filter(campaign=campaign, task=task, status="done"):
        setup = AttemptSetup.from_config(
            task_domain(task),
            old_spec,
            agent=agent_config(campaign.agent),
            seed=attempt_seed(campaign, old_spec.id, attempt.index),
            user=campaign.user_simulator,
            judge=campaign.judge,
            attempt_index=attempt.index,
        )
        verdicts[attempt.pk] = dataclasses.replace(setup, task=new_spec).run().verdict
    return verdicts


def _verdicts(campaigns) -> dict[int, str]:
    return dict(Attempt.objects.filter(campaign__in=campaigns).values_list("pk", "verdict"))


def test_a_changed_golden_end_state_flips_exactly_what_a_full_rerun_flips_and_applying_it_changes_the_figures(
    run_campaign, team_a, alice
):
    campaigns = _campaigns(run_campaign)
    original = _verdicts(campaigns)
    results_before = dict(Attempt.objects.filter(campaign__in=campaigns).values_list("pk", "result"))
    task = Task.objects.get(task_id=CHANGED_TASK, suite=campaigns[0].suite)
    old_spec = task_spec_of(task)
    tables = figures.per_task_tables(campaigns)
    pass_before = {c.pk: figures.campaign_figures(tables, c).pass_at_1.value for c in campaigns}

    # Nothing changed yet: a re-grade reproduces every verdict, diff and check, and flips nothing.
    unchanged = regrade_preview(campaign_ids=[c.pk for c in campaigns], team_id=team_a.pk)
    assert (unchanged.report["changed"], unchanged.not_regradable, unchanged.regraded) == (
        0,
        0,
        len(original),
    )

    _change_golden_end_state(task)
    rerun = {}
    for campaign in campaigns:
        rerun.update(_full_rerun_verdicts(campaign, task, old_spec))
    expected_flips = {pk: (original[pk], verdict) for pk, verdict in rerun.items() if verdict != original[pk]}
    assert expected_flips, "the change must flip some attempt, or the comparison proves nothing"

    run = regrade_preview(campaign_ids=[c.pk for c in campaigns], team_id=team_a.pk, user=alice)
    report = impact_report(run)
    assert {f.attempt_id: (f.before, f.after) for f in report["flips"]} == expected_flips
    assert {f.task_id for f in report["flips"]} == {CHANGED_TASK}
    assert run.not_regradable == 0
    # A preview changes nothing the figures read.
    assert _verdicts(campaigns) == original

    # The report's Δpass@1 is the change the stored figures show once applied.
    regrade_apply(run=run, user=alice)
    run.refresh_from_db()
    assert run.status == RegradeRun.Status.APPLIED
    assert _verdicts(campaigns) == {**original, **{pk: after for pk, (_, after) in expected_flips.items()}}
    tables = figures.per_task_tables(campaigns)
    pass_after = {c.pk: figures.campaign_figures(tables, c).pass_at_1.value for c in campaigns}
    for campaign in campaigns:
        row = run.report["campaigns"][str(campaign.pk)]
        assert row["before"]["pass_at_1"] == pytest.approx(pass_before[campaign.pk])
        assert row["after"]["pass_at_1"] == pytest.approx(pass_after[campaign.pk])
    assert pass_after != pass_before

    # The old verdicts stay readable: each flipped attempt's original grading, as it was stored.
    for pk, (before, after) in expected_flips.items():
        history = verdict_history(attempt_id=pk)
        assert [(v.kind, v.verdict) for v in history] == [("original", before), ("applied", after)]
        assert history[0].diff == results_before[pk]["diff"]
        assert history[0].checks == results_before[pk]["checks"]

    # Figures say which versions they come from; a second apply is refused.
    versions = figure_versions(campaigns)
    assert all(f"re-grade #{run.pk}" in versions[c.pk].tasks for c in campaigns)
    with pytest.raises(RegradeError):
        regrade_apply(run=run)
