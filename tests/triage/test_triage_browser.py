"""Triage in real headless Chromium: j/k walk the queue, digit keys toggle labels, bulk labels from the list."""

from __future__ import annotations

import pytest

from apps.triage.models import AuditEntry, Label
from tests.support.browser import signed_in_page
from tests.triage.conftest import T1, T3

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def triager_page(live_server, client, trish):
    """A Chromium page signed in as trish (triager, team A); collects console and page errors."""
    with signed_in_page(live_server, client, trish) as page:
        yield page


def test_keyboard_walks_the_queue_and_digits_toggle_labels(
    triager_page, live_server, attempts_campaign, trish
):
    campaign = attempts_campaign(
        [(T1, 0, "fail", ["wrong_value"], True), (T1, 1, "fail", [], True), (T3, 0, "fail", [], True)]
    )
    ordered = list(campaign.attempts.order_by("task__task_id", "index").values_list("pk", flat=True))
    page = triager_page

    page.goto(f"{live_server.url}/triage/")
    page.click(f'tr[data-attempt="{ordered[0]}"] a.open-attempt')
    page.wait_for_selector("section#triage-panel")
    assert page.locator("#queue-position").inner_text().startswith("1 of 3")

    page.keyboard.press("2")  # wrong amount
    page.wait_for_selector('button.label-toggle[data-shortcut="2"][aria-pressed="true"]')
    page.keyboard.press("7")  # grader bug
    page.wait_for_selector('button.label-toggle[data-shortcut="7"][aria-pressed="true"]')
    assert page.locator("#audit-list li").count() == 3  # two label changes + task-health opened

    page.keyboard.press("j")
    page.wait_for_url(f"**/attempts/{ordered[1]}/**")
    page.wait_for_selector("section#triage-panel")
    page.keyboard.press("j")
    page.wait_for_url(f"**/attempts/{ordered[2]}/**")
    page.wait_for_selector("section#triage-panel")
    assert page.locator("#queue-position").inner_text().startswith("3 of 3")
    page.keyboard.press("k")
    page.wait_for_url(f"**/attempts/{ordered[1]}/**")
    page.wait_for_selector("section#triage-panel")

    page.fill("#triage-note", "digits typed here must not toggle labels 1 2 3")
    page.click("#save-note")
    page.wait_for_selector("#audit-list li >> text=digits typed here", state="attached")  # history is folded

    first = campaign.attempts.get(pk=ordered[0])
    assert sorted(first.review.labels.values_list("name", flat=True)) == ["grader bug", "wrong amount"]
    assert list(campaign.attempts.get(pk=ordered[1]).review.labels.all()) == []
    assert AuditEntry.objects.filter(attempt_id=ordered[1], field="note").count() == 1
    assert page.errors == []


def test_bulk_labelling_from_the_queue_updates_rows_in_place(triager_page, live_server, attempts_campaign):
    campaign = attempts_campaign([(T1, i, "fail", [], True) for i in range(3)])
    page = triager_page
    page.goto(f"{live_server.url}/triage/")
    page.evaluate("window.__marker = 'same page'")

    page.check("[data-tick-all]")
    page.select_option("#bulk-label", str(Label.objects.get(name="policy violation").pk))
    with page.expect_response(lambda response: "/triage/bulk/" in response.url):
        page.click("#bulk-add")
    page.wait_for_selector("td.labels >> text=policy violation")

    assert page.evaluate("window.__marker") == "same page"
    assert page.locator("td.labels >> text=policy violation").count() == 3
    assert Label.objects.get(name="policy violation").reviews.filter(attempt__campaign=campaign).count() == 3
    assert page.errors == []


def test_a_filter_changed_after_sorting_keeps_the_sort(triager_page, live_server, attempts_campaign):
    campaign = attempts_campaign([(T1, 0, "fail", ["wrong_value"], True), (T3, 0, "fail", [], True)])
    page = triager_page

    page.goto(f"{live_server.url}/triage/?view=list")
    page.locator("a.sort").first.click()
    page.wait_for_url("**sort=**")
    sort = page.url.split("sort=")[1].split("&")[0]
    with page.expect_response(lambda response: "scope=failed" in response.url):
        page.select_option("#filter-scope", "failed")
    page.wait_for_url("**scope=failed**")

    assert f"sort={sort}" in page.url
    assert "view=list" in page.url
    assert page.locator("#triage-rows tr[data-attempt]").count() == campaign.attempts.count()
    assert page.errors == []
