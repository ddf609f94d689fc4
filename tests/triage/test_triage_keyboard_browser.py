"""The attempt page at 1280×800 in real Chromium: diff and transcript above the fold, no sideways scroll."""

from __future__ import annotations

import pytest

from tests.support.browser import signed_in_page
from tests.triage.conftest import T1

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_attempt_page_shows_diff_and_transcript_above_the_fold_at_1280x800(
    live_server, client, trish, attempts_campaign
):
    campaign = attempts_campaign([(T1, 0, "fail", ["wrong_value"], True)])
    attempt = campaign.attempts.get()

    with signed_in_page(live_server, client, trish, viewport=(1280, 800)) as page:
        page.goto(f"{live_server.url}/attempts/{attempt.pk}/")
        page.wait_for_selector("section#triage-panel")
        transcript = page.locator('section.pane[aria-label="Transcript"] h2').bounding_box()
        diff = page.locator('section.pane[aria-label="State diff and checks"] h2').first.bounding_box()
        first_step = page.locator(
            'section.pane[aria-label="Transcript"] .step, section.pane[aria-label="Transcript"] p'
        ).first
        assert transcript["y"] + 120 < 800 and diff["y"] + 120 < 800
        assert first_step.bounding_box()["y"] < 800
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
