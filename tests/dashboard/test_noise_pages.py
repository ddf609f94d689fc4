"""Noise floor on the pages: tied bands on the leaderboard, floor verdicts on compare and domains,
the noise page with replicate sets, and the attempts planner."""

from __future__ import annotations

import pytest

from apps.campaigns.services import campaign_replicate
from apps.figures import selectors as figures

pytestmark = pytest.mark.django_db

T = ["retail/ticket_hold_carrier_exception", "neobank/freeze_misplaced_card"]


@pytest.fixture
def tasks(starter_suite):
    return list(starter_suite.tasks.order_by("task_id").values_list("task_id", flat=True)[:24])


@pytest.fixture
def three_campaigns(summaries_campaign, tasks):
    """A and B differ by one pass on one task (tied); C is far below both."""
    a = summaries_campaign(
        {t: (4, 4 if i % 2 == 0 else 2) for i, t in enumerate(tasks)}, name="A strong", n=4
    )
    b = summaries_campaign(
        {t: (4, (4 if i % 2 == 0 else 2) - (i == 1)) for i, t in enumerate(tasks)}, name="B strong", n=4
    )
    c = summaries_campaign(dict.fromkeys(tasks, (4, 0)), name="C weak", n=4)
    return a, b, c


def test_leaderboard_groups_tied_campaigns_into_one_band_and_ranks_the_rest(client, bob, three_campaigns):
    a, b, c = three_campaigns
    client.force_login(bob)

    response = client.get("/leaderboard/?sort=pass1&dir=desc")

    rows = {row.campaign.pk: row for row in response.context["rows"]}
    assert (rows[a.pk].band.label, rows[b.pk].band.label, rows[c.pk].band.label) == ("=1", "=1", "3")
    assert rows[b.pk].band.leader == "A strong"
    assert rows[b.pk].band.delta_to_leader == pytest.approx(-0.25 / 24)
    assert rows[b.pk].band.mdd_to_leader > abs(rows[b.pk].band.delta_to_leader)
    groups = response.context["groups"]
    assert [[row.campaign.pk for row in members] for _, members in groups] == [[a.pk, b.pk], [c.pk]]
    html = response.content.decode()
    assert 'tbody class="band tied" data-band="1"' in html
    assert "Rank =1 · 2 campaigns tied" in html


def test_leaderboard_sorted_by_cost_keeps_pass1_ranks_without_grouping(client, bob, three_campaigns):
    client.force_login(bob)
    response = client.get("/leaderboard/?sort=name")
    assert len(response.context["groups"]) == 1
    assert response.context["rank_label"] == "pass@1"
    assert [row.band.label for row in response.context["rows"]] == ["=1", "=1", "3"]


def test_leaderboard_ranks_by_all_n_when_sorted_by_it(client, bob, three_campaigns):
    a, b, c = three_campaigns
    client.force_login(bob)
    rows = client.get("/leaderboard/?sort=alln").context["rows"]
    assert {row.campaign.pk: row.band.metric for row in rows} == dict.fromkeys([a.pk, b.pk, c.pk], "all_n")
    assert {row.campaign.pk: row.band.label for row in rows}[c.pk] == "3"


def test_compare_page_says_in_words_whether_each_delta_clears_the_floor(client, bob, three_campaigns):
    a, b, c = three_campaigns
    client.force_login(bob)

    tied = client.get(f"/compare/?a={a.pk}&b={b.pk}").content.decode()
    clear = client.get(f"/compare/?a={a.pk}&b={c.pk}").content.decode()

    assert 'id="floor-pass1">Below the noise floor' in tied
    assert "pass@1 is tied; a rerun could reverse it." in tied
    assert 'id="floor-pass1">Clears the noise floor' in clear
    assert "a real difference in pass@1, not run-to-run noise." in clear


def test_domains_page_ranks_campaigns_per_domain_and_flags_deltas_against_their_floor(
    client, bob, three_campaigns
):
    a, b, c = three_campaigns
    client.force_login(bob)
    response = client.get(f"/domains/?a={a.pk}&b={c.pk}")
    rankings = response.context["rankings"]
    assert [r.domain for r in rankings] == sorted({r.domain for r in rankings})
    for ranking in rankings:
        names = [campaign.name for campaign, _, _ in ranking.rows]
        assert names[-1] == "C weak"
    delta = response.context["deltas"][0]
    assert delta["floor"].delta_pass_at_1.clears is True
    assert 'class="floor-word clears">clears' in response.content.decode()


def test_noise_page_shows_se_and_rerun_floor_per_campaign_and_domain(client, bob, three_campaigns):
    a, _, _ = three_campaigns
    client.force_login(bob)
    response = client.get("/noise/")
    campaign, metrics = next(row for row in response.context["rows"] if row[0].pk == a.pk)
    expected = figures.campaign_noise(figures.per_task_tables([a]), a)
    assert metrics == expected.scope("")
    domain = response.context["domains"][0]
    fragment = client.get(f"/noise/?domain={domain}", HTTP_HX_REQUEST="true")
    assert fragment.content.decode().lstrip().startswith('<div id="noise-table"')
    assert dict(fragment.context["rows"])[a] == expected.scope(domain)


def test_noise_page_shows_replicate_sets_with_observed_spread_beside_the_floor(
    client, alice, bob, run_campaign
):
    original = run_campaign("sim:explorer", tasks=6, n=4, name="Explorer")
    from tests.campaigns.conftest import drain

    replicate = campaign_replicate(campaign=original, owner=alice)
    drain(replicate)
    client.force_login(bob)

    sets = client.get("/noise/").context["sets"]

    assert len(sets) == 1
    replicate_set = sets[0]["set"]
    assert [m.pk for m in replicate_set.members] == [original.pk, replicate.pk]
    pass1 = next(s for s in replicate_set.spreads if s.metric == "pass_at_1")
    assert pass1.pairs == 1
    assert pass1.max_abs_delta == pytest.approx(abs(pass1.values[0] - pass1.values[1]))
    assert pass1.rerun_mdd is not None and pass1.expected_sd is not None


def test_planner_answers_tasks_times_attempts_and_cost(client, bob, run_campaign):
    from apps.agents.services import price_sheet_default

    pilot = run_campaign("sim:explorer", tasks=8, n=4, name="Pilot", price_sheet=price_sheet_default())
    client.force_login(bob)

    response = client.get(f"/planner/?campaigns={pilot.pk}&mode=drift&target_pp=10")

    plan = response.context["plan"]
    assert plan.problem == ""
    assert plan.inputs.tasks_available == 56
    assert plan.inputs.pilot_tasks == 8
    assert {row.attempts for row in plan.rows} >= {1, 4, 20}
    assert plan.cheapest.mdd_with_all_tasks <= 0.10 or plan.cheapest.tasks_needed <= 56
    assert 'id="plan-answer"' in response.content.decode()


def test_planner_ab_without_a_second_campaign_explains_what_is_missing(client, bob, run_campaign):
    pilot = run_campaign("sim:explorer", tasks=4, n=2, name="Pilot")
    client.force_login(bob)
    plan = client.get(f"/planner/?campaigns={pilot.pk}&mode=ab&target_pp=10").context["plan"]
    assert plan.rows == ()
    assert plan.problem.startswith("an A/B plan needs two campaigns")


@pytest.mark.parametrize("url", ["/noise/", "/planner/", "/drift/"])
def test_new_pages_refuse_users_without_a_role(client, charlie, url):
    client.force_login(charlie)
    response = client.get(url)
    assert response.status_code == 403


@pytest.mark.parametrize("url", ["/noise/", "/planner/"])
def test_new_pages_hide_other_teams_campaigns(client, erin, run_campaign, url):
    run_campaign("golden", tasks=1, n=1, name="Team A secret campaign")
    client.force_login(erin)
    response = client.get(url)
    assert response.status_code == 200
    assert "Team A secret campaign" not in response.content.decode()


@pytest.mark.parametrize("url", ["/noise/", "/leaderboard/"])
def test_noise_list_pages_query_count_does_not_grow_with_campaigns(client, bob, summaries_campaign, url):
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.figures.services import figures_refresh
    from apps.figures.tables import forget_process_figures

    def as_a_fresh_process_after_the_campaigns_finished(campaigns) -> None:
        figures_refresh(campaign_ids=[c.pk for c in campaigns])  # what the end of a campaign stores
        client.get(url)  # and what the first viewer computed over several campaigns (bands, grid)
        cache.clear()
        forget_process_figures()

    client.force_login(bob)
    campaigns = [summaries_campaign({T[0]: (2, 1), T[1]: (2, 2)}, name="C1", n=2)]
    as_a_fresh_process_after_the_campaigns_finished(campaigns)
    with CaptureQueriesContext(connection) as one:
        assert client.get(url).status_code == 200
    campaigns.append(summaries_campaign({T[0]: (2, 0), T[1]: (2, 2)}, name="C2", n=2))
    campaigns.append(summaries_campaign({T[0]: (2, 2), T[1]: (2, 2)}, name="C3", n=2))
    as_a_fresh_process_after_the_campaigns_finished(campaigns)
    with CaptureQueriesContext(connection) as three:
        assert client.get(url).status_code == 200
    assert len(three.captured_queries) == len(one.captured_queries)
