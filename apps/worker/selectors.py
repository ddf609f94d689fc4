"""Stored tasks as the engine runs them: the runnable domain and the parsed task spec.

The worker's front door for other apps: the attempts it runs and triage's suite validation build
a task's engine objects the same way, from the same per-process caches. Engine objects that are
immutable (built-in suite specs, task specs keyed by content hash) are parsed once per process.
"""

from __future__ import annotations

import json
import threading
import time
from functools import lru_cache
from typing import Any

from apps.suites.models import Suite, Task
from apps.suites.selectors import task_spec_data
from apps.thinkingbox.selectors import runnable_mcp_domain
from tb_engine.loader import load_builtin_suite
from tb_engine.spec import DomainSpec, SuiteSpec, TaskSpec
from tb_engine.spec_json import task_from_dict
from thinkingbox_web.embedded import tasks_run_inline

_SUITE_LOAD_LOCK = threading.Lock()


@lru_cache(maxsize=16)
def _load_builtin_suite(name: str, content_hash: str) -> SuiteSpec:
    return load_builtin_suite(name)


def builtin_suite(name: str, content_hash: str) -> SuiteSpec:
    """A built-in suite's spec, loaded once per process and content hash."""
    # One loader at a time: without the lock, every thread of a fresh worker parses the suite at
    # once (seconds of duplicated work under the GIL before the first attempts can start).
    with _SUITE_LOAD_LOCK:
        return _load_builtin_suite(name, content_hash)


@lru_cache(maxsize=4096)
def _task_spec(task_pk: int, content_hash: str) -> TaskSpec:
    # Keyed by content hash: a re-imported task gets a new entry, never a stale spec.
    return task_from_dict(task_spec_data(task_pk=task_pk))


def task_spec_of(task: Task) -> TaskSpec:
    """A stored task's spec, parsed once per worker process and task version."""
    return _task_spec(task.pk, task.content_hash)


def task_domain(task: Task) -> DomainSpec:
    """The runnable domain of a stored task (built-in tools, or the imported suite's MCP launch config)."""
    suite = task.suite
    domain_row = task.domain
    spec = domain_row.spec  # small, and may change without the suite hash changing (MCP launch config)
    if suite.source == Suite.Source.BUILTIN:
        # A suite assembled from built-in domains (e.g. the throughput benchmark's) names its source.
        builtin = spec.get("builtin_suite", suite.name)
        return builtin_suite(builtin, suite.content_hash).domains[domain_row.name]
    return _runnable_mcp_domain(suite.pk, spec)


# An imported domain is read per attempt (its launch config and search service may change without
# the suite's hash changing), but not more often than this: a query and a parse per attempt were a
# sixth of a ThinkingBox attempt's CPU in a worker running a hundred at once.
MCP_DOMAIN_FRESH_S = 5.0
_MCP_DOMAINS_KEPT = 256
_mcp_domains: dict[tuple[int, str], tuple[float, DomainSpec]] = {}
_mcp_domains_lock = threading.Lock()


def _runnable_mcp_domain(suite_id: int, spec: dict[str, Any]) -> DomainSpec:
    if tasks_run_inline():  # in the caller's process (tests, eager runs): always the stored rows
        return runnable_mcp_domain(suite_id=suite_id, spec=spec)
    key = (suite_id, json.dumps(spec, sort_keys=True, default=str))
    now = time.monotonic()
    with _mcp_domains_lock:
        found = _mcp_domains.get(key)
    if found is not None and now - found[0] < MCP_DOMAIN_FRESH_S:
        return found[1]
    domain = runnable_mcp_domain(suite_id=suite_id, spec=spec)
    with _mcp_domains_lock:
        if len(_mcp_domains) >= _MCP_DOMAINS_KEPT:
            _mcp_domains.clear()
        _mcp_domains[key] = (now, domain)
    return domain
