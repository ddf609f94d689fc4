"""The attempts' hand-written SQL (apps/attempts/attempt_sql.py): same conditions as the ORM, fewer round trips.

The claim tests run on any database. The one-round-trip record, the prepared claim and the
two-statements-per-attempt budget are PostgreSQL only: they run in the integration subset
(a database connection outside the test transaction, messages captured instead of sent).
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.agents.models import AgentConfig, PriceSheet
from apps.attempts import attempt_sql
from apps.attempts.models import Attempt
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaign_cancel, campaign_start
from apps.worker import attempts
from apps.worker.attempts import attempt_execute
from tests.campaigns.conftest import recount, summaries


def _claim(attempt_id: int, worker: str = "w:1"):
    now = timezone.now()
    return attempt_sql.claim_and_load(
        attempt_id=attempt_id, worker=worker, now=now, lease_expires_at=now + timedelta(seconds=60)
    )


def _first_queued(campaign) -> Attempt:
    return (
        Attempt.objects.filter(campaign=campaign, status=Attempt.Status.QUEUED)
        .order_by("index", "task_id")
        .first()
    )


@pytest.mark.django_db
def test_claim_loads_the_rows_the_orm_would(make_campaign):
    campaign = make_campaign(tasks=2, n=1)
    campaign_start(campaign=campaign)
    queued = _first_queued(campaign)

    attempt = _claim(queued.id)

    expected = Attempt.objects.select_related("campaign__agent", "task__domain", "task__suite").get(
        id=queued.id
    )
    assert (attempt.status, attempt.worker, attempt.index, attempt.retries) == (
        "running",
        "w:1",
        expected.index,
        0,
    )
    assert (
        attempt.campaign.seed == expected.campaign.seed and attempt.campaign.judge == expected.campaign.judge
    )
    assert attempt.campaign.user_simulator == expected.campaign.user_simulator
    assert attempt.campaign.agent.kind == expected.campaign.agent.kind
    assert attempt.campaign.agent.parameters == expected.campaign.agent.parameters
    assert attempt.campaign.price_sheet is None
    assert attempt.task.content_hash == expected.task.content_hash
    assert (attempt.task.suite.name, attempt.task.suite.source) == (
        expected.task.suite.name,
        expected.task.suite.source,
    )
    assert attempt.task.domain.spec == expected.task.domain.spec
    assert attempt.started_at is not None and attempt.lease_expires_at > attempt.started_at
    assert attempt.result == {}  # deferred fields still load on access


def _loaded_values(instance) -> dict:
    """Every concrete field value the instance holds (deferred ones are left out, not loaded)."""
    deferred = instance.get_deferred_fields()
    return {
        field.attname: getattr(instance, field.attname)
        for field in instance._meta.concrete_fields
        if field.attname not in deferred
    }


def _claimed_rows_equal_the_orms(make_campaign):
    sheet = PriceSheet.objects.create(
        name="converters", source="test", effective_date=date(2026, 3, 1), prices={"m": {"input": "1.5"}}
    )
    agent = AgentConfig.objects.create(
        name="golden with parameters", kind=AgentConfig.Kind.GOLDEN, parameters={"temperature": 0.5}
    )
    campaign = make_campaign(agent, tasks=1, n=1, price_sheet=sheet, judge={"kind": "keyword", "x": [1]})
    campaign_start(campaign=campaign)
    queued = _first_queued(campaign)

    claimed = _claim(queued.id)

    orm = Attempt.objects.select_related(
        "campaign__agent", "campaign__price_sheet", "task__suite", "task__domain"
    ).get(id=queued.id)
    pairs = [
        (claimed, orm),
        (claimed.campaign, orm.campaign),
        (claimed.campaign.agent, orm.campaign.agent),
        (claimed.campaign.price_sheet, orm.campaign.price_sheet),
        (claimed.task, orm.task),
        (claimed.task.suite, orm.task.suite),
        (claimed.task.domain, orm.task.domain),
    ]
    for raw_loaded, orm_loaded in pairs:
        raw_values = _loaded_values(raw_loaded)
        assert raw_values == {name: getattr(orm_loaded, name) for name in raw_values}
    assert claimed.get_deferred_fields() >= {"result"}  # and those load on access, as the ORM's do
    assert claimed.result == orm.result


@pytest.mark.django_db
def test_claimed_rows_carry_exactly_the_values_the_orm_loads(make_campaign):
    # attempt_sql converts raw rows with the ORM's own converters (a Django internal): JSON,
    # dates, aware datetimes, SQLite booleans. A change of that internal fails here.
    _claimed_rows_equal_the_orms(make_campaign)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_claimed_rows_carry_exactly_the_values_the_orm_loads_on_postgresql(make_campaign):
    _claimed_rows_equal_the_orms(make_campaign)


@pytest.mark.django_db
def test_claim_is_conditional(make_campaign):
    campaign = make_campaign(tasks=1, n=2)
    campaign_start(campaign=campaign)
    first, second = Attempt.objects.filter(campaign=campaign).order_by("index")

    assert _claim(first.id, "w:1") is not None
    assert _claim(first.id, "w:2") is None  # already running
    campaign_cancel(campaign=campaign)
    assert _claim(second.id, "w:2") is None  # cancelled (and not queued any more)
    Attempt.objects.filter(id=second.id).update(status=Attempt.Status.QUEUED)
    assert _claim(second.id, "w:2") is None  # queued, but its campaign is not running
    assert Attempt.objects.get(id=first.id).worker == "w:1"


@pytest.mark.django_db
def test_update_owned_needs_the_owner_and_a_running_campaign(make_campaign):
    campaign = make_campaign(tasks=1, n=1)
    campaign_start(campaign=campaign)
    attempt = _claim(_first_queued(campaign).id, "w:1")
    lease = {"lease_expires_at": timezone.now() + timedelta(seconds=5)}

    assert not attempt_sql.update_owned(
        attempt_id=attempt.id, worker="w:2", values=lease, require_running_campaign=True
    )
    assert attempt_sql.update_owned(
        attempt_id=attempt.id, worker="w:1", values=lease, require_running_campaign=True
    )
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.CANCELLED)
    assert not attempt_sql.update_owned(
        attempt_id=attempt.id, worker="w:1", values=lease, require_running_campaign=True
    )
    assert attempt_sql.update_owned(
        attempt_id=attempt.id, worker="w:1", values=lease, require_running_campaign=False
    )


# --- PostgreSQL: the one-round-trip record and the prepared claim ---------------------------------


@pytest.fixture
def one_at_a_time(make_campaign):
    """A golden campaign of 3 tasks x 2 whose window is one attempt."""

    def make():
        return make_campaign(tasks=3, n=2, window=1)

    return make


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_each_record_dispatches_the_next_attempt_in_order_and_the_last_finishes(one_at_a_time, sent):
    campaign = one_at_a_time()
    campaign_start(campaign=campaign)
    order = list(
        Attempt.objects.filter(campaign=campaign).order_by("index", "task_id").values_list("id", flat=True)
    )
    assert sent == order[:1]

    for attempt_id in order:
        assert sent[-1] == attempt_id  # the previous record handed its slot to exactly this one
        assert attempt_execute(attempt_id=attempt_id, worker="w:1") == "done"

    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.DONE and campaign.finished_at is not None
    assert sent == order
    assert summaries(campaign) == recount(campaign)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_steady_state_attempt_is_two_round_trips(make_campaign, sent):
    campaign = make_campaign(tasks=2, n=3, window=2)
    campaign_start(campaign=campaign)
    ids = list(
        Attempt.objects.filter(campaign=campaign).order_by("index", "task_id").values_list("id", flat=True)
    )
    for attempt_id in ids[:2]:  # one attempt per task: specs parsed, claim prepared
        assert attempt_execute(attempt_id=attempt_id, worker="w:1") == "done"

    with CaptureQueriesContext(connection) as queries:
        assert attempt_execute(attempt_id=ids[2], worker="w:1") == "done"

    statements = [q["sql"].split(None, 1)[0].upper() for q in queries.captured_queries]
    assert statements == ["EXECUTE", "UPDATE"], queries.captured_queries
    for attempt_id in ids[3:]:
        attempt_execute(attempt_id=attempt_id, worker="w:1")
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.DONE
    assert summaries(campaign) == recount(campaign)
    assert Attempt.objects.filter(campaign=campaign, status="done").count() == 6


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_record_of_a_lost_lease_writes_and_dispatches_nothing(one_at_a_time, sent):
    campaign = one_at_a_time()
    campaign_start(campaign=campaign)
    first = _first_queued(campaign)
    attempt = _claim(first.id, "w:1")
    Attempt.objects.filter(id=first.id).update(worker="w:other")  # the sweep gave it to another worker

    outcome = attempt_sql.record_in_one_query(
        attempt=attempt,
        worker="w:1",
        values={"status": "done", "verdict": "pass", "finished_at": timezone.now(), "lease_expires_at": None},
        now=timezone.now(),
    )

    assert outcome is not None and not outcome.recorded and outcome.dispatched == []
    first.refresh_from_db()
    assert (first.status, first.worker, first.verdict) == ("running", "w:other", "")
    assert Attempt.objects.filter(campaign=campaign, dispatched_at__isnull=False).count() == 1
    assert summaries(campaign) == recount(campaign)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_lost_lease_and_cancellation_take_the_orm_path(one_at_a_time, sent, monkeypatch):
    campaign = one_at_a_time()
    campaign_start(campaign=campaign)
    first = _first_queued(campaign)

    original = attempts.run_engine_attempt

    def steal_then_run(attempt, heartbeat):
        Attempt.objects.filter(id=attempt.id).update(worker="w:other")
        return original(attempt, heartbeat=heartbeat)

    with monkeypatch.context() as patch:
        patch.setattr(attempts, "run_engine_attempt", steal_then_run)
        assert attempt_execute(attempt_id=first.id, worker="w:1") == "lost-lease"
    assert sent == [first.id]  # nothing more dispatched

    second = (
        Attempt.objects.filter(campaign=campaign).exclude(id=first.id).order_by("index", "task_id").first()
    )
    Attempt.objects.filter(id=second.id).update(dispatched_at=timezone.now())

    def cancel_then_run(attempt, heartbeat):
        Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.CANCELLED)
        return original(attempt, heartbeat=heartbeat)

    with monkeypatch.context() as patch:
        patch.setattr(attempts, "run_engine_attempt", cancel_then_run)
        assert attempt_execute(attempt_id=second.id, worker="w:1") == "cancelled"
    assert Attempt.objects.get(id=second.id).status == "cancelled"
    assert summaries(campaign) == recount(campaign)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_record_inside_a_transaction_is_left_to_the_orm_path(make_campaign):
    campaign = make_campaign(tasks=1, n=1)
    campaign_start(campaign=campaign)
    attempt = _claim(_first_queued(campaign).id)
    with transaction.atomic():
        assert (
            attempt_sql.record_in_one_query(attempt=attempt, worker="w:1", values={}, now=timezone.now())
            is None
        )


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_claim_survives_a_session_that_lost_its_prepared_statement(make_campaign, monkeypatch):
    campaign = make_campaign(tasks=1, n=3)
    campaign_start(campaign=campaign)
    first, second, third = Attempt.objects.filter(campaign=campaign).order_by("index")
    monkeypatch.setattr(attempt_sql, "_prepared_statements_work", True)

    assert _claim(first.id) is not None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE name = %s", [attempt_sql.PREPARED_CLAIM]
        )
        assert cursor.fetchone()[0] == 1
        cursor.execute("DEALLOCATE ALL")  # what a transaction-pooling proxy's server switch looks like

    assert _claim(second.id) is not None  # falls back to the plain statement...
    assert attempt_sql._prepared_statements_work is False  # ...and stays there for this process
    assert _claim(third.id) is not None
    assert _claim(third.id) is None
