"""Calibration and estimate pages in real headless Chromium, as every role: no console errors."""

from __future__ import annotations

import pytest

from tests.adaptive.test_pages import stored_calibration  # noqa: F401 (fixture)
from tests.support.browser import signed_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def adaptive_campaign(make_campaign, stored_calibration):
    from apps.adaptive.models import AdaptiveState

    campaign = make_campaign("sim:family-ace", tasks=3, n=6, adaptive={})
    campaign.name = "Adaptive <b>ace</b>"  # imported-looking text: must be escaped
    campaign.save(update_fields=["name"])
    AdaptiveState.objects.create(
        campaign=campaign,
        calibration=stored_calibration,
        stop_reason="budget",
        attempts_used=5,
        budget=5,
        se_pass_at_1=0.02,
        se_all_n=0.03,
        estimate={
            "estimated": True,
            "tasks": 3,
            "tasks_run": 3,
            "attempts_run": 5,
            "attempts_planned": 18,
            "attempts_share": 5 / 18,
            "n_attempts": 6,
            "ability": [0.4],
            "dimensions": ["all tasks"],
            "consistency": 1.2,
            "pass_at_1": {"value": 0.61, "lo": 0.5, "hi": 0.7},
            "all_n": {"value": 0.2, "count": 0.6, "lo": 0.0, "hi": 0.333},
            "cost_per_dependable_task": {"value": None, "lo": 0.1, "hi": None},
        },
        estimate_attempts=5,
    )
    return campaign


@pytest.mark.parametrize("persona", ("bob", "trish", "alice", "admin_user_persona"))
def test_calibration_and_estimate_pages_render_for_every_role(
    live_server,
    client,
    request,
    stored_calibration,
    adaptive_campaign,
    persona,
):
    user = request.getfixturevalue(persona)
    with signed_in_page(live_server, client, user) as page:
        page.goto(f"{live_server.url}/adaptive/")
        page.click(f"text={stored_calibration.suite.name}")
        page.wait_for_selector("#chart-items + .chart .main-svg")
        markers = page.locator(".chart .scatterlayer .point").count()
        assert markers == stored_calibration.n_tasks
        assert page.locator("#validation-rows tbody tr").count() == 4
        page.click("text=Adaptive <b>ace</b>")
        assert page.locator("#estimated-label").is_visible()
        assert "28% of the attempts" in page.locator("#estimated-label").inner_text()
        assert page.locator("h1").first.inner_text() == "Adaptive <b>ace</b> adaptive"
        assert page.errors == []


def test_calibration_pages_refuse_the_outsider_in_the_browser(
    live_server, client, charlie, stored_calibration
):
    with signed_in_page(live_server, client, charlie) as page:
        response = page.goto(f"{live_server.url}/adaptive/suites/{stored_calibration.suite_id}/")
        assert response.status == 403
        assert "this page needs the viewer role" in page.content()
