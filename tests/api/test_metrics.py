"""Metric endpoints return the pages' own numbers (same figures selectors, same cache, same seed)."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from apps.figures import selectors as figures
from apps.figures.selectors import figure_campaigns
from tests.api.conftest import error_of
from tests.triage.conftest import _seeded_labels, attempts_campaign, flagged  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

T1, T2, T3 = (
    "retail/ticket_hold_carrier_exception",
    "neobank/freeze_misplaced_card",
    "travel/cancel_flexible_full_refund",
)


def _json(value):
    """What a value looks like after a JSON round trip (dict keys become strings)."""
    return json.loads(json.dumps(value))


@pytest.fixture
def two_campaigns(summaries_campaign):
    """Exact per-task counts: A dependable on T1 only; B solves more tasks once but none dependably."""
    a = summaries_campaign({T1: (4, 4), T2: (4, 1), T3: (4, 0)}, name="A", n=4)
    b = summaries_campaign({T1: (4, 3), T2: (4, 2), T3: (4, 1)}, name="B", n=4)
    return a, b


def test_leaderboard_rows_equal_the_dashboard_figures(api_for, bob, two_campaigns):
    a, b = two_campaigns

    data = api_for(bob).get("/api/metrics/leaderboard/").json()

    expected = figures.sort_rows(
        figures.leaderboard_rows(figure_campaigns(bob)), key="pass1", descending=True
    )
    assert [row["campaign"]["id"] for row in data["results"]] == [row.campaign.pk for row in expected]
    for got, want in zip(data["results"], expected):
        assert got["figures"] == _json({key: asdict(want.figures)[key] for key in got["figures"]})
        assert got["reversed_with"] == list(want.reversed_with)


def test_leaderboard_exact_figures_and_reversal(api_for, bob, two_campaigns):
    data = api_for(bob).get("/api/metrics/leaderboard/?sort=name").json()

    a, b = data["results"]
    assert (a["campaign"]["name"], b["campaign"]["name"]) == ("A", "B")
    assert a["figures"]["pass_at_1"]["value"] == pytest.approx((1 + 0.25 + 0) / 3)
    assert b["figures"]["pass_at_1"]["value"] == pytest.approx((0.75 + 0.5 + 0.25) / 3)
    assert (a["figures"]["all_n"]["count"], b["figures"]["all_n"]["count"]) == (1, 0)
    assert a["figures"]["pass_at_n_observed"]["value"] == pytest.approx(2 / 3)
    assert b["figures"]["pass_at_n_observed"]["value"] == 1.0
    assert b["figures"]["gap_pp"]["value"] == 100.0
    # B finds more tasks (pass@N) but A is dependable on more (all-N): a reversal both ways.
    assert (a["reversed_with"], b["reversed_with"]) == (["B"], ["A"])


def test_leaderboard_domain_slice_matches_dashboard(api_for, bob, two_campaigns):
    data = api_for(bob).get("/api/metrics/leaderboard/?domain=retail&sort=name").json()

    expected = figures.leaderboard_rows(figure_campaigns(bob), domain="retail")
    by_id = {row.campaign.pk: row for row in expected}
    for got in data["results"]:
        assert got["figures"]["pass_at_1"] == _json(asdict(by_id[got["campaign"]["id"]].figures.pass_at_1))
        assert got["figures"]["coverage"]["tasks"] == 1


def test_leaderboard_rejects_unknown_sort(api_for, bob):
    response = api_for(bob).get("/api/metrics/leaderboard/?sort=shoe_size")

    assert response.status_code == 400
    assert list(error_of(response)["details"]) == ["sort"]


def test_gap_equals_dashboard_figures_and_curves(api_for, bob, two_campaigns):
    a, _ = two_campaigns

    data = api_for(bob).get(f"/api/metrics/gap/?campaign={a.pk}").json()

    tables = figures.per_task_tables([a])
    m = figures.campaign_figures(tables, a)
    (row,) = data["results"]
    assert row["pass_at_n_observed"] == m.pass_at_n_observed.value
    assert row["all_n"] == m.all_n.value
    assert row["gap_pp"] == asdict(m.gap_pp)
    assert row["pass_hat_curves"] == figures.pass_hat_curves(tables, a)
    assert row["pass_hat_curves"]["retail"] == [1.0, 1.0, 1.0, 1.0]


def test_cost_equals_dashboard_cost_and_names_the_price_sheet(api_for, bob, run_campaign):
    from apps.agents.services import price_sheet_default

    sheet = price_sheet_default()
    campaign = run_campaign("golden", tasks=2, n=2, price_sheet=sheet)

    (row,) = api_for(bob).get("/api/metrics/cost/").json()["results"]

    m = figures.campaign_figures(figures.per_task_tables([campaign]), campaign)
    assert row["cost"] == _json(asdict(m.cost))
    assert row["price_sheet"] == {
        "id": sheet.pk,
        "name": sheet.name,
        "source": sheet.source,
        "effective_date": sheet.effective_date.isoformat(),
    }
    assert row["cost"]["billed_attempts"] == 4


def test_domains_equal_dashboard_domain_table(api_for, bob, two_campaigns):
    a, _ = two_campaigns

    data = api_for(bob).get(f"/api/metrics/domains/?campaign={a.pk}").json()

    domains = figures.domain_figures(figures.per_task_tables([a]), a)
    assert data["results"][0]["domains"] == [asdict(domain) for domain in domains]
    assert [d["domain"] for d in data["results"][0]["domains"]] == ["neobank", "retail", "travel"]


def test_domains_with_no_done_attempt_give_null_not_nan(api_for, bob, summaries_campaign):
    summaries_campaign({T1: (0, 0)}, name="Nothing ran", n=2)

    response = api_for(bob).get("/api/metrics/domains/")

    assert response.json()["results"][0]["domains"] == [
        {"domain": "retail", "tasks": 1, "pass_at_1": None, "pass_at_n": 0.0, "all_n": 0.0}
    ]


def test_compare_equals_dashboard_comparison(api_for, bob, two_campaigns):
    a, b = two_campaigns

    data = api_for(bob).get(f"/api/metrics/compare/?a={a.pk}&b={b.pk}").json()

    result = figures.comparison(figures.per_task_tables([a, b]), a, b)
    expected = asdict(result)
    for key in ("delta_pass_at_1", "delta_all_n"):  # the API adds the verdict against the noise floor
        expected[key]["clears"] = getattr(result, key).clears
    assert {key: data[key] for key in expected} == _json(expected)
    assert (data["gained"], data["lost"], data["a"]["name"], data["b"]["name"]) == ([T1], [], "A", "B")


def test_compare_needs_both_campaigns_and_the_same_n(api_for, bob, summaries_campaign, two_campaigns):
    a, _ = two_campaigns
    other_n = summaries_campaign({T1: (2, 2)}, name="N=2", n=2)
    client = api_for(bob)

    missing = client.get(f"/api/metrics/compare/?a={a.pk}")
    mismatched = client.get(f"/api/metrics/compare/?a={a.pk}&b={other_n.pk}")

    assert error_of(missing)["details"] == {"b": ["This field is required."]}
    assert mismatched.status_code == 400
    assert error_of(mismatched)["details"] == {
        "b": ["campaigns have different N (4 vs 2); all-N is not comparable"]
    }


@pytest.mark.parametrize(
    "url", ("/api/metrics/leaderboard/", "/api/metrics/gap/", "/api/metrics/cost/", "/api/metrics/domains/")
)
def test_metric_list_query_count_is_the_same_for_one_and_three_campaigns(
    api_for, bob, summaries_campaign, url
):
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.figures.services import figures_refresh
    from apps.figures.tables import forget_process_figures

    def as_a_fresh_process_after_the_campaigns_finished(campaigns) -> None:
        figures_refresh(campaign_ids=[c.pk for c in campaigns])  # what the end of a campaign stores
        client.get(url)  # and what the first reader computed over several campaigns
        cache.clear()
        forget_process_figures()

    client = api_for(bob)
    campaigns = [summaries_campaign({T1: (2, 1)}, name="one", n=2)]
    as_a_fresh_process_after_the_campaigns_finished(campaigns)
    with CaptureQueriesContext(connection) as one:
        assert client.get(url).json()["count"] == 1
    campaigns.append(summaries_campaign({T2: (2, 2)}, name="two", n=2))
    campaigns.append(summaries_campaign({T3: (2, 0)}, name="three", n=2))
    as_a_fresh_process_after_the_campaigns_finished(campaigns)
    with CaptureQueriesContext(connection) as three:
        assert client.get(url).json()["count"] == 3

    assert len(three) == len(one)


def test_leaderboard_slice_lists_only_campaigns_with_tasks_in_it(api_for, bob, summaries_campaign):
    summaries_campaign({T1: (2, 2)}, name="retail only", n=2)
    neobank = summaries_campaign({T2: (2, 1)}, name="neobank only", n=2)
    client = api_for(bob)

    by_domain = client.get("/api/metrics/leaderboard/?domain=neobank").json()
    by_missing_tag = client.get("/api/metrics/leaderboard/?domain=neobank&tag=no-such-tag").json()

    assert [row["campaign"]["id"] for row in by_domain["results"]] == [neobank.pk]
    assert by_domain["results"][0]["figures"]["pass_at_1"]["value"] == 0.5
    assert by_missing_tag["count"] == 0


def test_api_metrics_take_the_same_toggle(api_for, bob, flagged):
    a, b = flagged
    api = api_for(bob)

    board = {
        row["campaign"]["name"]: row["figures"]["pass_at_1"]["value"]
        for row in api.get("/api/metrics/leaderboard/?healthy=exclude").json()["results"]
    }
    gap = [row["all_n"] for row in api.get("/api/metrics/gap/?healthy=exclude").json()["results"]]
    compared = api.get(f"/api/metrics/compare/?a={a.pk}&b={b.pk}&healthy=exclude").json()
    bad = api.get("/api/metrics/gap/?healthy=maybe")

    assert board == {"Alpha": 1.0, "Beta": 1.0}
    assert gap == [1.0, 1.0]
    assert compared["tasks"] == 1
    assert bad.status_code == 400
