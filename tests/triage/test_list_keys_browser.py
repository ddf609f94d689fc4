"""Issue 30 item 7: j / k walk the queue's rows on the list pages, Enter opens the row."""

from __future__ import annotations

import pytest

from tests.support.browser import signed_in_page
from tests.triage.conftest import T1, T3

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_j_and_k_move_between_rows_and_enter_opens_one(live_server, client, bob, attempts_campaign):
    campaign = attempts_campaign(
        [(T1, 0, "fail", ["wrong_value"], True), (T1, 1, "fail", [], True), (T3, 0, "fail", [], True)]
    )
    ordered = list(campaign.attempts.order_by("task__task_id", "index").values_list("pk", flat=True))
    focused = "document.activeElement.closest('tr') && document.activeElement.closest('tr').dataset.attempt"
    with signed_in_page(live_server, client, bob) as page:
        page.goto(f"{live_server.url}/triage/?view=list")
        page.keyboard.press("j")
        assert page.evaluate(focused) == str(ordered[0])
        page.keyboard.press("j")
        page.keyboard.press("j")
        page.keyboard.press("j")  # stays on the last row
        assert page.evaluate(focused) == str(ordered[2])
        page.keyboard.press("k")
        assert page.evaluate(focused) == str(ordered[1])
        page.keyboard.press("Enter")
        page.wait_for_url(f"**/attempts/{ordered[1]}/**")
        assert page.errors == []
