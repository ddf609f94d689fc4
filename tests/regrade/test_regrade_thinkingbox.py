"""Issue 29 on an imported ThinkingBox suite run on the real servers: a changed golden trajectory,
the impact report against a full re-run of the same seeded agents, applying it, the old verdicts kept.

The shared retail and booking tasks are imported with the real servers' launch command; campaigns
of seeded personas run in-process; then one task's golden trajectory (the one the server replays
for SG, ``init.golden_test_case``, and our parsed copy) loses its last write.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from apps.agents.services import agent_config_for
from apps.attempts.models import Attempt
from apps.campaigns.services import campaign_create, campaign_start
from apps.figures import selectors as figures
from apps.regrade.selectors import impact_report, verdict_history
from apps.regrade.services import regrade_apply, regrade_preview
from apps.suites.models import Suite, Task
from apps.worker.selectors import task_domain, task_spec_of
from tb_engine.attempt_setup import golden_writes
from tb_engine.spec_json import task_from_dict
from tests.campaigns.conftest import drain
from tests.regrade.test_regrade import _full_rerun_verdicts, _verdicts
from tests.thinkingbox.test_real_servers_worker import servers_command, shared_dataset

pytestmark = pytest.mark.django_db

TASK_IDS = (
    "sandbox_external_retail_group1.py:test_case_ST002_001",
    "external_booking_v1_group1.py:test_bmd_001",
)
CHANGED_TASK = TASK_IDS[1]
PERSONAS = ("golden", "sim:careless", "sim:explorer")


@pytest.fixture(autouse=True)
def _close_mcp_pools():
    yield
    from tb_engine.thinkingbox.mcp_pool import close_pools

    close_pools()


@pytest.fixture
def shared_suite(tmp_path, servers_python) -> Suite:
    dataset = shared_dataset(tmp_path / "dataset")
    listing = dataset / "regrade.yaml"
    listing.write_text("".join(f"- {task_id}\n" for task_id in TASK_IDS))
    call_command(
        "import_thinkingbox",
        "--dataset",
        str(dataset),
        "--test-list",
        str(listing),
        "--suite-name",
        "shared-tb-regrade",
        *servers_command(servers_python),
        stdout=StringIO(),
    )
    return Suite.objects.get(name="shared-tb-regrade")


def _campaign(suite, persona, alice, team_a):
    campaign = campaign_create(
        name=persona,
        team=team_a,
        owner=alice,
        agent=agent_config_for(persona),
        suite=suite,
        n_attempts=4,
    )
    campaign_start(campaign=campaign)
    drain(campaign)
    campaign.refresh_from_db()
    assert campaign.status == "done"
    return campaign


def _drop_last_golden_write(task: Task) -> None:
    spec = task.spec
    index = golden_writes(task_domain(task), task_spec_of(task)).writes[-1]
    del spec["golden"][index]
    del spec["extra"]["init"]["golden_test_case"]["tool_interactions"][index]
    task.spec = spec
    task.content_hash = task_from_dict(spec).content_hash()
    task.save(update_fields=["spec", "content_hash"])


def test_a_changed_thinkingbox_golden_flips_exactly_what_a_full_rerun_flips(shared_suite, alice, team_a):
    _changed_golden_flips_exactly_what_a_full_rerun_flips(shared_suite, alice, team_a)


@pytest.mark.integration
def test_on_postgresql_a_changed_thinkingbox_golden_flips_exactly_what_a_full_rerun_flips(
    shared_suite, alice, team_a
):
    """The same on PostgreSQL, where the re-grade reads the state record through its jsonb projection."""
    _changed_golden_flips_exactly_what_a_full_rerun_flips(shared_suite, alice, team_a)


def _changed_golden_flips_exactly_what_a_full_rerun_flips(shared_suite, alice, team_a):
    campaigns = [_campaign(shared_suite, persona, alice, team_a) for persona in PERSONAS]
    original = _verdicts(campaigns)
    assert set(Attempt.objects.filter(campaign__in=campaigns).values_list("status", flat=True)) == {"done"}
    results_before = dict(Attempt.objects.filter(campaign__in=campaigns).values_list("pk", "result"))
    tables = figures.per_task_tables(campaigns)
    pass_before = {c.pk: figures.campaign_figures(tables, c).pass_at_1.value for c in campaigns}

    unchanged = regrade_preview(campaign_ids=[c.pk for c in campaigns], team_id=team_a.pk)
    assert (unchanged.report["changed"], unchanged.not_regradable, unchanged.regraded) == (
        0,
        0,
        len(original),
    )

    task = Task.objects.get(task_id=CHANGED_TASK, suite=shared_suite)
    old_spec = task_spec_of(task)
    _drop_last_golden_write(task)
    rerun = {}
    for campaign in campaigns:
        rerun.update(_full_rerun_verdicts(campaign, task, old_spec))
    expected_flips = {pk: (original[pk], verdict) for pk, verdict in rerun.items() if verdict != original[pk]}
    assert ("pass", "fail") in expected_flips.values()

    run = regrade_preview(campaign_ids=[c.pk for c in campaigns], team_id=team_a.pk, user=alice)
    report = impact_report(run)
    assert {f.attempt_id: (f.before, f.after) for f in report["flips"]} == expected_flips
    assert run.not_regradable == 0
    assert _verdicts(campaigns) == original

    regrade_apply(run=run, user=alice)
    assert _verdicts(campaigns) == {**original, **{pk: after for pk, (_, after) in expected_flips.items()}}
    tables = figures.per_task_tables(campaigns)
    pass_after = {c.pk: figures.campaign_figures(tables, c).pass_at_1.value for c in campaigns}
    assert pass_after != pass_before
    for campaign in campaigns:
        row = run.report["campaigns"][str(campaign.pk)]
        assert row["after"]["pass_at_1"] == pytest.approx(pass_after[campaign.pk])
    for pk, (before, after) in expected_flips.items():
        history = verdict_history(attempt_id=pk)
        assert [(v.kind, v.verdict) for v in history] == [("original", before), ("applied", after)]
        assert history[0].diff == results_before[pk]["diff"]


def test_an_attempt_stored_without_a_state_record_is_reported_not_regradable(shared_suite, alice, team_a):
    campaign = _campaign(shared_suite, "golden", alice, team_a)
    older = Attempt.objects.filter(campaign=campaign).order_by("pk").first()
    result = older.result
    del result["extra"]["thinkingbox"]["state_record"]
    Attempt.objects.filter(pk=older.pk).update(result=result)
    run = regrade_preview(campaign_ids=[campaign.pk], team_id=team_a.pk)
    assert run.not_regradable == 1
    from tb_engine.thinkingbox.regrade_mcp import NO_RECORD

    assert run.report["not_regradable_reasons"] == {NO_RECORD: 1}
