"""The attempt models moved from campaigns to attempts without touching the database.

A database migrated before the move, holding rows, is migrated forward: every attempt, summary,
signature row, variant and signature count keeps its id and values, the triage rows pointing at an
attempt still do, no schema statement runs, and the content types (hence permissions and admin
history) follow the models. Backwards, the move is undone just as quietly. The same test runs on
SQLite and, in the integration subset, on PostgreSQL.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from tests.support.old_rows import old_campaign, old_sim_agent, old_suite_rows

DDL = ("CREATE", "ALTER", "DROP")
BEFORE = [
    ("attempts", None),
    ("campaigns", "0010_attempt_signature_rows"),
    ("triage", "0004_merge_suspects_and_validations"),
]
# The migrations of the move itself: they must not touch the schema.
MOVE = [
    ("attempts", "0001_initial"),
    ("triage", "0005_attempts_own_the_attempt_model"),
    ("campaigns", "0011_attempts_own_attempt_records"),
]
MOVED = ["attempt", "attemptsignature", "signaturecount", "signaturevariant", "tasksummary"]


def _rows_before_the_move(old_apps) -> dict:
    """One row of every moved model, and a triage review of the attempt, written through the old models."""
    rows = old_suite_rows(old_apps)
    task = rows.task
    campaign = old_campaign(old_apps, rows, agent=old_sim_agent(old_apps))
    attempt = old_apps.get_model("campaigns", "Attempt").objects.create(
        campaign=campaign,
        task=task,
        index=0,
        status="done",
        verdict="fail",
        termination="agent_done",
        agent_cost=Decimal("0.25"),
    )
    variant = old_apps.get_model("campaigns", "SignatureVariant").objects.create(
        digest="d" * 32, items=[["wrong_value", "tickets.status"]], items_hash="h" * 64
    )
    old_apps.get_model("campaigns", "AttemptSignature").objects.create(
        attempt=attempt,
        campaign=campaign,
        task=task,
        digest="d" * 32,
        variant=variant,
        termination="agent_done",
    )
    summary = old_apps.get_model("campaigns", "TaskSummary").objects.create(
        campaign=campaign, task=task, n_done=1, n_pass=0, agent_cost=Decimal("0.25")
    )
    count = old_apps.get_model("campaigns", "SignatureCount").objects.create(
        campaign=campaign,
        task=task,
        signature="d" * 32,
        termination="agent_done",
        failures=1,
        first_id=attempt.pk,
        last_id=attempt.pk,
    )
    review = old_apps.get_model("triage", "AttemptReview").objects.create(attempt=attempt)
    content_type = old_apps.get_model("contenttypes", "ContentType")
    types = {
        model: content_type.objects.get_or_create(app_label="campaigns", model=model)[0].pk for model in MOVED
    }
    return {
        "campaign": campaign.pk,
        "task": task.pk,
        "attempt": attempt.pk,
        "variant": variant.pk,
        "summary": summary.pk,
        "count": count.pk,
        "review": review.pk,
        "types": types,
    }


def _schema_statements(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith(DDL)]


def _migrate_an_old_database_forward_and_back() -> None:
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    from apps.attempts.models import Attempt, AttemptSignature, SignatureCount, SignatureVariant, TaskSummary
    from apps.triage.models import AttemptReview

    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    old_state = executor.migrate(BEFORE)
    try:
        ids = _rows_before_the_move(old_state.apps)

        with CaptureQueriesContext(connection) as queries:
            MigrationExecutor(connection).migrate(MOVE)
        forward_statements = _schema_statements(queries)
        # Later migrations may change the schema; the rows must survive them.
        MigrationExecutor(connection).migrate(latest)

        assert forward_statements == []
        attempt = Attempt.objects.select_related("campaign").get(pk=ids["attempt"])
        assert (attempt.campaign.pk, attempt.task_id, attempt.verdict, attempt.agent_cost) == (
            ids["campaign"],
            ids["task"],
            "fail",
            Decimal("0.25"),
        )
        assert (attempt.signature, attempt.signature_items) == ("d" * 32, [["wrong_value", "tickets.status"]])
        assert list(AttemptSignature.objects.values_list("attempt_id", "variant_id")) == [
            (ids["attempt"], ids["variant"])
        ]
        assert list(SignatureVariant.objects.values_list("pk", flat=True)) == [ids["variant"]]
        assert list(TaskSummary.objects.values_list("pk", "n_done", "agent_cost")) == [
            (ids["summary"], 1, Decimal("0.25"))
        ]
        assert list(SignatureCount.objects.values_list("pk", "failures", "first_id")) == [
            (ids["count"], 1, ids["attempt"])
        ]
        assert list(attempt.campaign.attempts.values_list("pk", flat=True)) == [ids["attempt"]]
        assert AttemptReview.objects.get(pk=ids["review"]).attempt_id == ids["attempt"]
        moved = {
            model: ContentType.objects.get_for_model(model_class)
            for model, model_class in zip(
                MOVED, [Attempt, AttemptSignature, SignatureCount, SignatureVariant, TaskSummary], strict=True
            )
        }
        assert {model: (t.pk, t.app_label) for model, t in moved.items()} == {
            model: (ids["types"][model], "attempts") for model in MOVED
        }
        assert set(
            Permission.objects.filter(content_type=moved["attempt"]).values_list("codename", flat=True)
        ) == {
            "add_attempt",
            "change_attempt",
            "delete_attempt",
            "view_attempt",
        }
        # The database's own foreign key still guards the (unchanged) attempt table.
        with pytest.raises(IntegrityError):
            Attempt.objects.filter(pk=ids["attempt"]).update(campaign_id=ids["campaign"] + 10_000)

        # Backwards: later migrations are undone first (they may change the schema), then the move
        # itself is undone without a schema statement, and the rows are still there.
        MigrationExecutor(connection).migrate(MOVE)
        with CaptureQueriesContext(connection) as queries:
            back = MigrationExecutor(connection).migrate(BEFORE)
        assert _schema_statements(queries) == []
        old_attempt = back.apps.get_model("campaigns", "Attempt")
        assert list(old_attempt.objects.values_list("pk", "verdict")) == [(ids["attempt"], "fail")]
        old_type = back.apps.get_model("contenttypes", "ContentType").objects.get(pk=ids["types"]["attempt"])
        assert old_type.app_label == "campaigns"
    finally:
        MigrationExecutor(connection).migrate(latest)


@pytest.mark.django_db(transaction=True)
def test_database_from_before_the_move_keeps_its_rows():
    _migrate_an_old_database_forward_and_back()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_database_from_before_the_move_keeps_its_rows_on_postgresql():
    _migrate_an_old_database_forward_and_back()
