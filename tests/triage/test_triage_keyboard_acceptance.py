"""Acceptance: a keyboard-only triage of ten attempts of a real simulated campaign in real Chromium.

Each attempt gets the burst a fast triager types without waiting — "2" (toggle a label), "r"
(mark reviewed), Shift+3 (label and advance) — a third of them while the panel is still loading
and a third while the browser is still on the previous attempt. No mouse is used, no key press
may be lost and no request may fail (no 4xx/5xx, no console error).
"""

from __future__ import annotations

import pytest

from apps.attempts.models import Attempt
from apps.triage.models import AttemptReview, Label
from tests.support.browser import signed_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUEUE = "scope=failed"


def test_keyboard_only_triage_of_ten_attempts_loses_no_key_press(live_server, client, trish, run_campaign):
    campaign = run_campaign("sim:careless", tasks=6, n=3)
    queue = list(
        Attempt.objects.filter(campaign=campaign, status="done", verdict="fail")
        .order_by("task__task_id", "index", "pk")
        .values_list("pk", flat=True)
    )
    assert len(queue) > 10
    walked = queue[:10]
    two, three = Label.objects.get(shortcut=2), Label.objects.get(shortcut=3)

    with signed_in_page(live_server, client, trish, viewport=(1280, 800)) as page:
        failures: list[str] = []
        page.on(
            "response",
            lambda response: (
                failures.append(f"{response.status} {response.request.method} {response.url}")
                if response.status >= 400
                else None
            ),
        )
        page.goto(f"{live_server.url}/attempts/{walked[0]}/?queue=scope%3Dfailed")
        for position, pk in enumerate(walked):
            typed = position % 3  # 0: panel ready, 1: panel still loading, 2: page still navigating
            if typed < 2:
                page.wait_for_url(f"**/attempts/{pk}/**")
            if typed == 0:
                page.wait_for_selector("section#triage-panel")
            page.keyboard.press("2")
            page.keyboard.press("r")
            page.keyboard.press("Shift+Digit3")
        page.wait_for_url(f"**/attempts/{queue[10]}/**")  # the last Shift+3 advanced to the eleventh
        page.wait_for_selector("section#triage-panel")
        position_text = page.locator("#queue-position").inner_text()
        errors = list(page.errors)

    reviews = {r.attempt_id: r for r in AttemptReview.objects.filter(attempt_id__in=walked)}
    assert failures == []
    assert errors == []
    assert position_text.startswith(f"11 of {len(queue)}")
    assert queue[10] not in reviews  # the eleventh attempt was reached, not touched
    assert {pk: reviews[pk].status for pk in walked} == dict.fromkeys(walked, "reviewed")
    assert {pk: sorted(reviews[pk].labels.values_list("pk", flat=True)) for pk in walked} == dict.fromkeys(
        walked, sorted([two.pk, three.pk])
    )
