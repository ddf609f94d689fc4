"""The decision aid (issue 30 item 9): target and budget in, a pick with the noise floor and reasons out."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from apps.attempts.models import TaskSummary
from apps.dashboard.decide import decide
from tests.support.browser import signed_in_page

AXE = Path(__file__).resolve().parents[1] / "support" / "vendor" / "axe-core" / "axe.min.js"
T1, T2, T3 = (
    "retail/ticket_hold_carrier_exception",
    "neobank/freeze_misplaced_card",
    "travel/cancel_flexible_full_refund",
)


@pytest.fixture
def three_campaigns(summaries_campaign):
    """Reliable: all-4 on 2 of 3 tasks, $3 per 1,000 tasks; Pricey: all 3, $100; Flaky: none, $1."""

    def priced(counts, *, name, per_attempt):
        campaign = summaries_campaign(counts, name=name, n=4)
        TaskSummary.objects.filter(campaign=campaign).update(agent_cost=Decimal(per_attempt) * 4)
        return campaign

    reliable = priced({T1: (4, 4), T2: (4, 4), T3: (4, 0)}, name="Reliable", per_attempt="0.003")
    pricey = priced({T1: (4, 4), T2: (4, 4), T3: (4, 4)}, name="Pricey", per_attempt="0.1")
    flaky = priced({T1: (4, 3), T2: (4, 2), T3: (4, 1)}, name="Flaky", per_attempt="0.001")
    return reliable, pricey, flaky


@pytest.mark.django_db
def test_only_the_campaign_meeting_target_and_budget_is_picked_with_reasons(three_campaigns):
    reliable, pricey, flaky = three_campaigns

    decision = decide([reliable, pricey, flaky], min_share=0.6, budget=50)

    assert decision.pick.campaign == reliable
    assert decision.runner_up is None
    assert decision.summary == (
        f"Choose {reliable.agent.name} (campaign Reliable): the only campaign that meets both the "
        "dependability target and the budget."
    )
    by_name = {row.campaign.name: row for row in decision.candidates}
    assert [row.campaign.name for row in decision.candidates] == ["Reliable", "Pricey", "Flaky"]
    assert (by_name["Pricey"].meets_dependability, by_name["Pricey"].within_budget) == (True, False)
    assert by_name["Pricey"].reasons[-1] == "$100.00 per 1,000 tasks over $50.00"
    assert (by_name["Flaky"].meets_dependability, by_name["Flaky"].within_budget) == (False, True)
    assert by_name["Flaky"].reasons[0].startswith("all-4 0.0% of 3 tasks (95% interval")
    assert by_name["Reliable"].reasons[-1] == "$3.00 per 1,000 tasks within $50.00"


@pytest.mark.django_db
def test_a_lead_below_the_noise_floor_is_a_tie_and_the_cheaper_one_is_picked(three_campaigns):
    reliable, pricey, flaky = three_campaigns

    decision = decide([reliable, pricey, flaky], min_share=0.6, budget=200)

    # Pricey is more dependable (3 of 3 vs 2 of 3) but on three tasks that is below the noise floor.
    assert (decision.pick.campaign, decision.runner_up.campaign, decision.tied) == (reliable, pricey, True)
    assert decision.noise_floor > 1 / 3
    assert decision.summary.startswith(
        f"Choose {reliable.agent.name} (campaign Reliable): as dependable as Pricey"
    )


@pytest.mark.django_db
def test_no_campaign_qualifies_says_so(three_campaigns):
    decision = decide(list(three_campaigns), min_share=0.99, budget=10)

    assert decision.pick is None
    assert decision.summary.startswith("None of the 3 campaigns is dependable on at least 99.0% of tasks")


@pytest.mark.django_db
def test_a_good_attempt_among_infra_errors_never_qualifies(summaries_campaign):
    shaky = summaries_campaign({T1: (1, 1)}, name="Shaky", n=4)
    TaskSummary.objects.filter(campaign=shaky).update(n_infra_error=3, agent_cost=Decimal("0.004"))

    decision = decide([shaky], min_share=0.0001, budget=1000)

    assert decision.pick is None
    assert "3 attempts have no verdict: all-4 could be as low as 0.0%" in decision.candidates[0].reasons


@pytest.mark.django_db
def test_decide_page_reports_bad_input_and_uses_the_default(client, bob, three_campaigns):
    client.force_login(bob)

    html = client.get("/decide/?target=abc&budget=50").content.decode()

    assert "“abc” is not a number: the default is used." in html
    assert 'id="recommendation"' in html


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_lead_types_target_and_budget_and_reads_the_recommendation(
    live_server, client, bob, three_campaigns
):
    reliable = three_campaigns[0]
    with signed_in_page(live_server, client, bob, viewport=(1280, 800)) as page:
        page.goto(live_server.url + "/leaderboard/")
        page.get_by_role("link", name="Decide from a dependability target and a budget").click()
        page.get_by_label("Dependable on at least (% of tasks)").fill("60")
        page.get_by_label("Budget ($ per 1,000 tasks)").fill("50")
        page.get_by_role("button", name="Recommend").click()
        page.wait_for_selector("#recommendation")
        assert (
            page.locator("#recommendation")
            .inner_text()
            .startswith(f"Choose {reliable.agent.name} (campaign Reliable)")
        )
        picked = page.locator("#decide-table tr.picked")
        assert picked.locator("td").nth(4).inner_text() == "recommended"
        assert "$3.00 per 1,000 tasks within $50.00" in picked.inner_text()
        assert (
            page.locator("#noise-floor").inner_text()
            == "No other campaign qualifies, so there is nothing to be tied with."
        )
        page.add_script_tag(path=str(AXE))  # injected into the test page only
        result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
        serious = [
            (v["id"], [n["target"] for n in v["nodes"]])
            for v in result["violations"]
            if v["impact"] in ("critical", "serious")
        ]
        assert serious == []
        assert page.errors == []
