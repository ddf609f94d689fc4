"""Issue 30: the attempt page names an attempt by its id and says when checks were never run."""

from __future__ import annotations

import pytest

from apps.attempts.models import Attempt

pytestmark = pytest.mark.django_db


def test_infra_error_attempt_says_not_graded_and_heading_uses_the_id(client, bob, make_campaign):
    campaign = make_campaign("sim:steady", tasks=1, n=3)
    attempt = Attempt.objects.create(
        campaign=campaign,
        task=campaign.tasks.first(),
        index=2,
        status=Attempt.Status.INFRA_ERROR,
        error_detail="connection refused",
    )
    client.force_login(bob)

    html = client.get(f"/attempts/{attempt.pk}/").content.decode()

    assert f"<h1>Attempt #{attempt.pk} " in html
    assert "· run 3 of 3 on this task" in html
    assert (
        '<li class="muted" id="checks-empty">not graded: the attempt ended in an infrastructure error</li>'
        in html
    )
