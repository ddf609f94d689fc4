"""Issue 30 items 5 and 7 in real Chromium, on one set of data: from page load, two Tabs and Enter
reach the first row's link of every list page through "Skip to the table", j / k move between rows;
a bulk cluster action keeps the page where it was, says what changed and its Undo restores it."""

from __future__ import annotations

import pytest

from apps.triage.models import AttemptReview
from apps.triage.selectors import QueueFilters, cluster_index
from tests.support.browser import signed_in_page
from tests.triage.test_clusters import known  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The rows j / k walk and their links, as static/core/list_keys.js picks them.
ROW_OF_FOCUS = """() => {
  const rows = [...document.querySelectorAll('[data-row-keys] tbody tr')].filter(r => r.querySelector('a[href]'));
  const active = document.activeElement;
  return active && active.tagName === 'A' ? rows.findIndex(r => r.contains(active)) : null;
}"""
ROWS = "document.querySelectorAll('[data-row-keys] tbody tr a[href]').length"


def test_every_list_page_reaches_its_first_row_in_three_tabs_and_j_k_walk_the_rows(
    live_server, client, trish, known
):
    signature = next(
        c.signature for c in cluster_index(user=trish, filters=QueueFilters()).clusters if c.size == 3
    )
    pages = [
        "/leaderboard/",
        "/campaigns/",
        "/tasks/",
        "/triage/?view=grouped",
        "/triage/?view=list",
        f"/triage/clusters/{signature}/",
    ]
    reached = {}
    with signed_in_page(live_server, client, trish) as page:
        for path in pages:
            page.goto(live_server.url + path)
            page.wait_for_load_state("load")
            assert page.evaluate(ROWS) >= 2, path
            tabs = 0
            while (
                page.evaluate("document.activeElement.textContent.trim()") != "Skip to the table" and tabs < 3
            ):
                page.keyboard.press("Tab")
                tabs += 1
            page.keyboard.press("Enter")
            first = page.evaluate(ROW_OF_FOCUS)
            page.keyboard.press("j")
            second = page.evaluate(ROW_OF_FOCUS)
            page.keyboard.press("k")
            reached[path] = (tabs <= 2, first, second, page.evaluate(ROW_OF_FOCUS))
        assert page.errors == []
    # Two Tabs to the skip link (the third Tab is not even needed), Enter: the first row's link.
    assert reached == dict.fromkeys(pages, (True, 0, 1, 0))


def test_bulk_action_keeps_the_place_says_what_changed_and_undo_restores(live_server, client, trish, known):
    with signed_in_page(live_server, client, trish, viewport=(1280, 420)) as page:
        page.goto(live_server.url + "/triage/?view=grouped")
        page.locator("#cluster-table tbody tr input[name=s]").first.check()
        page.locator("#cluster-reviewed").scroll_into_view_if_needed()
        page.evaluate("window.scrollBy(0, 120)")
        scrolled = page.evaluate("window.scrollY")
        page.click("#cluster-reviewed")
        page.wait_for_selector("#bulk-feedback")
        feedback = page.inner_text("#bulk-feedback")
        after_action = page.evaluate("window.scrollY")
        reviewed = set(AttemptReview.objects.filter(status="reviewed").values_list("attempt_id", flat=True))
        page.click("#bulk-undo")
        page.wait_for_selector("#bulk-feedback >> text=Undone")
        assert page.errors == []
    assert scrolled > 0 and after_action > 0  # the rows were swapped in place: no jump to the top
    assert feedback.startswith("Marked reviewed ")
    assert len(reviewed) >= 2
    assert set(AttemptReview.objects.filter(status="reviewed").values_list("attempt_id", flat=True)) == set()
