"""The operations view: campaign list progress, 0 workers alive, inline cancel/resume, launch form."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.attempts.models import Attempt
from apps.campaigns.selectors import campaign_progress

pytestmark = pytest.mark.django_db


def _start(campaign):
    """Queued attempts without dispatching to Celery (no worker in these tests)."""
    from apps.campaigns.models import Campaign

    Attempt.objects.bulk_create(
        Attempt(campaign=campaign, task=task, index=i)
        for task in campaign.tasks.all()
        for i in range(campaign.n_attempts)
    )
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.RUNNING)
    campaign.refresh_from_db()
    return campaign


def test_campaign_list_shows_progress_and_queued_with_no_workers(client, make_campaign, bob):
    campaign = _start(make_campaign("golden", tasks=3, n=2))
    first = campaign.attempts.order_by("pk")[:2]
    Attempt.objects.filter(pk__in=[a.pk for a in first]).update(
        status=Attempt.Status.DONE, finished_at=timezone.now()
    )
    client.force_login(bob)

    response = client.get("/campaigns/")
    html = response.content.decode()

    progress = response.context["rows"][0].progress
    assert (progress.finished, progress.planned, progress.queued) == (2, 6, 4)
    assert response.context["workers_alive"] == 0
    assert "queued — 0 workers alive" in html
    assert 'aria-valuenow="33"' in html


def test_cancelled_attempts_are_not_finished_nor_planned(make_campaign):
    campaign = _start(make_campaign("golden", tasks=2, n=2))
    attempts = list(campaign.attempts.order_by("pk"))
    Attempt.objects.filter(pk=attempts[0].pk).update(status=Attempt.Status.DONE, finished_at=timezone.now())
    Attempt.objects.filter(pk__in=[a.pk for a in attempts[1:]]).update(
        status=Attempt.Status.CANCELLED, finished_at=timezone.now()
    )

    progress = campaign_progress(campaign=campaign)

    assert (progress.finished, progress.planned, progress.percent) == (1, 1, 100.0)
    assert progress.throughput_per_min == 1.0  # the three cancelled attempts did no work


def test_running_campaign_with_live_worker_shows_running_count(client, make_campaign, bob):
    from apps.core.services import record_worker_heartbeat

    _start(make_campaign("golden", tasks=3, n=2))
    record_worker_heartbeat(hostname="w1@host")
    client.force_login(bob)

    html = client.get("/campaigns/").content.decode()

    assert "1 worker alive" in html
    assert "running 0/6" in html


def test_inline_cancel_from_the_list_returns_to_the_list(client, make_campaign, alice):
    campaign = _start(make_campaign("golden", tasks=1, n=2))
    client.force_login(alice)

    response = client.post(f"/campaigns/{campaign.pk}/cancel/", {"next": "list"})

    assert (response.status_code, response["Location"]) == (302, "/campaigns/")
    campaign.refresh_from_db()
    assert campaign.status == "cancelled"


def test_campaign_list_empty_names_the_team(client, erin):
    client.force_login(erin)

    html = client.get("/campaigns/").content.decode()

    assert "Team B has no campaigns yet" in html


@pytest.mark.parametrize("count", [1, 3])
def test_campaign_list_query_count_does_not_grow(
    client, make_campaign, bob, django_assert_max_num_queries, count
):
    for _ in range(count):
        _start(make_campaign("golden", tasks=1, n=1))
    client.force_login(bob)

    with django_assert_max_num_queries(9):
        response = client.get("/campaigns/")

    assert len(response.context["rows"]) == count


def test_launch_form_warns_without_workers_and_preselects_the_only_team(client, alice, team_a):
    client.force_login(alice)

    response = client.get("/campaigns/new/")
    html = response.content.decode()

    assert 'id="no-workers-warning"' in html
    assert response.context["form"].fields["team"].initial == team_a.pk


def _launch_data(team, agent, suite, **extra) -> dict:
    return {
        "name": "launched",
        "team": team.pk,
        "agent": f"pk:{agent.pk}",
        "suite": suite.pk,
        "n_attempts": 3,
        "seed": 0,
        "user_kind": "scripted",
        "judge_kind": "keyword",
    } | extra


def test_launch_form_offers_domains_tasks_user_simulator_and_judge_as_choices(client, alice, starter_suite):
    client.force_login(alice)

    response = client.get("/campaigns/new/")
    form = response.context["form"]
    html = response.content.decode()

    assert [name for name, _ in form.fields["domains"].choices] == sorted(
        set(starter_suite.domains.values_list("name", flat=True))
    )
    assert form.fields["tasks"].queryset.count() == starter_suite.tasks.count()
    assert [value for value, _ in form.fields["user_kind"].choices] == ["scripted", "llm"]
    assert [value for value, _ in form.fields["judge_kind"].choices] == ["keyword", "llm"]
    assert html.count('name="domains"') == len(form.fields["domains"].choices)  # one checkbox each
    assert '<fieldset id="id_domains-group"><legend>Domains</legend>' in html


def test_launch_with_chosen_tasks_and_an_llm_judge_stores_them(
    client, alice, team_a, starter_suite, monkeypatch
):
    from apps.agents.services import agent_config_for
    from apps.campaigns import services
    from apps.campaigns.models import Campaign

    monkeypatch.setattr(services, "campaign_dispatch", lambda **kwargs: 0)
    chosen = list(starter_suite.tasks.order_by("task_id")[:2])
    client.force_login(alice)

    response = client.post(
        "/campaigns/new/",
        _launch_data(
            team_a,
            agent_config_for("golden"),
            starter_suite,
            tasks=[t.pk for t in chosen],
            judge_kind="llm",
            judge_model="gpt-x",
            judge_base_url="http://127.0.0.1:9/v1",
            judge_api_key_env="TB_KEY_JUDGE",
            judge_prompt="Answer yes or no on the first line.",
        ),
    )

    campaign = Campaign.objects.get(name="launched")
    assert response.status_code == 302
    assert sorted(campaign.tasks.values_list("task_id", flat=True)) == [t.task_id for t in chosen]
    assert campaign.judge == {
        "kind": "llm",
        "model": "gpt-x",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "TB_KEY_JUDGE",
        "temperature": 0.0,
        "prompt": "Answer yes or no on the first line.",
    }
    assert campaign.user_simulator == {"kind": "scripted"}


def test_launch_form_reports_foreign_tasks_and_a_judge_without_endpoint_together(team_a, starter_suite):
    from apps.agents.services import agent_config_for
    from apps.campaigns.forms import CampaignLaunchForm
    from apps.core.models import Team
    from apps.suites.models import Domain, Suite, Task

    other = Suite.objects.create(name="other", version="1", content_hash="x")
    domain = Domain.objects.create(suite=other, name="retail", title="Retail")
    foreign = Task.objects.create(suite=other, domain=domain, task_id="other-1", content_hash="y", spec={})

    form = CampaignLaunchForm(
        _launch_data(
            team_a,
            agent_config_for("golden"),
            starter_suite,
            tasks=[foreign.pk],
            judge_kind="llm",
            judge_model="",
            judge_base_url="",
        ),
        teams=Team.objects.filter(pk=team_a.pk),
    )

    assert form.is_valid() is False
    assert form.errors["tasks"] == [f"not in suite {starter_suite.name}: {foreign.task_id}"]
    assert form.errors["judge_model"] == ["required for an LLM judge"]
    assert form.errors["judge_base_url"] == ["required for an LLM judge"]


def test_launch_estimate_prices_the_agents_stored_average_tokens_at_the_price_sheet(
    client, alice, team_a, starter_suite, make_campaign
):
    from decimal import Decimal

    from apps.agents.models import AgentConfig
    from apps.agents.services import price_sheet_create

    sheet = price_sheet_create(
        name="Sheet",
        source="test",
        effective_date=timezone.now().date(),
        models={"gpt-x": {"input": 2, "output": 10}},
    )
    agent = AgentConfig.objects.create(
        name="Model", kind="openai", model="gpt-x", base_url="http://127.0.0.1:9/v1"
    )
    earlier = make_campaign(agent, tasks=1, n=2)
    Attempt.objects.bulk_create(
        Attempt(
            campaign=earlier,
            task=earlier.tasks.get(),
            index=i,
            status="done",
            input_tokens=t,
            output_tokens=o,
        )
        for i, (t, o) in enumerate([(1000, 100), (3000, 300)])
    )
    client.force_login(alice)
    domain = starter_suite.domains.order_by("name").first()
    n_tasks = starter_suite.tasks.filter(domain=domain).count()

    html = client.get(
        "/campaigns/new/",
        _launch_data(team_a, agent, starter_suite, domains=domain.name, price_sheet=sheet.pk),
        HTTP_HX_REQUEST="true",
    ).content.decode()

    per_attempt = (Decimal(2000) * 2 + Decimal(200) * 10) / 1_000_000  # the averages, priced
    assert html.lstrip().startswith('<p id="launch-estimate"')
    assert f"{n_tasks} tasks × 3 = {n_tasks * 3} attempts" in html
    assert f"≈ ${per_attempt * n_tasks * 3:.4f} at {sheet}" in html
    assert "average tokens of this agent&#x27;s 2 finished attempts" in html


def test_launch_estimate_says_a_simulated_agent_costs_nothing(client, alice, team_a, starter_suite):
    from apps.agents.services import agent_config_for

    client.force_login(alice)

    html = client.get(
        "/campaigns/new/",
        _launch_data(team_a, agent_config_for("sim:careless"), starter_suite),
        HTTP_HX_REQUEST="true",
    ).content.decode()

    n_tasks = sum(1 for task in starter_suite.tasks.all() if task.is_gradable)
    assert f"{n_tasks} tasks × 3 = {n_tasks * 3} attempts" in html
    assert "no model tokens (a simulated agent costs nothing)" in html


def test_leaderboard_says_running_0_of_n_for_a_campaign_with_no_finished_attempt(client, bob, make_campaign):
    from apps.attempts.summaries import summary_refresh

    campaign = _start(make_campaign("sim:careless", tasks=3, n=12))
    summary_refresh(campaign_id=campaign.pk)
    client.force_login(bob)

    html = client.get("/leaderboard/").content.decode()
    row = html.split(f'<tr data-campaign="{campaign.pk}">')[1].split("</tr>")[0]

    assert "running 0/36 · no finished attempt yet, so no figures" in row
    assert 'class="num pass1"' not in row and "%" not in row


def test_compare_says_running_0_of_n_instead_of_comparing_a_campaign_with_no_finished_attempt(
    client, bob, make_campaign
):
    from apps.attempts.summaries import summary_refresh

    running = _start(make_campaign("sim:careless", tasks=3, n=12))
    other = _start(make_campaign("sim:steady", tasks=3, n=2))
    summary_refresh(campaign_id=running.pk)
    client.force_login(bob)

    response = client.get(f"/compare/?a={running.pk}&b={other.pk}")

    assert response.context["result"] is None
    assert response.context["error"] == (
        f"{running.name} is running 0/36: no finished attempt to compare yet · "
        f"{other.name} is running 0/6: no finished attempt to compare yet"
    )


def _running(make_campaign):
    """A started campaign (3 tasks × 12) with no finished attempt, its summaries current."""
    from apps.attempts.summaries import summary_refresh

    running = _start(make_campaign("sim:careless", tasks=3, n=12))
    summary_refresh(campaign_id=running.pk)
    return running


def test_gap_page_says_running_0_of_n_and_leaves_the_campaign_out_of_the_charts(client, bob, make_campaign):
    running = _running(make_campaign)
    client.force_login(bob)

    response = client.get("/gap/")
    html = response.content.decode()
    row = html.split(f'<tr data-campaign="{running.pk}">')[1].split("</tr>")[0]

    assert "running 0/36 · no finished attempt yet, so no figures" in row
    assert "%" not in row
    assert [p["running"] for p in response.context["points"]] == ["running 0/36"]
    assert response.context["scatter"]["figure"]["data"][1]["text"] == []  # no point at (0, 0)


def test_cost_page_says_running_0_of_n_instead_of_cost_per_result(client, bob, make_campaign):
    running = _running(make_campaign)
    client.force_login(bob)

    html = client.get("/cost/").content.decode()
    row = html.split(f'<tr data-campaign="{running.pk}">')[1].split("</tr>")[0]

    assert "running 0/36 · no finished attempt yet, so no cost per result" in row


def test_domains_page_names_a_running_campaign_and_leaves_it_out_of_ranks_and_pairs(
    client, bob, make_campaign
):
    running = _running(make_campaign)
    client.force_login(bob)

    response = client.get(f"/domains/?a={running.pk}&b={running.pk}")
    html = response.content.decode()

    assert (
        f"{running.name} is running 0/36: no finished attempt yet, so not in the heatmaps or the ranks."
        in html
    )
    assert response.context["rankings"] == []
    assert (
        response.context["pair_error"]
        == f"{running.name} is running 0/36: no finished attempt to compare yet"
    )
    assert response.context["deltas"] == []
