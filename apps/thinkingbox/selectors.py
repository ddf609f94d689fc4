"""Reads for ThinkingBox suites worth a name: the search service an attempt of a suite runs with,
and an imported suite's stored rows as the engine's runnable specs (campaign worker, env server)."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.conf import settings

from apps.suites.models import Suite
from apps.thinkingbox.models import SearchService
from tb_engine.spec import DomainSpec, SuiteSpec
from tb_engine.spec_json import domain_from_dict, task_from_dict


def search_service_for(*, suite_id: int) -> dict[str, Any] | None:
    """The suite's search service, else the site default (TB_SEARCH_URL), else None.

    ``{"url", "api_key_env", "scope"}``; ``error`` is added when the key variable is no longer in
    TB_SEARCH_KEY_ENVS (the engine then fails the attempt as an infrastructure error naming it).
    """
    row = SearchService.objects.filter(suite_id=suite_id).values("url", "api_key_env").first()
    if row is not None:
        search: dict[str, Any] = {**row, "scope": "suite"}
    elif settings.THINKINGBOX_SEARCH_URL:
        search = {
            "url": settings.THINKINGBOX_SEARCH_URL,
            "api_key_env": settings.THINKINGBOX_SEARCH_KEY_ENV,
            "scope": "site default",
        }
    else:
        return None
    key_env = search["api_key_env"]
    if key_env and key_env not in settings.THINKINGBOX_SEARCH_KEY_ENVS:
        search["error"] = f"the search service's key variable {key_env} is not allowed by TB_SEARCH_KEY_ENVS"
    return search


def runnable_mcp_domain(*, suite_id: int, spec: dict[str, Any]) -> DomainSpec:
    """A stored MCP domain with the suite's search service (read per attempt: the key stays in the environment)."""
    domain = domain_from_dict(spec)
    if domain.backend != "mcp":
        return domain
    search = search_service_for(suite_id=suite_id)
    return dataclasses.replace(domain, mcp={**(domain.mcp or {}), "search": search})


def stored_suite_spec(*, suite: Suite, task_ids: list[str] | None = None) -> SuiteSpec:
    """An imported suite as the engine's SuiteSpec, from its stored rows (``task_ids``: only those tasks)."""
    domains = {row.name: runnable_mcp_domain(suite_id=suite.pk, spec=row.spec) for row in suite.domains.all()}
    rows = suite.tasks.all() if task_ids is None else suite.tasks.filter(task_id__in=task_ids)
    tasks = {row.task_id: task_from_dict(row.spec) for row in rows}
    return SuiteSpec(
        name=suite.name,
        version=suite.version,
        domains=domains,
        tasks=tasks,
        evaluation_only=suite.evaluation_only,
        description=suite.description,
    )
