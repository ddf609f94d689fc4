"""A campaign that settles (finished, cancelled, a resumed re-run finished, imported) has its figures
stored by a Celery task sent after commit, so the first viewer — a fresh server process — reads
them instead of computing; the task claims the campaign so two messages never compute it at once."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_cancel, campaign_resume, campaign_start
from apps.figures import tables
from apps.figures.models import FigureRefresh, StoredFigure
from apps.figures.services import figures_refresh_claimed
from apps.figures.tables import forget_process_figures
from apps.worker.attempts import attempt_execute
from tests.campaigns.conftest import drain
from tests.figures.test_stored_figures import page_figures, recomputed

pytestmark = pytest.mark.django_db


@pytest.fixture
def half_run(make_campaign):
    """A running campaign (three tasks, N = 4) with half of its attempts recorded."""
    campaign = make_campaign("sim:steady", tasks=3, n=4)
    campaign_start(campaign=campaign)
    for attempt_id in Attempt.objects.filter(campaign=campaign, index__lt=2).values_list("id", flat=True):
        attempt_execute(attempt_id=attempt_id, worker="test-worker:1")
    return campaign


def read_without_computing(campaign: Campaign, monkeypatch) -> dict:
    """The page figures as a fresh server process reads them, failing if any table must be built."""
    forget_process_figures()

    def no_tables(ids):
        raise AssertionError(f"a page had to build tables for {list(ids)}: nothing was stored")

    with monkeypatch.context() as patched:
        patched.setattr(tables, "per_task_frames", no_tables)
        return page_figures([campaign])


def test_cancel_stores_the_figures_the_first_viewer_reads(
    half_run, monkeypatch, django_capture_on_commit_callbacks
):
    assert not StoredFigure.objects.filter(campaign_id=half_run.pk).exists()

    with django_capture_on_commit_callbacks(execute=True) as sent:
        campaign_cancel(campaign=half_run)

    assert len(sent) == 2  # the figures' message and the team's grouped triage queue's
    # The team's grouped triage queue was stored too (apps.triage.tasks.clusters_store).
    assert StoredFigure.objects.filter(slot__contains=":triage-index:").count() == 1
    shown = read_without_computing(half_run, monkeypatch)
    assert shown[half_run.pk]["figures"].coverage.done_attempts == 6
    assert shown == recomputed([half_run])
    refresh = FigureRefresh.objects.get(campaign_id=half_run.pk)
    assert refresh.claimed_at is None and refresh.refreshed_at is not None


def test_a_resumed_re_run_that_finishes_stores_its_new_figures(
    half_run, monkeypatch, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        campaign_cancel(campaign=half_run)
    with django_capture_on_commit_callbacks(execute=True):
        campaign_resume(campaign=Campaign.objects.get(pk=half_run.pk))
        drain(half_run)

    assert Campaign.objects.get(pk=half_run.pk).status == Campaign.Status.DONE
    shown = read_without_computing(half_run, monkeypatch)
    assert shown[half_run.pk]["figures"].coverage.done_attempts == 12
    assert shown == recomputed([half_run])


def test_a_claimed_campaign_is_not_computed_twice(half_run):
    FigureRefresh.objects.create(campaign_id=half_run.pk, claimed_at=timezone.now())

    assert figures_refresh_claimed(campaign_id=half_run.pk) is False
    assert not StoredFigure.objects.filter(campaign_id=half_run.pk).exists()


def test_a_dead_workers_claim_expires(half_run):
    FigureRefresh.objects.create(
        campaign_id=half_run.pk, claimed_at=timezone.now() - timezone.timedelta(hours=1)
    )

    assert figures_refresh_claimed(campaign_id=half_run.pk) is True
    assert StoredFigure.objects.filter(campaign_id=half_run.pk).exists()
    assert FigureRefresh.objects.get(campaign_id=half_run.pk).claimed_at is None


def test_a_deleted_campaign_is_skipped():
    assert figures_refresh_claimed(campaign_id=987654) is False
    assert not FigureRefresh.objects.exists()
