"""Bridge from stored rows to the engine: rows -> engine configurations -> ``AttemptSetup``; run; price.

Everything the worker needs is rebuilt from ids, so any worker on any machine can run any
attempt. Engine objects that are immutable (built-in suite specs) are cached per process.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

from django.conf import settings

from apps.campaigns.models import AgentConfig, Attempt, Campaign
from apps.suites.models import Suite
from tb_engine.attempt_setup import AttemptSetup
from tb_engine.interfaces import AgentStep, AgentView
from tb_engine.pricing import PriceList
from tb_engine.results import AttemptResult
from tb_engine.spec import DomainSpec, TaskSpec
from tb_engine.spec_json import domain_from_dict, task_from_dict
from tb_engine.transcript import Usage


class AttemptCancelled(BaseException):
    """Raised inside the dialogue when the campaign was cancelled or the lease was lost.

    A BaseException so the runner's catch-all for harness crashes (infra errors) lets it through.
    """


@dataclass
class AttemptOutcome:
    """What gets written to the Attempt row."""

    status: str
    termination: str = ""
    verdict: str = ""
    categories: list[str] = field(default_factory=list)
    clean_looking: bool = False
    task_hash: str = ""
    agent_usage: Usage = field(default_factory=Usage)
    eval_usage: Usage = field(default_factory=Usage)
    agent_cost: Decimal | None = None
    eval_cost: Decimal | None = None
    tool_calls: int = 0
    diff_items: int = 0
    duration_ms: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)
    error_detail: str = ""

    @classmethod
    def infra_error(cls, message: str) -> AttemptOutcome:
        return cls(status=Attempt.Status.INFRA_ERROR, error_detail=message)

    @classmethod
    def from_result(cls, result: AttemptResult, *, agent_cost, eval_cost) -> AttemptOutcome:
        transcript = result.transcript
        eval_usage = transcript.user_usage + transcript.judge_usage
        return cls(
            status=result.status,
            termination=result.termination or "",
            verdict=result.verdict or "",
            categories=list(result.categories),
            clean_looking=result.clean_looking,
            task_hash=result.task_hash,
            agent_usage=transcript.agent_usage,
            eval_usage=eval_usage,
            agent_cost=agent_cost,
            eval_cost=eval_cost,
            tool_calls=len(transcript.tool_calls),
            diff_items=len(result.diff),
            duration_ms=result.duration_ms,
            result=result.to_dict(),
            error_detail=result.error,
        )

    def as_fields(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "termination": self.termination,
            "verdict": self.verdict,
            "categories": self.categories,
            "clean_looking": self.clean_looking,
            "task_hash": self.task_hash,
            "input_tokens": self.agent_usage.input_tokens,
            "cached_input_tokens": self.agent_usage.cached_input_tokens,
            "output_tokens": self.agent_usage.output_tokens,
            "reasoning_tokens": self.agent_usage.reasoning_tokens,
            "eval_tokens": self.eval_usage.total_tokens,
            "agent_cost": self.agent_cost,
            "eval_cost": self.eval_cost,
            "tool_calls": self.tool_calls,
            "diff_items": self.diff_items,
            "duration_ms": self.duration_ms,
            "result": self.result,
            "error_detail": self.error_detail,
        }


class HeartbeatAgent:
    """Wraps an agent: extends the attempt's lease between steps and stops on cancellation."""

    def __init__(self, agent, heartbeat: Callable[[], bool], every_s: float | None = None):
        self._agent = agent
        self.name = getattr(agent, "name", "agent")
        self._heartbeat = heartbeat
        self._every_s = every_s if every_s is not None else getattr(settings, "ATTEMPT_HEARTBEAT_SECONDS", 2)
        self._last = time.monotonic()

    def step(self, view: AgentView) -> AgentStep:
        now = time.monotonic()
        if now - self._last >= self._every_s:
            self._last = now
            if not self._heartbeat():
                raise AttemptCancelled()
        return self._agent.step(view)


def attempt_seed(campaign: Campaign, task_id: str, index: int) -> int:
    """Per-attempt seed: stable for (campaign seed, task, index), so a re-run replays the same noise."""
    digest = hashlib.sha256(f"{campaign.seed}:{task_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


_SUITE_LOAD_LOCK = threading.Lock()


@lru_cache(maxsize=16)
def _load_builtin_suite(name: str, content_hash: str):
    from tb_engine.loader import load_builtin_suite

    return load_builtin_suite(name)


def _builtin_suite(name: str, content_hash: str):
    # One loader at a time: without the lock, every thread of a fresh worker parses the suite at
    # once (seconds of duplicated work under the GIL before the first attempts can start).
    with _SUITE_LOAD_LOCK:
        return _load_builtin_suite(name, content_hash)


def warm_builtin_suites() -> int:
    """Load every built-in suite the database uses, and prepare its domains' sandbox templates,
    so a worker's first attempts start at once."""
    from apps.suites.models import Domain

    count = 0
    pairs = Domain.objects.filter(suite__source=Suite.Source.BUILTIN).values_list(
        "suite__name", "suite__content_hash", "spec"
    )
    for suite_name, content_hash, spec in pairs.distinct():
        name = (spec or {}).get("builtin_suite", suite_name)
        try:
            suite = _builtin_suite(name, content_hash)
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
    from tb_engine.golden import golden_snapshot
    from tb_engine.sandbox import domain_runtime

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


@lru_cache(maxsize=4096)
def _task_spec(task_pk: int, content_hash: str) -> TaskSpec:
    # Keyed by content hash: a re-imported task gets a new entry, never a stale spec.
    from apps.suites.models import Task

    return task_from_dict(Task.objects.values_list("spec", flat=True).get(pk=task_pk))


def task_spec(attempt: Attempt) -> TaskSpec:
    """The attempt's task spec, parsed once per worker process and task version."""
    return _task_spec(attempt.task_id, attempt.task.content_hash)


def runnable_domain(attempt: Attempt) -> DomainSpec:
    """The domain with tool implementations (built-in) or its MCP launch config (imported)."""
    suite = attempt.task.suite
    domain_row = attempt.task.domain
    spec = domain_row.spec  # small, and may change without the suite hash changing (MCP launch config)
    if suite.source == Suite.Source.BUILTIN:
        # A suite assembled from built-in domains (e.g. the throughput benchmark's) names its source.
        builtin = spec.get("builtin_suite", suite.name)
        return _builtin_suite(builtin, suite.content_hash).domains[domain_row.name]
    return domain_from_dict(spec)


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
    }


def price_list(campaign: Campaign) -> PriceList | None:
    """The campaign's stored price sheet, validated by the engine; None when it has none."""
    sheet = campaign.price_sheet
    if sheet is None:
        return None
    return PriceList.from_dict(
        {
            "name": sheet.name,
            "source": sheet.source,
            "effective_date": sheet.effective_date,
            "models": sheet.prices,
        },
        origin=f"price sheet {sheet.name}",
    )


def run_engine_attempt(attempt: Attempt, *, heartbeat: Callable[[], bool]) -> AttemptOutcome:
    """Run one stored attempt through the engine and price it (raises AttemptCancelled)."""
    campaign = attempt.campaign
    task = task_spec(attempt)
    setup = AttemptSetup.from_config(
        runnable_domain(attempt),
        task,
        agent=agent_config(campaign.agent),
        seed=attempt_seed(campaign, task.id, attempt.index),
        user=campaign.user_simulator,
        judge=campaign.judge,
        prices=price_list(campaign),
    )
    result = setup.with_agent(HeartbeatAgent(setup.agent, heartbeat)).run()
    cost = setup.cost(result)
    return AttemptOutcome.from_result(result, agent_cost=cost.agent, eval_cost=cost.overhead)
