"""Calibration and estimate pages: every role, outsiders, query-count guards, the scatter's data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tb_engine.irt import CampaignOutcomes, calibrate, leave_one_out

pytestmark = pytest.mark.django_db

N = 6


@pytest.fixture
def stored_calibration(summaries_campaign, starter_suite, team_a, alice):
    """Four campaigns with counts set directly, and a calibration (with validation) on them."""
    from apps.adaptive.models import Calibration

    rng = np.random.default_rng(7)
    tasks = list(starter_suite.tasks.order_by("task_id").values_list("task_id", "domain__name")[:12])
    campaigns, outcomes = [], []
    for j, skill in enumerate((0.2, 0.45, 0.65, 0.85)):
        matrix = (
            rng.random((len(tasks), N)) < np.linspace(skill - 0.15, skill + 0.15, len(tasks))[:, None]
        ) * 1.0
        counts = {task_id: (N, int(matrix[i].sum())) for i, (task_id, _) in enumerate(tasks)}
        campaign = summaries_campaign(counts, name=f"family {j}", n=N, agent="sim:family-average")
        campaigns.append(campaign)
        outcomes.append(
            CampaignOutcomes(
                name=str(campaign.pk),
                task_ids=tuple(t for t, _ in tasks),
                domains=tuple(d for _, d in tasks),
                outcomes=matrix,
                n_attempts=N,
            )
        )
    cells = pd.concat([o.cells() for o in outcomes], ignore_index=True)
    fitted = calibrate(cells)
    row = Calibration.objects.create(
        suite=starter_suite,
        team=team_a,
        version=1,
        campaigns_key="k" * 64,
        dimensions=list(fitted.dimensions),
        n_tasks=fitted.n_tasks,
        n_campaigns=len(campaigns),
        model=fitted.to_dict(),
        validation=leave_one_out(outcomes, draws=100).to_dict(),
        seconds=fitted.seconds,
        created_by=alice,
    )
    row.campaigns.set(campaigns)
    return row


@pytest.mark.parametrize("url", ("/adaptive/", "/adaptive/suites/{suite}/"))
def test_calibration_pages_refuse_users_without_role(client, charlie, starter_suite, url):
    client.force_login(charlie)
    response = client.get(url.format(suite=starter_suite.pk))
    assert response.status_code == 403
    assert "this page needs the viewer role" in response.content.decode()


def test_calibration_pages_send_anonymous_users_to_login(client, starter_suite):
    response = client.get(f"/adaptive/suites/{starter_suite.pk}/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("persona", ("bob", "trish", "alice", "admin_user_persona"))
def test_suite_page_shows_the_calibration_to_every_role_of_the_team(
    client, request, stored_calibration, persona
):
    user = request.getfixturevalue(persona)
    client.force_login(user)
    response = client.get(f"/adaptive/suites/{stored_calibration.suite_id}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert response.context["calibration"] == stored_calibration
    assert 'id="chart-items"' in html
    assert 'id="mae-pass1"' in html
    assert ('id="calibrate-form"' in html) == (persona in ("alice", "admin_user_persona"))
    figure = response.context["scatter"]["figure"]
    points = sum(len(trace["x"]) for trace in figure["data"])
    assert points == stored_calibration.n_tasks
    assert figure["data"][-1]["name"] == "negative discrimination"


def test_suite_page_hides_other_teams_calibrations(client, erin, stored_calibration):
    client.force_login(erin)
    response = client.get(f"/adaptive/suites/{stored_calibration.suite_id}/")
    assert response.status_code == 200
    assert response.context["calibration"] is None
    assert 'id="no-calibration"' in response.content.decode()
    asked = client.get(
        f"/adaptive/suites/{stored_calibration.suite_id}/", {"calibration": stored_calibration.pk}
    )
    assert asked.status_code == 404


def test_suite_page_validation_table_matches_the_stored_replay(client, bob, stored_calibration):
    client.force_login(bob)
    response = client.get(f"/adaptive/suites/{stored_calibration.suite_id}/")
    validation = response.context["validation"]
    assert [r["campaign_obj"].name for r in validation["rows"]] == [f"family {j}" for j in range(4)]
    assert validation["pass_at_1_mae_pp"] == stored_calibration.validation["pass_at_1_mae_pp"]
    assert f"{validation['pass_at_1_mae_pp']:.2f} pp" in response.content.decode()


def test_viewer_cannot_start_a_calibration(client, bob, starter_suite, team_a):
    client.force_login(bob)
    response = client.post(f"/adaptive/suites/{starter_suite.pk}/", {"team": team_a.pk})
    assert response.status_code == 403


def test_operator_starts_a_calibration_of_the_team(client, alice, run_campaign, starter_suite, team_a):
    from apps.adaptive.models import Calibration

    for name in ("family-ace", "family-novice", "family-average"):
        run_campaign(f"sim:{name}", tasks=6, n=3)
    client.force_login(alice)
    response = client.post(f"/adaptive/suites/{starter_suite.pk}/", {"team": team_a.pk})
    assert response.status_code == 302
    row = Calibration.objects.get()
    assert (row.suite_id, row.team_id, row.version, row.n_campaigns) == (starter_suite.pk, team_a.pk, 1, 3)
    assert row.validation is None  # three campaigns: too few to leave one out


@pytest.mark.parametrize("count", (1, 3))
def test_suite_list_query_count(client, bob, starter_suite, team_a, django_assert_num_queries, count):
    from apps.adaptive.models import Calibration
    from apps.suites.models import Suite

    for i in range(count - 1):
        Suite.objects.create(name=f"extra-{i}", version="1", content_hash="x")
    for suite in Suite.objects.all():
        Calibration.objects.create(
            suite=suite, team=team_a, version=1, campaigns_key="k" * 64, model={}, n_campaigns=4
        )
    client.force_login(bob)
    with django_assert_num_queries(
        5
    ):  # the same for 1 and 3 suites (the user's role groups read once per request)
        response = client.get("/adaptive/")
    assert response.status_code == 200
    assert len(response.context["rows"]) == count


@pytest.mark.parametrize("count", (1, 3))
def test_suite_page_adaptive_campaigns_query_count(
    client, bob, make_campaign, starter_suite, django_assert_num_queries, count
):
    for _ in range(count):
        make_campaign("sim:family-ace", tasks=2, n=4, adaptive={})
    client.force_login(bob)
    with django_assert_num_queries(8):  # the same for 1 and 3 adaptive campaigns (one: the suite visible)
        response = client.get(f"/adaptive/suites/{starter_suite.pk}/")
    assert len(response.context["adaptive"]) == count


def test_estimate_page_labels_estimated_figures(client, bob, erin, make_campaign):
    from apps.adaptive.models import AdaptiveState

    campaign = make_campaign("sim:family-ace", tasks=3, n=4, adaptive={})
    AdaptiveState.objects.create(
        campaign=campaign,
        stop_reason="budget",
        attempts_used=3,
        budget=3,
        estimate={
            "estimated": True,
            "tasks": 3,
            "tasks_run": 2,
            "attempts_run": 3,
            "attempts_planned": 12,
            "attempts_share": 0.25,
            "n_attempts": 4,
            "ability": [0.5],
            "dimensions": ["all tasks"],
            "consistency": 1.0,
            "pass_at_1": {"value": 0.5, "lo": 0.4, "hi": 0.6},
            "all_n": {"value": 0.333, "count": 1.0, "lo": 0.0, "hi": 0.667},
            "cost_per_dependable_task": None,
        },
        estimate_attempts=3,
    )
    client.force_login(bob)
    response = client.get(f"/adaptive/campaigns/{campaign.pk}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "<strong>25% of the attempts</strong>" in html
    assert 'id="estimated-label"' in html
    assert '<td class="num">[0.400, 0.600]</td>' in html
    client.force_login(erin)
    assert client.get(f"/adaptive/campaigns/{campaign.pk}/").status_code == 404


def test_estimate_page_of_a_full_campaign_is_404(client, bob, make_campaign):
    campaign = make_campaign("golden", tasks=1, n=1)
    client.force_login(bob)
    assert client.get(f"/adaptive/campaigns/{campaign.pk}/").status_code == 404


def test_launch_page_starts_an_adaptive_campaign(client, alice, starter_suite, team_a):
    from apps.agents.services import agent_config_for
    from apps.campaigns.models import Campaign

    agent = agent_config_for("sim:family-ace")
    client.force_login(alice)
    response = client.post(
        "/campaigns/new/",
        {
            "name": "adaptive ace",
            "team": team_a.pk,
            "agent": f"pk:{agent.pk}",
            "suite": starter_suite.pk,
            "user_kind": "scripted",
            "judge_kind": "keyword",
            "n_attempts": 20,
            "seed": 0,
            "adaptive": "on",
            "budget_share": "0.25",
            "target_se": "0.01",
        },
    )
    campaign = Campaign.objects.get(name="adaptive ace")
    assert response.status_code == 302
    assert campaign.adaptive is True
    assert (campaign.adaptive_options["budget_share"], campaign.adaptive_options["target_se"]) == (0.25, 0.01)
    assert campaign.attempts.count() == 0  # no calibration: the dispatcher cancelled it, nothing ran
    assert campaign.status == Campaign.Status.RUNNING or campaign.status == Campaign.Status.CANCELLED


def test_leaderboard_marks_an_adaptive_campaigns_observed_figures(client, bob, make_campaign):
    from apps.attempts.models import TaskSummary

    campaign = make_campaign("sim:family-ace", tasks=1, n=4, adaptive={})
    TaskSummary.objects.create(campaign=campaign, task=campaign.tasks.get(), n_done=2, n_pass=2)
    full = make_campaign("golden", tasks=1, n=4)
    TaskSummary.objects.create(campaign=full, task=full.tasks.get(), n_done=4, n_pass=4)
    client.force_login(bob)
    html = client.get("/leaderboard/").content.decode()
    assert (
        html.count(f'<a class="badge" href="/adaptive/campaigns/{campaign.pk}/" title="An adaptive campaign')
        == 1
    )
    assert f'href="/adaptive/campaigns/{campaign.pk}/"' in html
