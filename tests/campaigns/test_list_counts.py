"""The campaign list's counts: a campaign finished before the throughput window is counted from its
task summaries, and those counts equal a recount of its attempts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.attempts.models import Attempt
from apps.attempts.selectors.progress import campaigns_with_status_counts, status_counts
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_cancel, campaign_start
from apps.worker.attempts import attempt_execute
from tests.campaigns.conftest import drain

pytestmark = pytest.mark.django_db


def test_finished_campaigns_are_counted_from_summaries_equal_to_their_attempts(make_campaign):
    finished, cancelled, running = (make_campaign("sim:careless", tasks=3, n=3) for _ in range(3))
    for campaign in (finished, cancelled, running):
        campaign_start(campaign=campaign)
    drain(finished)
    attempt_execute(attempt_id=Attempt.objects.filter(campaign=cancelled).first().id, worker="w:1")
    campaign_cancel(campaign=cancelled)
    attempt_execute(attempt_id=Attempt.objects.filter(campaign=running).first().id, worker="w:1")
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Campaign.objects.filter(pk__in=[finished.pk, cancelled.pk]).update(finished_at=an_hour_ago)
    queryset = Campaign.objects.filter(pk__in=[finished.pk, cancelled.pk, running.pk]).order_by("pk")

    with CaptureQueriesContext(connection) as queries:
        rows = campaigns_with_status_counts(
            queryset, ended_since=timezone.now() - timedelta(minutes=1), limit=10
        )

    assert Campaign.objects.get(pk=finished.pk).status == Campaign.Status.DONE
    assert [(c.pk, counts) for c, counts, _ in rows] == [
        (c.pk, status_counts(campaign_id=c.pk)) for c in (finished, cancelled, running)
    ]
    # A cancelled campaign may still end an attempt: it is counted live.
    assert [recent for _, _, recent in rows] == [0, 1, 1]
    assert rows[0][1].done == 9 and rows[2][1].queued == 8
    assert len(queries) == 3  # the campaigns, the finished one's summaries, the others' attempts
