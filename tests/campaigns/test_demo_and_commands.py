"""The demo's campaign steps and run_campaign, executed through the same attempt service as workers."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.agents.models import PriceSheet
from apps.attempts.models import Attempt, TaskSummary
from apps.campaigns.models import Campaign

pytestmark = pytest.mark.django_db(transaction=True)


def test_demo_runs_five_campaigns_over_the_whole_suite(settings):
    settings.DEBUG = True
    out = io.StringIO()

    call_command("demo", "--no-serve", "--repeat", "1", stdout=out)

    campaigns = Campaign.objects.order_by("name")
    assert [c.name for c in campaigns] == [
        "Demo · golden (harness self-check)",
        "Demo · sim:careless (simulated persona, not a model)",
        "Demo · sim:cautious (simulated persona, not a model)",
        "Demo · sim:explorer (simulated persona, not a model)",
        "Demo · sim:steady (simulated persona, not a model)",
    ]
    assert {c.status for c in campaigns} == {"done"}
    assert Attempt.objects.filter(status="done").count() == 5 * 56
    golden = campaigns[0]
    assert {(s.n_done, s.n_pass) for s in TaskSummary.objects.filter(campaign=golden)} == {(1, 1)}
    demo_sheet = PriceSheet.objects.get(name="Demo: simulated personas at illustrative prices")
    priced = Attempt.objects.filter(campaign__price_sheet=demo_sheet, campaign__agent__kind="sim")
    assert priced.filter(agent_cost__isnull=True).count() == 0
    assert "Demo campaigns: 280 attempts" in out.getvalue()


def test_demo_second_run_keeps_finished_campaigns(settings):
    settings.DEBUG = True
    call_command("demo", "--no-serve", "--repeat", "1", stdout=io.StringIO())
    out = io.StringIO()

    call_command("demo", "--no-serve", "--repeat", "1", stdout=out)

    assert Campaign.objects.count() == 5
    assert "Demo campaigns: already complete" in out.getvalue()


def test_run_campaign_command_runs_selected_tasks(starter_suite, alice):
    alice.is_superuser = True
    alice.save()
    out = io.StringIO()

    call_command(
        "run_campaign",
        "--agent",
        "golden",
        "--repeat",
        "2",
        "--wait",
        "--owner",
        "alice",
        "--tasks",
        "retail/ticket_hold_carrier_exception",
        "travel/"
        + starter_suite.tasks.filter(task_id__startswith="travel/").first().task_id.split("/", 1)[1],
        stdout=out,
    )

    campaign = Campaign.objects.get()
    assert campaign.status == "done"
    assert Attempt.objects.filter(campaign=campaign, verdict="pass").count() == 4
    assert (
        out.getvalue().splitlines()[-1]
        == f"campaign {campaign.pk}: 4 done, 4 passed (100.0%), 0 unjudged, 0 infra errors, 0 cancelled"
    )


def test_run_campaign_rejects_unknown_task_ids(starter_suite, alice):
    with pytest.raises(CommandError, match="unknown task ids in suite starter: retail/nope"):
        call_command("run_campaign", "--agent", "golden", "--tasks", "retail/nope", "--owner", "alice")


def test_run_campaign_rejects_unknown_persona(starter_suite, alice):
    with pytest.raises(CommandError, match="unknown simulated persona 'genius'"):
        call_command("run_campaign", "--agent", "sim:genius", "--owner", "alice")
