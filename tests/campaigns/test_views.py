"""Campaign pages: the detail page and its polled progress fragment."""

from __future__ import annotations

import pytest


@pytest.mark.django_db
def test_campaign_detail_page_renders_progress(client, make_campaign, bob):
    campaign = make_campaign("golden", tasks=2, n=3)
    client.force_login(bob)

    response = client.get(f"/campaigns/{campaign.pk}/")

    assert response.status_code == 200
    assert response.context["progress"].total == 0  # a draft: no attempts yet
    assert '<section id="progress"' in response.content.decode()


@pytest.mark.django_db
def test_campaign_detail_poll_of_a_finished_campaign_renders_the_fragment_and_stops(
    client, make_campaign, bob
):
    campaign = make_campaign("golden", tasks=1, n=1)
    client.force_login(bob)

    response = client.get(f"/campaigns/{campaign.pk}/?poll=1", HTTP_HX_REQUEST="true")

    assert response.status_code == 286  # htmx: stop polling
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="progress"')
    assert "<html" not in body
