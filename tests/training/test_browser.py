"""Training pages in real headless Chromium (Playwright, system chromium): the pool explorer switched to a
pass-rate band with a reference campaign through its htmx controls, and the before/after report with
the article's table, coloured domain deltas and one task's 20 attempts before and after."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import signed_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def campaigns(run_campaign):
    """A base and a 'trained' policy (simulated personas) on the same 4 tasks, 20 attempts each."""
    base = run_campaign("sim:careless", tasks=4, n=20, name="Base <b>policy</b>")
    trained = run_campaign("sim:steady", tasks=4, n=20, name="Trained policy")
    return base, trained


def test_pool_page_band_and_reference_then_report_with_strips(live_server, client, bob, campaigns):
    base, trained = campaigns
    with signed_in_page(live_server, client, bob) as page:
        page.goto(f"{live_server.url}/training/?campaign={base.pk}")
        page.wait_for_selector(".chart[data-rendered='1'] .main-svg")
        expect(page.locator("#pool-rule")).to_contain_text("P(")
        page.select_option("select[name=select]", "band")
        page.fill("input[name=band_lo]", "0")
        page.fill("input[name=band_hi]", "1")
        page.select_option("select[name=reference]", str(trained.pk))
        expect(page.locator("#pool-rule")).to_contain_text("base pass rate c/n is in [0.0000, 1.0000]")
        expect(page.locator("#pool-rule")).to_contain_text("solved at least once by Trained policy")
        expect(page.locator("#unsolved-by-reference")).to_be_visible()
        assert re.search(r"[?&]select=band", page.url) and f"reference={trained.pk}" in page.url
        pool_size = page.locator("#pool-size").inner_text()
        unsolved = int(page.locator("#unsolved-by-reference").inner_text())
        assert pool_size == f"{4 - unsolved} of 4"  # band [0, 1] keeps every task; the reference decides

        page.goto(f"{live_server.url}/training/report/?base={base.pk}&trained={trained.pk}")
        headline = page.locator("#headline")
        expect(headline).to_contain_text("pass@20")
        expect(headline).to_contain_text("observed 20/20")
        expect(headline).to_contain_text("cost per dependable task")
        expect(headline).to_contain_text("Base <b>policy</b> (base)")  # escaped, shown as text
        assert page.locator("#domain-deltas tbody tr").count() >= 1
        coloured = page.locator("#domain-deltas td.gain, #domain-deltas td.loss").count()
        assert coloured >= 1
        assert page.locator("#domain-deltas td.gain").first.evaluate("e => getComputedStyle(e).color") != (
            page.locator("#domain-deltas td.num").first.evaluate("e => getComputedStyle(e).color")
        )
        task_pk = base.tasks.order_by("pk").first().pk
        page.goto(f"{live_server.url}/training/report/?base={base.pk}&trained={trained.pk}&task={task_pk}")
        expect(page.locator("#strip-title")).to_contain_text("Attempts of")
        summaries = page.locator(".strip-summary")
        assert summaries.count() == 2
        assert [re.search(r"of (\d+) passed", t).group(1) for t in summaries.all_inner_texts()] == [
            "20",
            "20",
        ]
        assert page.errors == []
