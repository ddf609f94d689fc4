"""AgentConfig and PriceSheet moved from campaigns to agents without touching the database.

A database migrated before the move, holding rows, is migrated forward: every row, id and
foreign key survives, no schema statement runs, and the content types (hence permissions and
admin history) follow the models. The same test runs on SQLite and, in the integration subset,
on PostgreSQL.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from tests.support.old_rows import old_suite_rows

DDL = ("CREATE", "ALTER", "DROP")
# The migrations of the move itself: they must not touch the schema.
MOVE = [("agents", "0001_initial"), ("campaigns", "0003_agents_own_agent_configs_and_price_sheets")]


def _rows_before_the_move(old_apps) -> dict:
    """One of everything that points at an agent or price sheet, written through the old models."""
    rows = old_suite_rows(old_apps)
    user, team, suite, task = rows.user, rows.team, rows.suite, rows.task
    agent = old_apps.get_model("campaigns", "AgentConfig").objects.create(
        name="gpt endpoint", kind="openai", model="gpt-4.1-mini", parameters={"temperature": 0.2}
    )
    sheet = old_apps.get_model("campaigns", "PriceSheet").objects.create(
        name="March",
        source="vendor",
        effective_date=date(2025, 3, 1),
        prices={"gpt-4.1-mini": {"input": "0.4"}},
    )
    campaign = old_apps.get_model("campaigns", "Campaign").objects.create(
        name="old campaign",
        team=team,
        owner=user,
        agent=agent,
        suite=suite,
        price_sheet=sheet,
        harness_version="tbw-1.0",
        suite_version="1",
        suite_hash="s",
        status="done",
    )
    campaign.tasks.set([task])
    attempt = old_apps.get_model("campaigns", "Attempt").objects.create(
        campaign=campaign, task=task, index=0, status="done", verdict="pass", agent_cost=Decimal("0.25")
    )
    content_type = old_apps.get_model("contenttypes", "ContentType")
    old_type = content_type.objects.get(app_label="campaigns", model="agentconfig")
    return {
        "agent": agent.pk,
        "sheet": sheet.pk,
        "campaign": campaign.pk,
        "attempt": attempt.pk,
        "type": old_type.pk,
    }


def _migrate_an_old_database_forward() -> None:
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    from apps.agents.models import AgentConfig, PriceSheet
    from apps.campaigns.models import Campaign

    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    # Where every database stood before the move (campaigns 0003 depends on agents 0001, so both go).
    old_state = executor.migrate([("agents", None)])
    try:
        ids = _rows_before_the_move(old_state.apps)
        executor = MigrationExecutor(connection)

        with CaptureQueriesContext(connection) as queries:
            executor.migrate(MOVE)

        schema_statements = [
            q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith(DDL)
        ]
        assert schema_statements == []
        # Later migrations (new fields, new apps) may change the schema; the rows must survive them.
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
        agent = AgentConfig.objects.get(pk=ids["agent"])
        campaign = Campaign.objects.select_related("agent", "price_sheet").get(pk=ids["campaign"])
        assert (agent.name, agent.model, agent.parameters) == (
            "gpt endpoint",
            "gpt-4.1-mini",
            {"temperature": 0.2},
        )
        assert (campaign.agent.pk, campaign.price_sheet.pk) == (ids["agent"], ids["sheet"])
        assert PriceSheet.objects.get(pk=ids["sheet"]).prices == {"gpt-4.1-mini": {"input": "0.4"}}
        assert list(campaign.attempts.values_list("pk", "agent_cost")) == [(ids["attempt"], Decimal("0.25"))]
        assert list(agent.campaigns.values_list("pk", flat=True)) == [ids["campaign"]]
        moved = ContentType.objects.get_for_model(AgentConfig)
        assert (moved.pk, moved.app_label) == (ids["type"], "agents")
        assert set(Permission.objects.filter(content_type=moved).values_list("codename", flat=True)) == {
            "add_agentconfig",
            "change_agentconfig",
            "delete_agentconfig",
            "view_agentconfig",
        }
        # The database's own foreign key still guards the (unchanged) agent table.
        with pytest.raises(IntegrityError):
            Campaign.objects.filter(pk=ids["campaign"]).update(agent_id=ids["agent"] + 10_000)
    finally:
        MigrationExecutor(connection).migrate(latest)


@pytest.mark.django_db(transaction=True)
def test_database_from_before_the_move_keeps_its_rows():
    _migrate_an_old_database_forward()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_database_from_before_the_move_keeps_its_rows_on_postgresql():
    _migrate_an_old_database_forward()
