"""Issue 30 item 7 (part): one Tab and Enter skip the navigation to the page's content."""

from __future__ import annotations

import pytest

from tests.support.browser import signed_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_first_tab_offers_a_skip_link_that_moves_focus_into_the_content(live_server, client, bob):
    with signed_in_page(live_server, client, bob) as page:
        page.goto(f"{live_server.url}/triage/")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        assert (
            page.evaluate("document.activeElement.getBoundingClientRect().left") >= 0
        )  # visible when focused
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "main"
        page.keyboard.press("Tab")  # the next stop is inside the content, not the navigation
        assert page.evaluate("!!document.activeElement.closest('main')") is True
        assert page.errors == []
