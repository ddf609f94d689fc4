"""attempts 0002 stamps format_version 1 into results stored before the format had a version.

A database at attempts 0001 holds attempts with results of the old shape (no format_version), one
already stamped, an empty one and one of a later version. Migrated forward, the old ones say version
1 and are otherwise unchanged, and nothing else moves; backwards, the stamp comes off again. The
same test runs on SQLite and, in the integration subset, on PostgreSQL.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.attempts.selectors.results import stored_result
from tb_engine.results import AttemptResult, CheckResult, DiffItem
from tests.support.old_rows import old_campaign, old_sim_agent, old_suite_rows

BEFORE = [("attempts", "0001_initial")]
STAMP = [("attempts", "0002_stamp_result_format_version")]


def _versioned_result(task_id: str) -> dict:
    return AttemptResult(
        task_id=task_id,
        task_hash="t",
        status="done",
        termination="agent_done",
        verdict="fail",
        diff=[DiffItem("wrong_value", "tickets", "7", "status", "open", "open", "closed")],
        checks=[CheckResult(kind="state", description="closed", passed=False)],
        categories=["wrong_value"],
    ).to_dict()


def _unversioned_result(task_id: str) -> dict:
    """A result as the engine stored it before format_version existed: version 1 without the key."""
    result = _versioned_result(task_id)
    del result["format_version"]
    return result


def _attempts_before_the_stamp(old_apps) -> dict[str, int]:
    rows = old_suite_rows(old_apps)
    task = rows.task
    campaign = old_campaign(old_apps, rows, agent=old_sim_agent(old_apps))
    attempt = old_apps.get_model("attempts", "Attempt")
    results = {
        "old": _unversioned_result("old"),
        "old_too": _unversioned_result("old_too"),
        "stamped": _versioned_result("stamped"),
        "empty": {},
        "later": {**_unversioned_result("later"), "format_version": 2},
    }
    return {
        name: attempt.objects.create(
            campaign=campaign, task=task, index=index, status="done", result=result
        ).pk
        for index, (name, result) in enumerate(results.items())
    }


def _stored_results(ids: dict[str, int]) -> dict[str, dict]:
    from apps.attempts.models import Attempt

    by_id = dict(Attempt.objects.filter(pk__in=ids.values()).values_list("pk", "result"))
    return {name: by_id[pk] for name, pk in ids.items()}


def _stamp_an_old_database_and_take_it_back() -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    old_state = executor.migrate(BEFORE)
    try:
        ids = _attempts_before_the_stamp(old_state.apps)

        MigrationExecutor(connection).migrate(STAMP)
        stamped = _stored_results(ids)
        MigrationExecutor(connection).migrate(BEFORE)
        unstamped = _stored_results(ids)
    finally:
        MigrationExecutor(connection).migrate(latest)

    assert stamped == {
        "old": {**_unversioned_result("old"), "format_version": 1},
        "old_too": {**_unversioned_result("old_too"), "format_version": 1},
        "stamped": _versioned_result("stamped"),
        "empty": {},
        "later": {**_unversioned_result("later"), "format_version": 2},
    }
    # The stamped results read back as the same typed result the unversioned ones did.
    assert stored_result(stamped["old"]) == stored_result(_unversioned_result("old"))
    assert unstamped == {
        "old": _unversioned_result("old"),
        "old_too": _unversioned_result("old_too"),
        "stamped": _unversioned_result("stamped"),
        "empty": {},
        "later": {**_unversioned_result("later"), "format_version": 2},
    }


@pytest.mark.django_db(transaction=True)
def test_old_results_get_format_version_one_and_lose_it_backwards():
    _stamp_an_old_database_and_take_it_back()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_old_results_get_format_version_one_and_lose_it_backwards_on_postgresql():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT data_type FROM information_schema.columns "
            "WHERE table_name = 'campaigns_attempt' AND column_name = 'result'"
        )
        assert cursor.fetchall() == [("jsonb",)]
    _stamp_an_old_database_and_take_it_back()
