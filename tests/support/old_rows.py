"""Rows written through a migration state's historical models, for the data-migration tests.

Each migration test rolls a database back to before its migration and fills it through the models
as they were then (``executor.loader.project_state(...).apps``); the suite, task and campaign they
all need are made here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OldSuiteRows:
    user: Any
    team: Any
    suite: Any
    domain: Any
    task: Any


def old_suite_rows(old_apps) -> OldSuiteRows:
    """An owner, a team and a one-task retail suite, through ``old_apps``' models."""
    user = old_apps.get_model("auth", "User").objects.create(username="old-owner")
    team = old_apps.get_model("core", "Team").objects.create(name="Old team", slug="old-team")
    suite = old_apps.get_model("suites", "Suite").objects.create(
        name="old-suite", version="1", content_hash="s"
    )
    domain = old_apps.get_model("suites", "Domain").objects.create(suite=suite, name="retail", title="Retail")
    task = old_apps.get_model("suites", "Task").objects.create(
        suite=suite, domain=domain, task_id="retail/one", content_hash="t", spec={}
    )
    return OldSuiteRows(user=user, team=team, suite=suite, domain=domain, task=task)


def old_campaign(old_apps, rows: OldSuiteRows, *, agent, **fields):
    """A finished campaign of ``agent`` on ``rows``' suite, through ``old_apps``' Campaign model."""
    return old_apps.get_model("campaigns", "Campaign").objects.create(
        name="old campaign",
        team=rows.team,
        owner=rows.user,
        agent=agent,
        suite=rows.suite,
        harness_version="tbw-1.0",
        suite_version="1",
        suite_hash="s",
        status="done",
        **fields,
    )


def old_sim_agent(old_apps):
    """A simulated-persona agent configuration (agents app)."""
    return old_apps.get_model("agents", "AgentConfig").objects.create(
        name="sim", kind="sim", persona="steady"
    )
