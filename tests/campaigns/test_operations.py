"""The operations view: campaign list progress, 0 workers alive, inline cancel/resume, launch form."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.campaigns.models import Attempt
from apps.campaigns.selectors import campaign_progress

pytestmark = pytest.mark.django_db


def _start(campaign):
    """Queued attempts without dispatching to Celery (no worker in these tests)."""
    from apps.campaigns.models import Campaign

    Attempt.objects.bulk_create(
        Attempt(campaign=campaign, task=task, index=i)
        for task in campaign.tasks.all()
        for i in range(campaign.n_attempts)
    )
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.RUNNING)
    campaign.refresh_from_db()
    return campaign


def test_campaign_list_shows_progress_and_queued_with_no_workers(client, make_campaign, bob):
    campaign = _start(make_campaign("golden", tasks=3, n=2))
    first = campaign.attempts.order_by("pk")[:2]
    Attempt.objects.filter(pk__in=[a.pk for a in first]).update(
        status=Attempt.Status.DONE, finished_at=timezone.now()
    )
    client.force_login(bob)

    response = client.get("/campaigns/")
    html = response.content.decode()

    progress = response.context["rows"][0].progress
    assert (progress.finished, progress.planned, progress.queued) == (2, 6, 4)
    assert response.context["workers_alive"] == 0
    assert "queued — 0 workers alive" in html
    assert 'aria-valuenow="33"' in html


def test_cancelled_attempts_are_not_finished_nor_planned(make_campaign):
    campaign = _start(make_campaign("golden", tasks=2, n=2))
    attempts = list(campaign.attempts.order_by("pk"))
    Attempt.objects.filter(pk=attempts[0].pk).update(status=Attempt.Status.DONE, finished_at=timezone.now())
    Attempt.objects.filter(pk__in=[a.pk for a in attempts[1:]]).update(
        status=Attempt.Status.CANCELLED, finished_at=timezone.now()
    )

    progress = campaign_progress(campaign=campaign)

    assert (progress.finished, progress.planned, progress.percent) == (1, 1, 100.0)
    assert progress.throughput_per_min == 1.0  # the three cancelled attempts did no work


def test_running_campaign_with_live_worker_shows_running_count(client, make_campaign, bob):
    from apps.core.services import record_worker_heartbeat

    _start(make_campaign("golden", tasks=3, n=2))
    record_worker_heartbeat(hostname="w1@host")
    client.force_login(bob)

    html = client.get("/campaigns/").content.decode()

    assert "1 worker alive" in html
    assert "running 0/6" in html


def test_inline_cancel_from_the_list_returns_to_the_list(client, make_campaign, alice):
    campaign = _start(make_campaign("golden", tasks=1, n=2))
    client.force_login(alice)

    response = client.post(f"/campaigns/{campaign.pk}/cancel/", {"next": "list"})

    assert (response.status_code, response["Location"]) == (302, "/campaigns/")
    campaign.refresh_from_db()
    assert campaign.status == "cancelled"


def test_campaign_list_empty_names_the_team(client, erin):
    client.force_login(erin)

    html = client.get("/campaigns/").content.decode()

    assert "Team B has no campaigns yet" in html


@pytest.mark.parametrize("count", [1, 3])
def test_campaign_list_query_count_does_not_grow(
    client, make_campaign, bob, django_assert_max_num_queries, count
):
    for _ in range(count):
        _start(make_campaign("golden", tasks=1, n=1))
    client.force_login(bob)

    with django_assert_max_num_queries(9):
        response = client.get("/campaigns/")

    assert len(response.context["rows"]) == count


def test_launch_form_warns_without_workers_and_preselects_the_only_team(client, alice, team_a):
    client.force_login(alice)

    response = client.get("/campaigns/new/")
    html = response.content.decode()

    assert 'id="no-workers-warning"' in html
    assert response.context["form"].fields["team"].initial == team_a.pk
