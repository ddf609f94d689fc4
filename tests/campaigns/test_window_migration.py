"""Campaigns made before campaigns had their own window keep the one they had: their agent's
max_concurrency. New campaigns take the settings' default."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.support.old_rows import old_campaign, old_suite_rows

BEFORE = [("campaigns", "0011_attempts_own_attempt_records"), ("agents", "0003_agentconfig_team")]


@pytest.mark.django_db(transaction=True)
def test_campaigns_from_before_keep_their_agents_max_concurrency_as_window():
    from apps.campaigns.models import Campaign

    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    old_state = executor.migrate(BEFORE)
    try:
        rows = old_suite_rows(old_state.apps)
        agents = old_state.apps.get_model("agents", "AgentConfig").objects
        narrow = old_campaign(
            old_state.apps, rows, agent=agents.create(name="narrow", kind="sim", max_concurrency=3)
        )
        default = agents.create(name="default", kind="sim", persona="steady")
        wide = old_campaign(old_state.apps, rows, agent=default)

        MigrationExecutor(connection).migrate(latest)

        windows = dict(Campaign.objects.values_list("pk", "window"))
        assert (windows[narrow.pk], windows[wide.pk], default.max_concurrency) == (3, 16, 16)
    finally:
        MigrationExecutor(connection).migrate(latest)
