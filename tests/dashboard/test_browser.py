"""The dashboard in real headless Chromium (Playwright, system chromium, never downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.browser import signed_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "dashboard.png"
README_SHOTS = SCREENSHOT.parent  # compare, campaigns, attempt, triage and cluster .png beside it (README)


@pytest.fixture
def browser_page(live_server, client, bob):
    """A Chromium page signed in as bob; collects console errors and page errors."""
    with signed_in_page(live_server, client, bob) as page:
        yield page


@pytest.fixture
def demo_campaigns(run_campaign):
    """Golden plus four simulated personas over every starter task with N = 4 (like the demo)."""
    return [
        run_campaign(agent, tasks=60, n=4, name=name)
        for agent, name in (
            ("golden", "Golden replay (self-check)"),
            ("sim:steady", "Steady persona"),
            ("sim:explorer", "Explorer persona"),
            ("sim:careless", "Careless persona"),
            ("sim:cautious", "Cautious persona"),
        )
    ]


def test_leaderboard_to_task_to_drilldown_with_diff_highlight(browser_page, live_server, run_campaign):
    campaign = run_campaign(
        "sim:careless", n=10, task_ids=["retail/ticket_hold_carrier_exception"], name="Careless persona"
    )
    page = browser_page

    page.goto(f"{live_server.url}/leaderboard/")
    page.click("text=Careless persona")
    page.click("text=retail/ticket_hold_carrier_exception")
    page.click(".strip a.fail >> nth=-1")  # attempt #9 closes the ticket
    assert page.locator("p.headline").first.inner_text() == "ticket 20 · status: solved (golden: hold)"

    page.click("#diff-0")
    highlighted = page.locator(".tool-call.highlight")
    expect(highlighted).to_have_count(1)  # waits: the highlight lands after a scroll animation frame
    assert "update_ticket" in highlighted.text_content()
    page.click(".tool-call.highlight .who")
    expect(page.locator("#diff-0.highlight")).to_have_count(1)
    assert page.errors == []
    assert campaign.pk


def test_domain_filter_updates_table_without_reload_and_charts_render(
    browser_page, live_server, demo_campaigns
):
    page = browser_page
    page.goto(f"{live_server.url}/leaderboard/")
    page.evaluate("window.__marker = 'same page'")

    with page.expect_response(lambda response: "domain=retail" in response.url):
        page.select_option("#filter-domain", "retail")
    page.wait_for_timeout(200)

    assert page.evaluate("window.__marker") == "same page"  # no full reload happened
    assert "domain=retail" in page.url
    assert page.locator("#leaderboard-table tbody tr[data-campaign]").count() == 5
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.select_option("#filter-domain", "")
    page.wait_for_timeout(300)
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    for url in ("/gap/", "/domains/", "/cost/"):
        page.goto(f"{live_server.url}{url}")
        page.wait_for_selector(".chart[data-rendered='1'] .main-svg")
        assert page.locator(".chart[data-rendered='1']").count() == page.locator(".chart").count()

    # The README's other views, at the 1280×800 the acceptance tests use, on the same demo data.
    steady, careless = demo_campaigns[1], demo_campaigns[3]
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{live_server.url}/compare/?a={steady.pk}&b={careless.pk}")
    page.wait_for_selector("#verdict")
    page.screenshot(path=str(README_SHOTS / "compare.png"))
    page.goto(f"{live_server.url}/campaigns/")
    page.screenshot(path=str(README_SHOTS / "campaigns.png"))
    failure = careless.attempts.filter(verdict="fail", clean_looking=True).order_by("pk").first()
    page.goto(f"{live_server.url}/attempts/{failure.pk}/?queue=c%3D{careless.pk}")
    page.wait_for_selector("section#triage-panel")
    page.screenshot(path=str(README_SHOTS / "attempt.png"))
    # Triage at scale: failures grouped by what they did to the database, and one cluster's page.
    page.goto(f"{live_server.url}/triage/?view=grouped")
    page.wait_for_selector("a.open-cluster")
    page.screenshot(path=str(README_SHOTS / "triage.png"))
    page.click("a.open-cluster >> nth=0")
    page.wait_for_selector(".chart[data-rendered='1'] .main-svg")
    page.screenshot(path=str(README_SHOTS / "cluster.png"))
    assert page.errors == []
