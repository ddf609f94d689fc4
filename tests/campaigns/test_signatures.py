"""Failure signatures (SPEC §8) in AttemptSignature rows: written when an attempt is recorded, on every
record path, and by the backfill for stored attempts (ORM path everywhere, the COPY path on PostgreSQL)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from apps.campaigns.models import Attempt, AttemptSignature, TaskSummary
from apps.campaigns.services import RUN_ATTEMPT_TASK, attempts_backfill_signatures, campaign_start
from apps.worker.attempts import attempt_execute
from tb_engine.signatures import signature_of_result
from tests.campaigns.conftest import drain


def _expected(attempt: Attempt) -> tuple[str, list]:
    signature = signature_of_result(attempt.result)
    return (signature.digest, signature.items()) if signature else ("", [])


def _stored(campaign) -> dict[int, tuple[str, list]]:
    return {a.pk: (a.signature, a.signature_items) for a in Attempt.objects.filter(campaign=campaign)}


@pytest.fixture
def careless(make_campaign):
    """A finished sim:careless campaign over 6 tasks x 4: failures of several kinds, and passes."""
    campaign = make_campaign("sim:careless", tasks=6, n=4)
    campaign_start(campaign=campaign)
    drain(campaign)
    return campaign


def _assert_recorded_signatures(campaign) -> None:
    attempts = list(Attempt.objects.filter(campaign=campaign, status="done"))
    failed = [a for a in attempts if a.verdict == "fail"]
    assert failed and len(failed) < len(attempts)  # both kinds are present
    for attempt in attempts:
        assert (attempt.signature, attempt.signature_items) == _expected(attempt)
    assert all(len(a.signature) == 32 for a in failed)
    assert {a.signature for a in attempts if a.verdict == "pass"} == {""}


@pytest.mark.django_db
def test_recorded_failures_carry_their_signature(careless):
    _assert_recorded_signatures(careless)
    # The row's elements are the result's own diff items, checks and rubrics, reduced.
    attempt = Attempt.objects.filter(campaign=careless, verdict="fail").exclude(diff_items=0).first()
    kinds = {item[0] for item in attempt.signature_items}
    assert {d["kind"] for d in attempt.result["diff"]} <= kinds


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_one_query_record_path_writes_the_signature(make_campaign, monkeypatch):
    from thinkingbox_web.celery import app

    monkeypatch.setattr(app.tasks[RUN_ATTEMPT_TASK], "apply_async", lambda *args, **kwargs: None)
    campaign = make_campaign("sim:careless", tasks=6, n=4)
    campaign_start(campaign=campaign)
    for attempt_id in Attempt.objects.filter(campaign=campaign).values_list("id", flat=True):
        assert attempt_execute(attempt_id=attempt_id, worker="w:1") == "done"
    _assert_recorded_signatures(campaign)


def _backfill_round_trip(campaign) -> None:
    recorded = _stored(campaign)
    AttemptSignature.objects.filter(campaign=campaign).delete()
    failed = Attempt.objects.filter(campaign=campaign, verdict="fail").count()
    before = {s.pk: s.updated_at for s in TaskSummary.objects.filter(campaign=campaign)}

    report = attempts_backfill_signatures()

    assert (report.scanned, report.changed, report.campaigns) == (failed, failed, 1)
    assert _stored(campaign) == recorded
    after = {s.pk: s.updated_at for s in TaskSummary.objects.filter(campaign=campaign)}
    assert all(after[pk] > stamp for pk, stamp in before.items())  # cached pages recompute
    assert attempts_backfill_signatures().scanned == 0  # nothing left without one
    again = attempts_backfill_signatures(recompute=True)
    assert (again.scanned, again.changed) == (failed, 0)


@pytest.mark.django_db
def test_backfill_signs_stored_failures_like_the_record_path(careless):
    _backfill_round_trip(careless)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_backfill_on_postgresql_signs_like_the_record_path(make_campaign):
    campaign = make_campaign("sim:careless", tasks=6, n=4)
    campaign_start(campaign=campaign)
    drain(campaign)
    assert connection.vendor == "postgresql"
    _backfill_round_trip(campaign)


@pytest.mark.django_db
def test_backfill_names_old_check_results_from_the_task_spec(careless):
    recorded = _stored(careless)
    # Results stored before check results carried their target.
    for attempt in Attempt.objects.filter(campaign=careless, verdict="fail"):
        result = attempt.result
        result["checks"] = [{k: v for k, v in c.items() if k != "target"} for c in result["checks"]]
        Attempt.objects.filter(pk=attempt.pk).update(result=result)
    AttemptSignature.objects.all().delete()
    attempts_backfill_signatures()
    assert _stored(careless) == recorded


@pytest.mark.django_db
def test_backfill_only_touches_the_chosen_campaigns(careless, make_campaign):
    other = make_campaign("sim:careless", tasks=2, n=2)
    campaign_start(campaign=other)
    drain(other)
    AttemptSignature.objects.all().delete()

    report = attempts_backfill_signatures(campaign_ids=[other.pk])

    assert report.campaigns == 1
    assert not AttemptSignature.objects.filter(campaign=careless).exists()
    assert _stored(other) == {a.pk: _expected(a) for a in Attempt.objects.filter(campaign=other)}


@pytest.mark.django_db
def test_backfill_command_reports_what_it_did(careless, capsys):
    AttemptSignature.objects.filter(campaign=careless).delete()
    failed = Attempt.objects.filter(campaign=careless, verdict="fail").count()
    call_command("backfill_signatures", "--campaign", str(careless.pk))
    out = capsys.readouterr().out
    assert out.startswith(f"{failed} failed attempts read, {failed} signatures written in 1 campaign(s)")
