"""Failure signatures (SPEC §8) in AttemptSignature rows: written when an attempt is recorded, on every
record path, and by the backfill for stored attempts (ORM path everywhere, the COPY path on PostgreSQL)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from apps.attempts.models import Attempt, AttemptSignature, SignatureCount, SignatureVariant, TaskSummary
from apps.attempts.services import attempts_backfill_signatures
from apps.campaigns.services import campaign_start
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
def test_the_one_query_record_path_writes_the_signature(careless_in_one_query):
    _assert_recorded_signatures(careless_in_one_query)


def _backfill_round_trip(campaign) -> None:
    recorded = _stored(campaign)
    AttemptSignature.objects.filter(campaign=campaign).delete()
    failed = Attempt.objects.filter(campaign=campaign, verdict="fail").count()
    before = {s.pk: (s.updated_at, s.signatures_at) for s in TaskSummary.objects.filter(campaign=campaign)}

    report = attempts_backfill_signatures()

    assert (report.scanned, report.changed, report.campaigns) == (failed, failed, 1)
    assert _stored(campaign) == recorded
    after = {s.pk: (s.updated_at, s.signatures_at) for s in TaskSummary.objects.filter(campaign=campaign)}
    # Cluster and suspect pages recompute (signatures_at); stored figures stay valid (updated_at kept).
    assert all(after[pk][0] == updated for pk, (updated, _) in before.items())
    assert all(
        after[pk][1] is not None and (signed is None or after[pk][1] > signed)
        for pk, (_, signed) in before.items()
    )
    assert attempts_backfill_signatures().scanned == 0  # nothing left without one
    again = attempts_backfill_signatures(recompute=True)
    assert (again.scanned, again.changed) == (failed, 0)


@pytest.mark.django_db
def test_backfill_signs_stored_failures_like_the_record_path(careless):
    _backfill_round_trip(careless)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_backfill_on_postgresql_signs_like_the_record_path(careless):
    campaign = careless
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


def _tamper_one(campaign) -> int:
    """Point one failed attempt's signature row at a form it does not have; returns its id."""
    row = AttemptSignature.objects.filter(campaign=campaign).order_by("attempt_id").first()
    wrong = SignatureVariant.objects.create(
        digest="f" * 32, items=[["wrong_value", "nowhere", "nothing", "-", "p", "g"]], items_hash="f" * 64
    )
    AttemptSignature.objects.filter(pk=row.pk).update(digest=wrong.digest, variant=wrong)
    return row.pk


def _recompute_rewrites_exactly_what_differs(campaign) -> None:
    recorded = _stored(campaign)
    tampered = _tamper_one(campaign)
    assert _stored(campaign)[tampered] != recorded[tampered]
    failed = Attempt.objects.filter(campaign=campaign, verdict="fail").count()

    report = attempts_backfill_signatures(recompute=True)

    assert (report.scanned, report.changed, report.campaigns) == (failed, 1, 1)
    assert _stored(campaign) == recorded


@pytest.mark.django_db
def test_recompute_rewrites_exactly_the_rows_that_differ(careless):
    _recompute_rewrites_exactly_what_differs(careless)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_recompute_on_postgresql_rewrites_exactly_the_rows_that_differ(careless):
    campaign = careless
    _recompute_rewrites_exactly_what_differs(campaign)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_backfill_inside_a_transaction_on_postgresql_reads_what_the_transaction_sees(careless):
    # Outside a transaction the read is split over two fresh connections; inside one, those would not
    # see its uncommitted changes (here: the deleted signature rows), so it reads on its own connection.
    campaign = careless
    recorded = _stored(campaign)
    failed = Attempt.objects.filter(campaign=campaign, verdict="fail").count()
    with transaction.atomic():
        AttemptSignature.objects.filter(campaign=campaign).delete()
        report = attempts_backfill_signatures()
        assert (report.scanned, report.changed) == (failed, failed)
    assert _stored(campaign) == recorded


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_backfill_on_postgresql_groups_attempts_that_differ_only_in_row_keys(careless):
    """Two attempts whose diffs differ only in row keys (and item order) are signed once, identically."""
    campaign = careless
    first, second = Attempt.objects.filter(campaign=campaign, verdict="fail").exclude(diff_items=0)[:2]
    result = dict(first.result)
    result["diff"] = [
        {**item, "key": f"generated-{n}"} for n, item in enumerate(reversed(first.result["diff"]))
    ]
    Attempt.objects.filter(pk=second.pk).update(result=result)
    AttemptSignature.objects.all().delete()

    attempts_backfill_signatures()

    one, other = AttemptSignature.objects.filter(attempt_id__in=[first.pk, second.pk]).order_by("attempt_id")
    assert (one.digest, one.variant_id) == (other.digest, other.variant_id)
    assert _stored(campaign) == {a.pk: _expected(a) for a in Attempt.objects.filter(campaign=campaign)}


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_record_that_lost_its_lease_writes_no_signature_row(make_campaign, sent):
    from django.utils import timezone

    from apps.attempts import attempt_sql
    from apps.attempts.signature_rows import SignatureRow

    campaign = make_campaign("sim:careless", tasks=2, n=1)
    campaign_start(campaign=campaign)
    mine, stolen = Attempt.objects.filter(campaign=campaign).order_by("pk")
    now = timezone.now()
    for attempt in (mine, stolen):
        Attempt.objects.filter(pk=attempt.pk).update(status="running", worker="w:1", dispatched_at=now)
    Attempt.objects.filter(pk=stolen.pk).update(worker="w:other")  # the sweep gave it to another worker
    items = [["wrong_value", "tickets", "status", "-", "set ticket status", "set ticket status"]]

    for attempt in (mine, stolen):
        attempt.refresh_from_db()
        outcome = attempt_sql.record_in_one_query(
            attempt=attempt,
            worker="w:1",
            values={"status": "done", "verdict": "fail", "finished_at": now, "lease_expires_at": None},
            now=now,
            signature=SignatureRow(
                attempt.pk, campaign.pk, attempt.task_id, "a" * 32, items, "agent_done", True
            ),
        )
        assert outcome is not None and outcome.recorded == (attempt.pk == mine.pk)

    assert list(AttemptSignature.objects.values_list("attempt_id", "digest", "variant__items")) == [
        (mine.pk, "a" * 32, items)
    ]
    assert list(SignatureCount.objects.values_list("signature", "failures", "clean", "first_id")) == [
        ("a" * 32, 1, 1, mine.pk)
    ]


def _migrate_stored_signatures_forward() -> None:
    """A database from before AttemptSignature (signatures on the attempt rows) is migrated forward."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    old_apps = executor.migrate([("campaigns", "0009_merge_superseded_runs_and_signature_counts")]).apps
    try:
        user = old_apps.get_model("auth", "User").objects.create(username="old-owner")
        team = old_apps.get_model("core", "Team").objects.create(name="Old team", slug="old-team")
        suite = old_apps.get_model("suites", "Suite").objects.create(
            name="old", version="1", content_hash="s"
        )
        domain = old_apps.get_model("suites", "Domain").objects.create(
            suite=suite, name="retail", title="Retail"
        )
        task = old_apps.get_model("suites", "Task").objects.create(
            suite=suite, domain=domain, task_id="retail/one", content_hash="t", spec={}
        )
        agent = old_apps.get_model("agents", "AgentConfig").objects.create(name="old agent", kind="golden")
        campaign = old_apps.get_model("campaigns", "Campaign").objects.create(
            name="old", team=team, owner=user, agent=agent, suite=suite, harness_version="1",
            suite_version="1", suite_hash="s", status="done",
        )  # fmt: skip
        items = [["missing_effect", "tickets", "status", "-", "left ticket status open", "left it unchanged"]]
        old = old_apps.get_model("campaigns", "Attempt").objects
        signed = [
            old.create(
                campaign=campaign, task=task, index=i, status="done", verdict="fail", termination="agent_done",
                clean_looking=i == 0, signature="b" * 32, signature_items=items,
            ).pk
            for i in range(2)
        ]  # fmt: skip
        unsigned = old.create(campaign=campaign, task=task, index=2, status="done", verdict="fail").pk
        passed = old.create(campaign=campaign, task=task, index=3, status="done", verdict="pass").pk

        MigrationExecutor(connection).migrate(latest)

        rows = AttemptSignature.objects.order_by("attempt_id").values_list(
            "attempt_id", "campaign_id", "task_id", "digest", "variant__items", "termination", "clean_looking"
        )
        assert list(rows) == [
            (signed[0], campaign.pk, task.pk, "b" * 32, items, "agent_done", True),
            (signed[1], campaign.pk, task.pk, "b" * 32, items, "agent_done", False),
        ]
        assert SignatureVariant.objects.count() == 1  # one form, shared
        assert {pk: Attempt.objects.get(pk=pk).signature for pk in (unsigned, passed)} == {
            unsigned: "",
            passed: "",
        }
    finally:
        MigrationExecutor(connection).migrate(latest)


@pytest.mark.django_db(transaction=True)
def test_migration_moves_stored_signatures_into_signature_rows():
    _migrate_stored_signatures_forward()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_migration_moves_stored_signatures_into_signature_rows_on_postgresql():
    _migrate_stored_signatures_forward()
