"""Bridge from stored rows to the engine: rows -> engine configurations -> ``AttemptSetup``; run; price.

Everything the worker needs is rebuilt from ids, so any worker on any machine can run any
attempt. A stored task's engine objects come from apps.worker.selectors (parsed once per process).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.conf import settings

from apps.agents.models import AgentConfig
from apps.agents.services import api_key_env_refusal
from apps.attempts.models import Attempt
from apps.attempts.services import AttemptOutcome
from apps.campaigns.models import Campaign
from apps.suites.models import Domain, Suite
from apps.suites.selectors import builtin_suite_sources
from apps.thinkingbox.selectors import runnable_mcp_domain
from apps.worker.connections import connection_release_while_waiting
from apps.worker.selectors import builtin_suite, task_domain, task_spec_of
from tb_engine.attempt_setup import AttemptSetup
from tb_engine.faults import FaultPlan
from tb_engine.golden import golden_snapshot
from tb_engine.interfaces import AgentStep, AgentView
from tb_engine.pricing import PriceList
from tb_engine.sandbox import domain_runtime
from tb_engine.spec import DomainSpec, TaskSpec
from tb_engine.thinkingbox.mcp_config import launch_config
from tb_engine.thinkingbox.mcp_pool import pool_for


class AttemptCancelled(BaseException):
    """Raised inside the dialogue when the campaign was cancelled or the lease was lost.

    A BaseException so the runner's catch-all for harness crashes (infra errors) lets it through.
    """


class KeyVariableRefused(ValueError):
    """A stored endpoint names a key variable the worker may not send (older rows, admin edits)."""


def check_key_variables(campaign: Campaign) -> None:
    """Refuse to run with an endpoint whose api_key_env the allow-list refuses: its value would leave the worker."""
    named = {"agent": campaign.agent.api_key_env}
    for role, config in (("user simulator", campaign.user_simulator), ("judge", campaign.judge)):
        if isinstance(config, dict):
            nested = config.get("endpoint")
            endpoint = nested if isinstance(nested, dict) else config
            named[role] = str(endpoint.get("api_key_env") or "")
    for role, name in named.items():
        refusal = api_key_env_refusal(name)
        if refusal:
            raise KeyVariableRefused(f"{role} api_key_env: {refusal}")


class HeartbeatAgent:
    """Wraps an agent: before each step, asks whether the attempt is still ours (its lease, its
    campaign still running) and stops on cancellation. ``heartbeat`` is cheap when no beat is due
    (apps.worker.leases.Lease.still_ours)."""

    def __init__(self, agent, heartbeat: Callable[[], bool]):
        self._agent = agent
        self.name = getattr(agent, "name", "agent")
        self._heartbeat = heartbeat

    def provider_report(self) -> list[dict[str, Any]]:
        """What the wrapped agent's endpoint said about the model that answered (empty for local agents)."""
        report = getattr(self._agent, "provider_report", None)
        return report() if callable(report) else []

    def step(self, view: AgentView) -> AgentStep:
        if not self._heartbeat():
            raise AttemptCancelled()
        return self._agent.step(view)


def attempt_seed(campaign: Campaign, task_id: str, index: int) -> int:
    """Per-attempt seed: stable for (campaign seed, task, index), so a re-run replays the same noise."""
    digest = hashlib.sha256(f"{campaign.seed}:{task_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def warm_builtin_suites() -> int:
    """Load every built-in suite the database uses, and prepare its domains' sandbox templates,
    so a worker's first attempts start at once."""
    count = 0
    for name, content_hash in builtin_suite_sources():
        try:
            suite = builtin_suite(name, content_hash)
            _warm_sandboxes(suite)
            count += 1
        except Exception:  # a suite that no longer loads fails its attempts with a clear error later
            continue
    return count


def _warm_sandboxes(suite) -> None:
    """Each domain's template database, and each task's template and golden end state (SG).

    About 3 ms per task once per process, instead of in the first attempt of each task (where a
    fresh threads-pool worker pays them for dozens of tasks at once, under one GIL).
    """
    tasks = suite.tasks.values() if isinstance(suite.tasks, dict) else suite.tasks
    for domain in suite.domains.values():
        if domain.backend != "mcp":
            domain_runtime(domain)
    for task in tasks:
        domain = suite.domains.get(task.domain)
        if domain is None or domain.backend == "mcp":
            continue
        try:
            golden_snapshot(domain, task)  # builds the task template on the way
        except Exception:  # an invalid task fails (or is never selected) with its own error later
            continue


def warm_mcp_servers() -> int:
    """Start the warm pool (and fork server) of the MCP domains running campaigns' tasks use, in this process.

    So the first attempts of a fresh worker process find server processes ready instead of
    waiting for a server module's import (about a second and a half). Only domains a running
    campaign uses: every fork server holds its imported module (tens of MB) for as long as the
    worker lives; other domains start theirs at their first attempt, and pools left idle close
    (tb_engine.thinkingbox.mcp_pool.IDLE_CLOSE_S). Domains whose launch config cannot be used are
    skipped: their attempts fail with the reason later.
    """
    started = set()
    # The domains of the running campaigns' tasks, not of their suites: a one-domain campaign
    # over a full ThinkingBox import must not start the other domains' servers.
    rows = (
        Domain.objects.filter(backend="mcp", tasks__campaigns__status=Campaign.Status.RUNNING)
        .exclude(suite__source=Suite.Source.BUILTIN)
        .order_by()
        .distinct()
    )
    for suite_id, spec in rows.values_list("suite_id", "spec"):
        try:
            domain = runnable_mcp_domain(suite_id=suite_id, spec=spec)
            config = launch_config(domain)
            key = (config.command, config.args, config.url, tuple(sorted((config.env or {}).items())))
            if key in started:
                continue
            pool_for(config, size=((domain.mcp or {}).get("launch") or {}).get("pool_size"))
            started.add(key)
        except Exception:  # warming is best effort
            continue
    return len(started)


def task_spec(attempt: Attempt) -> TaskSpec:
    """The attempt's task spec, parsed once per worker process and task version."""
    return task_spec_of(attempt.task)


def runnable_domain(attempt: Attempt) -> DomainSpec:
    """The domain with tool implementations (built-in) or its MCP launch config (imported)."""
    return task_domain(attempt.task)


def agent_config(config: AgentConfig) -> dict[str, Any]:
    """The stored agent as the engine's agent configuration (tb_engine.attempt_setup)."""
    return {
        "spec": config.engine_spec,
        "name": config.name,
        "model": config.model,
        "base_url": config.base_url,
        "api_key_env": config.api_key_env,
        "parameters": config.parameters,
        "max_concurrency": config.max_concurrency,
        "provider_headers": list(settings.PROVIDER_HEADERS),
    }


def price_list(campaign: Campaign) -> PriceList | None:
    """The campaign's stored price sheet, validated by the engine; None when it has none."""
    sheet = campaign.price_sheet
    return None if sheet is None else sheet.as_price_list()


def fault_plan(campaign: Campaign) -> FaultPlan | None:
    """The campaign's stored fault plan for the engine; None when it has none."""
    return FaultPlan.from_dict(campaign.fault_plan) if campaign.fault_plan else None


def run_engine_attempt(attempt: Attempt, *, heartbeat: Callable[[], bool]) -> AttemptOutcome:
    """Run one stored attempt through the engine and price it (raises AttemptCancelled)."""
    campaign = attempt.campaign
    check_key_variables(campaign)
    task = task_spec(attempt)
    setup = AttemptSetup.from_config(
        runnable_domain(attempt),
        task,
        agent=agent_config(campaign.agent),
        seed=attempt_seed(campaign, task.id, attempt.index),
        user=campaign.user_simulator,
        judge=campaign.judge,
        prices=price_list(campaign),
        faults=fault_plan(campaign),
        attempt_index=attempt.index,
    )
    # While it waits on its model it holds no database connection (many attempts may wait at once).
    connection_release_while_waiting()
    result = setup.with_agent(HeartbeatAgent(setup.agent, heartbeat)).run()
    cost = setup.cost(result)
    return AttemptOutcome.from_result(result, agent_cost=cost.agent, eval_cost=cost.overhead)
