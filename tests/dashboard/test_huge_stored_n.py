"""Metric pages stay fast for any stored N: a campaign whose N is 100,000 (as a results import once
set it; the API caps N at 200) with two attempts stored per task computes pass^k only as far as
attempts ran, and every metric page and endpoint answers with the hand-computed figures."""

from __future__ import annotations

import pytest

from apps.attempts.models import Attempt
from apps.attempts.summaries import summary_refresh
from apps.campaigns.models import Campaign
from apps.figures import selectors as figures

pytestmark = pytest.mark.django_db

HUGE_N = 100_000
# Two stored attempts per task: retail passes both, neobank one, travel none.
VERDICTS = {
    "retail/ticket_hold_carrier_exception": ("pass", "pass"),
    "neobank/freeze_misplaced_card": ("pass", "fail"),
    "travel/cancel_flexible_full_refund": ("fail", "fail"),
}
# By hand: pass^1 = mean(2/2, 1/2, 0/2) = 0.5; pass^2 = mean(C(2,2), C(1,2), C(0,2)) / C(2,2) = 1/3.
# pass^k for k > 2 is undefined for every task (n = 2): not listed.
CURVES = {
    "all": [0.5, 1 / 3],
    "neobank": [0.5, 0.0],
    "retail": [1.0, 1.0],
    "travel": [0.0, 0.0],
}
# Calls of the pass^k estimator the curves may make: k = 1, 2 for "all" and three domains.
CURVE_EVALUATIONS = 2 * len(CURVES)


@pytest.fixture
def estimator_calls(monkeypatch):
    """Counts the curves' pass^k evaluations (the real estimator answers); stops a run that would do N of them."""
    calls = []
    real = figures.pass_hat_k

    def counted(n, c, k):
        calls.append(k)
        assert len(calls) <= 100, f"pass^k evaluated {len(calls)} times (k up to {k}): work grows with N"
        return real(n, c, k)

    monkeypatch.setattr(figures, "pass_hat_k", counted)
    return calls


def _huge_n_campaign(make_campaign, name: str) -> Campaign:
    campaign = make_campaign("sim:steady", tasks=1, n=2)
    tasks = list(campaign.suite.tasks.filter(task_id__in=list(VERDICTS)))
    campaign.tasks.set(tasks)
    Attempt.objects.bulk_create(
        Attempt(campaign=campaign, task=task, index=index, status="done", verdict=verdict)
        for task in tasks
        for index, verdict in enumerate(VERDICTS[task.task_id])
    )
    Campaign.objects.filter(pk=campaign.pk).update(name=name, n_attempts=HUGE_N, status="done")
    summary_refresh(campaign_id=campaign.pk)
    return Campaign.objects.get(pk=campaign.pk)


def test_pass_hat_curves_of_a_huge_n_stop_at_the_attempts_stored(make_campaign, estimator_calls):
    campaign = _huge_n_campaign(make_campaign, "huge")

    curves = figures.pass_hat_curves(figures.per_task_tables([campaign]), campaign)

    assert curves == CURVES
    assert len(estimator_calls) == CURVE_EVALUATIONS


def test_metric_pages_and_api_of_a_huge_n_answer_the_hand_computed_figures(
    client, bob, api_for, make_campaign, estimator_calls
):
    a = _huge_n_campaign(make_campaign, "huge A")
    b = _huge_n_campaign(make_campaign, "huge B")
    client.force_login(bob)
    api = api_for(bob)
    pages = [
        "/gap/",
        "/leaderboard/",
        "/cost/",
        "/domains/",
        f"/compare/?a={a.pk}&b={b.pk}",
        f"/campaigns/{a.pk}/",
    ]
    endpoints = [
        "/api/metrics/gap/",
        "/api/metrics/leaderboard/",
        "/api/metrics/cost/",
        "/api/metrics/domains/",
        f"/api/metrics/compare/?a={a.pk}&b={b.pk}",
        f"/api/campaigns/{a.pk}/",
    ]

    statuses = [client.get(url).status_code for url in pages] + [
        api.get(url).status_code for url in endpoints
    ]
    gap = api.get(f"/api/metrics/gap/?campaign={a.pk}").json()["results"]
    leaderboard = api.get("/api/metrics/leaderboard/?sort=name").json()["results"]

    assert statuses == [200] * (len(pages) + len(endpoints))
    (row,) = gap
    assert row["pass_hat_curves"] == CURVES
    # Found on retail and neobank (2 of 3); dependable on none (no task has N attempts).
    assert (row["pass_at_n_observed"], row["all_n"]) == (2 / 3, 0.0)
    assert row["gap_pp"]["value"] == 100 * (2 / 3)
    assert [r["figures"]["pass_at_1"]["value"] for r in leaderboard] == [0.5, 0.5]
    assert [r["figures"]["coverage"]["missing_attempts"] for r in leaderboard] == [3 * (HUGE_N - 2)] * 2
    assert len(estimator_calls) == 2 * CURVE_EVALUATIONS  # two campaigns' curves, computed once each
