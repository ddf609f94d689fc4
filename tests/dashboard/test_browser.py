"""The dashboard in real headless Chromium (Playwright, system chromium, never downloaded)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "dashboard.png"


@pytest.fixture
def browser_page(live_server, client, bob):
    """A Chromium page signed in as bob; collects console errors and page errors."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed")
    # Playwright's sync API runs an event loop; Django must allow ORM calls from this thread.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    client.force_login(bob)
    session = client.cookies["sessionid"].value
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        host = live_server.url.split("//")[1].split(":")[0]
        context.add_cookies([{"name": "sessionid", "value": session, "domain": host, "path": "/"}])
        page = context.new_page()
        page.errors = []
        page.on("console", lambda message: page.errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        yield page
        browser.close()


@pytest.fixture
def demo_campaigns(run_campaign):
    """Golden plus four simulated personas over every starter task with N = 4 (like the demo)."""
    return [
        run_campaign(agent, tasks=60, n=4, name=name)
        for agent, name in (
            ("golden", "Golden replay (self-check)"), ("sim:steady", "Steady persona"),
            ("sim:explorer", "Explorer persona"), ("sim:careless", "Careless persona"), ("sim:cautious", "Cautious persona"),
        )
    ]  # fmt: skip


def test_leaderboard_to_task_to_drilldown_with_diff_highlight(browser_page, live_server, run_campaign):
    campaign = run_campaign("sim:careless", n=10, task_ids=["retail/ticket_hold_carrier_exception"], name="Careless persona")
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


def test_domain_filter_updates_table_without_reload_and_charts_render(browser_page, live_server, demo_campaigns):
    page = browser_page
    page.goto(f"{live_server.url}/leaderboard/")
    page.evaluate("window.__marker = 'same page'")

    with page.expect_response(lambda response: "domain=retail" in response.url):
        page.select_option("#filter-domain", "retail")
    page.wait_for_timeout(200)

    assert page.evaluate("window.__marker") == "same page"  # no full reload happened
    assert "domain=retail" in page.url
    assert page.locator("#leaderboard-table tbody tr").count() == 5
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.select_option("#filter-domain", "")
    page.wait_for_timeout(300)
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    for url in ("/gap/", "/domains/", "/cost/"):
        page.goto(f"{live_server.url}{url}")
        page.wait_for_selector(".chart[data-rendered='1'] .main-svg")
        assert page.locator(".chart[data-rendered='1']").count() == page.locator(".chart").count()
    assert page.errors == []
