"""Issue 30 item 6: a campaign's page leads to its results; a cancelled run never reads as complete;
an early ETA is measured over the run's own age."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.attempts.models import Attempt
from tests.figures.conftest import _fresh_cache, run_campaign  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def test_campaign_page_links_to_its_results_filtered_to_it(client, alice, run_campaign):
    campaign = run_campaign("sim:careless", tasks=3, n=2, name="Careless run")
    client.force_login(alice)
    html = client.get(f"/campaigns/{campaign.pk}/").content.decode()

    for anchor, href in (
        ("results-tasks", f"/tasks/?c={campaign.pk}"),
        ("results-triage", f"/triage/?c={campaign.pk}&amp;scope=failed"),
        ("results-gap", f"/gap/?c={campaign.pk}"),
        ("results-compare", f"/compare/?a={campaign.pk}"),
        ("results-export", f"/exports/attempts.csv?c={campaign.pk}"),
    ):
        assert f'href="{href}" id="{anchor}"' in html
    triage = client.get(f"/triage/?c={campaign.pk}&scope=failed&view=list")
    assert triage.context["filters"].campaigns == (campaign.pk,)
    failed = Attempt.objects.filter(campaign=campaign, verdict="fail").count()
    assert triage.context["page"].paginator.count == failed
    export = client.get(f"/exports/attempts.csv?c={campaign.pk}")
    assert export.status_code == 200


def test_a_cancelled_run_shows_what_ran_against_what_it_was_launched_with(
    client, alice, make_campaign, run_campaign
):
    from apps.campaigns.services import campaign_cancel, campaign_start

    campaign = make_campaign(
        "sim:steady", tasks=2, n=2
    )  # dispatch is off (run_campaign): attempts stay queued
    campaign_start(campaign=campaign)
    first = Attempt.objects.filter(campaign=campaign).order_by("pk").first()
    Attempt.objects.filter(pk=first.pk).update(status=Attempt.Status.DONE, verdict=Attempt.Verdict.PASS)
    campaign_cancel(campaign=campaign)
    client.force_login(alice)

    html = client.get(f"/campaigns/{campaign.pk}/").content.decode()

    assert '<dd id="attempts-ran">1 / 4</dd>' in html
    assert "1 of the 4 attempts it was launched with ran; 3 were cancelled before running" in html
    assert 'style="width: 25%"' in html and "width: 100" not in html


def test_early_throughput_is_measured_over_the_runs_own_age(make_campaign):
    from apps.attempts.selectors.progress import StatusCounts
    from apps.campaigns.selectors import CampaignProgress

    campaign = make_campaign("sim:steady", tasks=2, n=20)
    campaign.started_at = timezone.now() - timedelta(seconds=5)
    campaign.status = "running"
    counts = StatusCounts(
        total=40, queued=30, running=7, done=3, infra_error=0, cancelled=0, passed=3, unjudged=0
    )

    progress = CampaignProgress.of(campaign, counts, ended_last_minute=3)

    assert progress.throughput_per_min == pytest.approx(36.0, rel=0.05)  # 3 in 5 s, not 3 a minute
    assert progress.eta_seconds == pytest.approx(37 / (3 / 5), rel=0.05)  # about a minute, not 12
