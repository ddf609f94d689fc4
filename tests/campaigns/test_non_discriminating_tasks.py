"""Non-discriminating tasks stay in campaigns unless excluded explicitly; the campaign records and states it.

A task a do-nothing attempt passes is still gradable: ThinkingBox-Bench is 507 tasks, and a 507 x 5
campaign must queue 2,535 attempts, not silently 2,530.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.agents.services import agent_config_for
from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_create, campaign_replicate, campaign_start
from apps.suites.models import Task

pytestmark = pytest.mark.django_db

IDLE = "retail/ticket_hold_carrier_exception"  # marked non-discriminating below
BROKEN = "neobank/freeze_misplaced_card"  # marked invalid below


@pytest.fixture
def flagged_suite(starter_suite):
    """The starter suite with one non-discriminating and one invalid task."""
    Task.objects.filter(suite=starter_suite, task_id=IDLE).update(
        validation=Task.Validation.NON_DISCRIMINATING, validation_detail="a do-nothing attempt passes"
    )
    Task.objects.filter(suite=starter_suite, task_id=BROKEN).update(validation=Task.Validation.INVALID)
    return starter_suite


@pytest.fixture
def no_dispatch(monkeypatch):
    """Started attempts stay queued: no inline worker runs them."""
    from apps.campaigns import services

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)


def _create(suite, team, owner, **options) -> Campaign:
    return campaign_create(
        name="c",
        team=team,
        owner=owner,
        agent=agent_config_for("golden"),
        suite=suite,
        n_attempts=5,
        **options,
    )


def test_campaign_create_keeps_non_discriminating_tasks_by_default(flagged_suite, team_a, alice, no_dispatch):
    total = flagged_suite.tasks.count()

    campaign = _create(flagged_suite, team_a, alice)
    queued = campaign_start(campaign=campaign)

    task_ids = set(campaign.tasks.values_list("task_id", flat=True))
    assert (IDLE in task_ids, BROKEN in task_ids, len(task_ids)) == (True, False, total - 1)
    assert queued == Attempt.objects.filter(campaign=campaign).count() == 5 * (total - 1)
    assert (campaign.exclude_non_discriminating, campaign.non_discriminating_excluded) == (False, 0)
    assert campaign.non_discriminating_note == "includes 1 non-discriminating task"


def test_campaign_create_keeps_a_chosen_non_discriminating_task(flagged_suite, team_a, alice):
    campaign = _create(flagged_suite, team_a, alice, tasks=list(flagged_suite.tasks.filter(task_id=IDLE)))

    assert list(campaign.tasks.values_list("task_id", flat=True)) == [IDLE]


def test_campaign_create_with_the_option_excludes_them_and_records_how_many(flagged_suite, team_a, alice):
    total = flagged_suite.tasks.count()

    campaign = _create(flagged_suite, team_a, alice, exclude_non_discriminating=True)
    campaign.refresh_from_db()

    assert campaign.tasks.filter(task_id__in=[IDLE, BROKEN]).count() == 0
    assert campaign.tasks.count() == total - 2
    assert (campaign.exclude_non_discriminating, campaign.non_discriminating_excluded) == (True, 1)
    assert campaign.non_discriminating_note == "non-discriminating tasks excluded (1)"


def test_campaign_create_with_the_option_and_only_such_tasks_says_why_it_has_none(
    flagged_suite, team_a, alice
):
    idle = list(flagged_suite.tasks.filter(task_id=IDLE))

    with pytest.raises(ValueError) as raised:
        _create(flagged_suite, team_a, alice, tasks=idle, exclude_non_discriminating=True)

    assert (
        str(raised.value) == "no gradable tasks selected from suite starter (1 non-discriminating left out)"
    )


def test_campaign_without_such_tasks_says_so(starter_suite, team_a, alice):
    campaign = _create(starter_suite, team_a, alice)

    assert campaign.non_discriminating_note == "no non-discriminating tasks"


def test_replicate_keeps_the_roots_tasks_and_its_choice(flagged_suite, team_a, alice):
    root = _create(flagged_suite, team_a, alice, exclude_non_discriminating=True)

    replicate = campaign_replicate(campaign=root, owner=alice, start=False)
    replicate.refresh_from_db()

    assert set(replicate.tasks.values_list("pk", flat=True)) == set(root.tasks.values_list("pk", flat=True))
    assert (replicate.exclude_non_discriminating, replicate.non_discriminating_excluded) == (True, 1)


def _launch(client, suite, team, **extra):
    data = {
        "name": "launched",
        "team": team.pk,
        "agent": f"pk:{agent_config_for('golden').pk}",
        "suite": suite.pk,
        "n_attempts": 2,
        "seed": 0,
        "user_kind": "scripted",
        "judge_kind": "keyword",
    }
    return client.post("/campaigns/new/", data | extra)


def test_launch_form_keeps_non_discriminating_tasks_unless_ticked(
    client, alice, team_a, flagged_suite, no_dispatch
):
    client.force_login(alice)

    kept = _launch(client, flagged_suite, team_a, name="kept")
    left_out = _launch(client, flagged_suite, team_a, name="left out", exclude_non_discriminating="on")

    assert (kept.status_code, left_out.status_code) == (302, 302)
    kept_campaign, left_out_campaign = (
        Campaign.objects.get(name="kept"),
        Campaign.objects.get(name="left out"),
    )
    assert (kept_campaign.exclude_non_discriminating, kept_campaign.tasks.filter(task_id=IDLE).count()) == (
        False,
        1,
    )
    assert (
        left_out_campaign.exclude_non_discriminating,
        left_out_campaign.tasks.filter(task_id=IDLE).count(),
    ) == (
        True,
        0,
    )


def test_launch_form_offers_the_option(client, alice):
    client.force_login(alice)

    html = client.get("/campaigns/new/").content.decode()

    assert 'name="exclude_non_discriminating"' in html


def test_campaign_page_states_the_choice_and_flags_each_non_discriminating_task(
    client, bob, team_a, alice, flagged_suite
):
    kept = _create(flagged_suite, team_a, alice)
    left_out = campaign_create(
        name="left out",
        team=team_a,
        owner=alice,
        agent=agent_config_for("golden"),
        suite=flagged_suite,
        exclude_non_discriminating=True,
    )
    client.force_login(bob)

    kept_page = client.get(f"/campaigns/{kept.pk}/")
    left_out_page = client.get(f"/campaigns/{left_out.pk}/").content.decode()

    kept_html = kept_page.content.decode()
    assert '<span id="non-discriminating-note">includes 1 non-discriminating task</span>' in kept_html
    assert [task.task_id for task in kept_page.context["non_discriminating_tasks"]] == [IDLE]
    row = kept_html.split(f'<tr data-task="{IDLE}">', 1)[1].split("</tr>", 1)[0]
    assert '<span class="badge task-flag"' in row
    assert '<span id="non-discriminating-note">non-discriminating tasks excluded (1)</span>' in left_out_page
    assert 'id="non-discriminating-tasks"' not in left_out_page


def test_campaign_page_poll_skips_the_non_discriminating_query(client, bob, team_a, alice, flagged_suite):
    campaign = _create(flagged_suite, team_a, alice)
    client.force_login(bob)

    fragment = client.get(f"/campaigns/{campaign.pk}/", HTTP_HX_REQUEST="true")

    assert "non_discriminating_tasks" not in fragment.context


@pytest.fixture
def superuser_alice(alice):
    alice.is_superuser = True
    alice.save()
    return alice


def test_run_campaign_accepts_tasks_naming_a_non_discriminating_task(
    flagged_suite, superuser_alice, no_dispatch
):
    out = io.StringIO()

    call_command(
        "run_campaign", "--agent", "golden", "--repeat", "5", "--tasks", IDLE, "--owner", "alice", stdout=out
    )

    campaign = Campaign.objects.get()
    assert list(campaign.tasks.values_list("task_id", flat=True)) == [IDLE]
    assert out.getvalue().splitlines() == [
        f"campaign {campaign.pk} started: 5 attempts queued (includes 1 non-discriminating task)"
    ]


def test_run_campaign_exclude_option_is_recorded(flagged_suite, superuser_alice, no_dispatch):
    out = io.StringIO()
    total = flagged_suite.tasks.count()

    call_command(
        "run_campaign",
        "--agent",
        "golden",
        "--repeat",
        "1",
        "--exclude-non-discriminating",
        "--owner",
        "alice",
        stdout=out,
    )

    campaign = Campaign.objects.get()
    assert (campaign.exclude_non_discriminating, campaign.tasks.count()) == (True, total - 2)
    assert out.getvalue().splitlines() == [
        f"campaign {campaign.pk} started: {total - 2} attempts queued (non-discriminating tasks excluded (1))"
    ]


def test_run_campaign_exclude_option_refuses_a_selection_of_only_such_tasks(flagged_suite, superuser_alice):
    with pytest.raises(CommandError, match=r"\(1 non-discriminating left out\)"):
        call_command(
            "run_campaign",
            "--agent",
            "golden",
            "--tasks",
            IDLE,
            "--exclude-non-discriminating",
            "--owner",
            "alice",
        )
