"""Dashboard pages: figures, access, htmx fragments, caching, query counts."""

from __future__ import annotations

import pytest

from apps.attempts.models import Attempt, TaskSummary
from apps.dashboard.models import ExternalScore

pytestmark = pytest.mark.django_db

T1, T2, T3 = (
    "retail/ticket_hold_carrier_exception",
    "neobank/freeze_misplaced_card",
    "travel/cancel_flexible_full_refund",
)
PAGES = ("/leaderboard/", "/gap/", "/cost/", "/domains/", "/tasks/", "/compare/")


def test_leaderboard_pins_golden_campaign_as_harness_check_not_ranked(client, bob, run_campaign):
    golden = run_campaign("golden", tasks=3, n=2, name="Golden self-check")
    client.force_login(bob)

    response = client.get("/leaderboard/")
    html = response.content.decode()

    assert [row.campaign.pk for row in response.context["harness_rows"]] == [golden.pk]
    assert response.context["rows"] == []  # never ranked among models
    pinned = html[html.index('<tbody class="pinned"') : html.index("</tbody>")]
    assert "harness ✓" in pinned
    assert "golden run solved all 3 tasks" in pinned
    assert "Golden self-check" in pinned  # the long name, on hover and beside "not ranked"


def test_leaderboard_ranks_by_all_n_by_default(client, bob, summaries_campaign):
    # Often: high pass@1 but no task solved every time; Always: lower pass@1, one task always solved.
    summaries_campaign({T1: (4, 3), T2: (4, 3), T3: (4, 3)}, name="Often", n=4)
    summaries_campaign({T1: (4, 4), T2: (4, 0), T3: (4, 0)}, name="Always", n=4)
    client.force_login(bob)

    response = client.get("/leaderboard/")

    assert response.context["sort"] == "alln"
    assert [row.campaign.name for row in response.context["rows"]] == ["Always", "Often"]
    assert response.context["rank_label"] == "all-N share"


def test_leaderboard_bounds_one_good_attempt_and_nineteen_infra_errors(client, bob, summaries_campaign):
    shaky = summaries_campaign({T1: (1, 1)}, name="Shaky", n=20)
    TaskSummary.objects.filter(campaign=shaky).update(n_infra_error=19)
    complete = summaries_campaign({T1: (20, 20)}, name="Complete", n=20)
    client.force_login(bob)

    response = client.get("/leaderboard/")
    html = response.content.decode()

    figures = {row.campaign.name: row.figures for row in response.context["rows"]}
    assert (figures["Shaky"].coverage_bounds.missing_attempts, figures["Shaky"].coverage_bounds.all_n.lo) == (
        19,
        0.0,
    )

    def row_of(campaign):
        row = html[html.index(f'<tr data-campaign="{campaign.pk}"') :]
        return row[: row.index("</tr>")]

    # pass^5, pass^20 and all-20 all read "could be anything from never to always", not dependable.
    assert row_of(shaky).count("0.0% to 100.0% if the 19 missing failed / passed") == 3
    assert "missing failed / passed" not in row_of(complete)  # nothing missing: no bounds


def test_leaderboard_column_presets_choose_the_columns(client, bob, summaries_campaign):
    summaries_campaign({T1: (4, 3)}, name="Some", n=4)
    client.force_login(bob)

    reliability = client.get("/leaderboard/").content.decode()
    cost = client.get("/leaderboard/?preset=cost").content.decode()
    discovery = client.get("/leaderboard/?preset=discovery").content.decode()

    for html in (reliability, cost, discovery):
        assert ">$/dependable<" in html  # the cost of dependability is in every preset
    assert ">pass^5<" in reliability and ">pass^5<" not in cost
    assert ">$/attempt<" in cost and ">$/attempt<" not in reliability
    assert ">pass@10<" in discovery and ">pass@10<" not in reliability


def test_leaderboard_short_name_keeps_long_name_on_hover(client, bob, summaries_campaign):
    long_name = "gpt-frontier-2025-11 · temperature 0.7 · retail + neobank · seed 42"
    summaries_campaign({T1: (4, 3)}, name=long_name, n=4)
    client.force_login(bob)

    html = client.get("/leaderboard/").content.decode()

    assert f'title="{long_name} · N = 4 · 1 tasks">gpt-frontier-2025-11 · te…</a>' in html.replace(
        "&#x27;", "'"
    )


def test_home_redirects_role_holders_to_leaderboard(client, bob):
    client.force_login(bob)

    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/leaderboard/"


@pytest.mark.parametrize("url", PAGES)
def test_pages_refuse_users_without_role(client, charlie, url):
    client.force_login(charlie)

    response = client.get(url)

    assert response.status_code == 403
    assert "this page needs the viewer role" in response.content.decode()


@pytest.mark.parametrize("url", ("/leaderboard/", "/gap/", "/cost/", "/domains/", "/tasks/"))
def test_pages_hide_other_teams_campaigns(client, erin, run_campaign, url):
    run_campaign("golden", tasks=1, n=1, name="Team A secret campaign")
    client.force_login(erin)

    response = client.get(url)

    assert response.status_code == 200
    assert "Team A secret campaign" not in response.content.decode()


def test_leaderboard_htmx_request_returns_only_the_table_fragment(client, bob, run_campaign):
    run_campaign("golden", tasks=2, n=1, name="Golden")
    client.force_login(bob)

    html = client.get("/leaderboard/?sort=name", HTTP_HX_REQUEST="true").content.decode()

    assert html.lstrip().startswith('<div id="leaderboard-table"')
    assert "<html" not in html
    assert "Golden" in html


def test_leaderboard_domain_filter_averages_over_that_domain_only(client, bob, summaries_campaign):
    summaries_campaign({T1: (4, 4), T2: (4, 0)}, name="Mixed", n=4)
    client.force_login(bob)

    retail = client.get("/leaderboard/?domain=retail", HTTP_HX_REQUEST="true").content.decode()
    neobank = client.get("/leaderboard/?domain=neobank", HTTP_HX_REQUEST="true").content.decode()

    assert '100.0%<span class="ci">' in retail
    assert '0.0%<span class="ci">' in neobank
    assert '100.0%<span class="ci">' not in neobank


def test_leaderboard_sorts_by_pass_at_1_both_ways(client, bob, summaries_campaign):
    summaries_campaign({T1: (4, 1)}, name="Weak", n=4)
    summaries_campaign({T1: (4, 3)}, name="Strong", n=4)
    client.force_login(bob)

    down = client.get("/leaderboard/?sort=pass1&dir=desc").content.decode()
    up = client.get("/leaderboard/?sort=pass1&dir=asc").content.decode()

    assert down.index(">Strong<") < down.index(">Weak<")
    assert up.index(">Weak<") < up.index(">Strong<")


def test_leaderboard_flags_reversal_between_pass_at_n_and_all_n(client, bob, summaries_campaign):
    # Broad: solves all three tasks sometimes, none every time. Narrow: one task every time, nothing else.
    summaries_campaign({T1: (4, 2), T2: (4, 1), T3: (4, 3)}, name="Broad", n=4)
    summaries_campaign({T1: (4, 4), T2: (4, 0), T3: (4, 0)}, name="Narrow", n=4)
    summaries_campaign({T1: (4, 0), T2: (4, 0), T3: (4, 0)}, name="Nothing", n=4)
    client.force_login(bob)

    html = client.get("/leaderboard/").content.decode()

    assert html.count("this campaign and Narrow in opposite order") == 1
    assert html.count("this campaign and Broad in opposite order") == 1
    assert "and Nothing in opposite order" not in html


def test_leaderboard_recomputes_when_an_attempt_changes(client, bob, run_campaign):
    from apps.attempts.summaries import summary_refresh

    campaign = run_campaign("golden", tasks=1, n=2, name="Golden")
    client.force_login(bob)
    assert "harness ✓" in client.get("/leaderboard/").content.decode()

    Attempt.objects.filter(campaign=campaign, index=0).update(verdict=Attempt.Verdict.FAIL)
    summary_refresh(campaign_id=campaign.pk)
    response = client.get("/leaderboard/")

    assert response.context["harness_rows"][0].figures.pass_at_1.value == 0.5
    assert "harness ✗" in response.content.decode()


def test_leaderboard_shows_external_scores_with_spearman(client, alice, summaries_campaign):
    weak = summaries_campaign({T1: (4, 1)}, name="Weak", n=4)
    mid = summaries_campaign({T1: (4, 2)}, name="Mid", n=4)
    strong = summaries_campaign({T1: (4, 3)}, name="Strong", n=4)
    client.force_login(alice)
    for campaign, score in ((weak, 10.0), (mid, 30.0)):
        client.post(
            "/leaderboard/scores/", {"campaign": campaign.pk, "benchmark": "vendor-bench", "score": score}
        )
    client.post("/leaderboard/scores/", {"campaign": strong.pk, "benchmark": "vendor-bench", "score": 20.0})

    html = client.get("/leaderboard/").content.decode()

    assert ExternalScore.objects.count() == 3
    assert "vendor-bench" in html
    assert ">0.50<" in html  # ranks (1,2,3) vs (1,3,2): rho = 0.5


def test_external_score_for_invisible_campaign_is_rejected(client, make_user, team_b, summaries_campaign):
    campaign = summaries_campaign({T1: (1, 1)}, name="A's", n=1)
    outsider = make_user("oscar", role="operator", teams=[team_b])
    client.force_login(outsider)

    client.post("/leaderboard/scores/", {"campaign": campaign.pk, "benchmark": "x", "score": 1})

    assert ExternalScore.objects.count() == 0


def test_gap_page_plots_each_campaign_against_the_diagonal(client, bob, summaries_campaign):
    summaries_campaign({T1: (4, 2), T2: (4, 4)}, name="Half dependable", n=4)
    client.force_login(bob)

    response = client.get("/gap/")

    scatter = response.context["scatter"]["figure"]
    assert scatter["data"][1]["x"] == [100.0]
    assert scatter["data"][1]["y"] == [50.0]
    assert "+50.0 pp" in response.content.decode()
    overall = response.context["overall"]["figure"]["data"][0]
    # pass^k: T1 C(2,k)/C(4,k) = .5, 1/6, 0, 0 ; T2 = 1 -> means .75, 7/12, .5, .5
    assert [round(v, 3) for v in overall["y"]] == [75.0, 58.333, 50.0, 50.0]
    assert [entry["domain"] for entry in response.context["per_domain"]] == ["neobank", "retail"]


def test_domains_page_shows_heatmaps_and_coloured_deltas(client, bob, summaries_campaign):
    a = summaries_campaign({T1: (2, 2), T2: (2, 0)}, name="Tuned", n=2)
    b = summaries_campaign({T1: (2, 1), T2: (2, 2)}, name="Base", n=2)
    client.force_login(bob)

    response = client.get(f"/domains/?a={a.pk}&b={b.pk}")

    heat = response.context["heatmaps"][0]["chart"]["figure"]["data"][0]
    assert heat["x"] == ["neobank", "retail"]
    assert heat["y"] == ["Base", "Tuned"]  # newest campaign first
    assert heat["z"] == [[100.0, 50.0], [0.0, 100.0]]
    html = response.content.decode()
    assert 'class="num gain">+50.0 pp' in html
    assert 'class="num loss">-100.0 pp' in html


def test_tasks_grid_filters_never_solved_and_flaky(client, bob, summaries_campaign):
    summaries_campaign({T1: (2, 2), T2: (2, 0), T3: (2, 1)}, name="One", n=2)
    summaries_campaign({T1: (2, 0), T2: (2, 0), T3: (2, 1)}, name="Two", n=2)
    client.force_login(bob)

    def tasks_for(kind):
        page = client.get(f"/tasks/?filter={kind}").context["page"]
        return [row.task_id for row in page]

    assert tasks_for("never") == [T2]
    assert tasks_for("flaky") == [T1]
    assert tasks_for("unreliable") == [T3]
    assert tasks_for("") == [T2, T1, T3]


def test_compare_reports_deltas_gains_and_sharpening(client, bob, summaries_campaign):
    # A: higher pass@1 (T1 always) but never touches T2/T3; B finds every task sometimes.
    a = summaries_campaign({T1: (4, 4), T2: (4, 0), T3: (4, 0)}, name="Sharp", n=4)
    b = summaries_campaign({T1: (4, 1), T2: (4, 1), T3: (4, 1)}, name="Broad", n=4)
    client.force_login(bob)

    result = client.get(f"/compare/?a={a.pk}&b={b.pk}").context["result"]
    html = client.get(f"/compare/?a={a.pk}&b={b.pk}", HTTP_HX_REQUEST="true").content.decode()

    assert result.gained == (T1,)
    assert result.lost == ()
    assert result.sharpening is True
    assert html.lstrip().startswith('<div id="compare-body"')
    assert 'id="sharpening"' in html
    assert "+8.3 pp" in html  # Δpass@1 = (1 + 0 + 0)/3 - 0.25


def test_compare_refuses_campaigns_with_different_n(client, bob, summaries_campaign):
    a = summaries_campaign({T1: (4, 4)}, name="N4", n=4)
    b = summaries_campaign({T1: (2, 2)}, name="N2", n=2)
    client.force_login(bob)

    html = client.get(f"/compare/?a={a.pk}&b={b.pk}").content.decode()

    assert "campaigns have different N (4 vs 2)" in html


def test_cost_whatif_recomputes_from_token_sums_without_writing(client, bob, summaries_campaign):
    campaign = summaries_campaign({T1: (2, 2), T2: (2, 0)}, name="Priced", n=2)
    TaskSummary.objects.filter(campaign=campaign).update(
        input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=200_000, reasoning_tokens=50_000
    )
    client.force_login(bob)
    before = list(TaskSummary.objects.values_list("agent_cost", "input_tokens"))

    response = client.post(
        "/cost/",
        {"campaign": campaign.pk, "input": "2", "cached_input": "1", "output": "10", "reasoning": "20"},
    )

    # Two tasks: uncached 1.2M * 2 + cached 0.8M * 1 + visible output 0.3M * 10 + reasoning 0.1M * 20 = 8.2 USD
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="whatif-result"')
    cells = [cell.split("<")[0] for cell in html.split('<td class="num">')[1:5]]
    assert cells == [
        "$8.2000",
        "$2.0500",
        "$4.1000",
        "$8.2000",
    ]  # total, per attempt (4), per success (2), per dependable (1)
    assert list(TaskSummary.objects.values_list("agent_cost", "input_tokens")) == before


def test_cost_page_shows_price_sheet_source_and_date(client, bob, run_campaign):
    from apps.agents.services import price_sheet_default

    sheet = price_sheet_default()
    run_campaign("golden", tasks=1, n=1, name="Golden", price_sheet=sheet)
    client.force_login(bob)

    html = client.get("/cost/").content.decode()

    assert str(sheet.effective_date) in html
    assert "Vendors&#x27; public API pricing pages" in html


@pytest.mark.parametrize("url", PAGES)
def test_list_pages_query_count_does_not_grow_with_campaigns(
    client, bob, summaries_campaign, django_assert_max_num_queries, url
):
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
    campaigns = [summaries_campaign({T1: (2, 1), T2: (2, 2)}, name="C1", n=2)]
    as_a_fresh_process_after_the_campaigns_finished(campaigns)
    with CaptureQueriesContext(connection) as one:
        assert client.get(url).status_code == 200
    campaigns.append(summaries_campaign({T1: (2, 0), T2: (2, 2)}, name="C2", n=2))
    campaigns.append(summaries_campaign({T1: (2, 2), T2: (2, 2)}, name="C3", n=2))
    as_a_fresh_process_after_the_campaigns_finished(campaigns)
    with CaptureQueriesContext(connection) as three:
        assert client.get(url).status_code == 200

    assert len(three.captured_queries) == len(one.captured_queries)
