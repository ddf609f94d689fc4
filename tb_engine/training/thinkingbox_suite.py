"""A training suite from ThinkingBox-format tasks on the real ThinkingBox MCP servers.

``read_dataset`` imports a dataset as ThinkingBox-Bench (evaluation-only: its licence forbids
training). Training wants the opposite: every task that is *not* a benchmark task. This module
reads scenarios from a dataset folder and test files from one or more test-case folders, drops
every task the benchmark's test list names (``releases/thinkingbox_bench_v1/testlist_*.yaml``),
and gives each domain its server's launch config from ThinkingBox's ``servers.yaml`` with
``{python}`` filled in. Each episode then runs in a fresh server process forked from the
pre-imported fork server (``mcp_launch``), exactly as a campaign attempt does.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tb_engine.spec import DomainSpec, SuiteSpec, TaskSpec
from tb_engine.thinkingbox.dataset import UnsupportedScenario, parse_scenario, parse_test_file, read_test_list
from tb_engine.thinkingbox.errors import ThinkingBoxFormatError
from tb_engine.thinkingbox.servers_config import read_servers_config, server_launch

SUITE_NAME = "thinkingbox-training"


@dataclasses.dataclass(frozen=True)
class TrainingSuiteRead:
    suite: SuiteSpec
    benchmark_tasks_left_out: int
    ungraded: tuple[str, ...]  # tasks the grader cannot reward (no golden calls, custom test bodies)
    unsupported: tuple[str, ...]  # test files left out, with why


def read_training_suite(
    dataset: str | Path,
    *,
    servers: str | Path,
    python: str,
    test_cases: list[str | Path] | None = None,
    benchmark_list: str | Path | None = None,
    version: str = "v1",
) -> TrainingSuiteRead:
    """Scenarios of ``dataset``/scenario, tasks of ``test_cases`` (default ``dataset``/test_case),
    minus the benchmark's tasks, each domain launched as ``servers`` says with ``python``.

    Errors (ThinkingBoxFormatError) name the file: a test file whose scenario is missing, a
    scenario whose server has no servers.yaml entry, an empty result.
    """
    dataset = Path(dataset)
    scenario_files = {p.stem: p for p in sorted((dataset / "scenario").glob("*.yaml"))}
    entries = read_servers_config(servers)
    left_out = set(read_test_list(benchmark_list)) if benchmark_list is not None else set()
    folders = [Path(f) for f in (test_cases or [dataset / "test_case"])]
    scenarios = _Scenarios(scenario_files)
    domains: dict[str, DomainSpec] = {}
    tasks: dict[str, TaskSpec] = {}
    dropped = 0
    unsupported: list[str] = []
    for test_file in sorted(path for folder in folders for path in sorted(folder.rglob("*.py"))):
        try:
            read = parse_test_file(test_file, scenarios)
        except UnsupportedScenario as exc:  # e.g. a scenario on two servers: an episode talks to one
            unsupported.append(f"{test_file.name}: {exc.message}")
            continue
        for task in read:
            if task.id in left_out:
                dropped += 1
                continue
            if task.id in tasks:
                raise ThinkingBoxFormatError(f"duplicate task id {task.id!r}", file=test_file)
            if task.domain not in domains:
                domains[task.domain] = _launched(scenarios[task.domain], entries, servers, python)
            tasks[task.id] = task
    if not tasks:
        raise ThinkingBoxFormatError(
            "no training task left (every task is a benchmark task, or there are no test files)", file=dataset
        )
    suite = SuiteSpec(
        name=SUITE_NAME,
        version=version,
        domains=domains,
        tasks=tasks,
        evaluation_only=False,
        description=f"ThinkingBox-format tasks outside the benchmark, from {', '.join(map(str, folders))}",
    )
    ungraded = tuple(
        sorted(
            t.id
            for t in tasks.values()
            if not t.golden or any(c.kind == "custom_unsupported" for c in t.checks)
        )
    )
    return TrainingSuiteRead(suite, dropped, ungraded, tuple(unsupported))


class _Scenarios(dict[str, DomainSpec]):
    """Scenario name -> DomainSpec, each scenario file parsed when a test file first names it."""

    def __init__(self, files: dict[str, Path]):
        super().__init__()
        self.files = files

    def __bool__(self) -> bool:  # parse_test_file asks "if scenarios" before looking one up
        return True

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.files

    def __missing__(self, name: str) -> DomainSpec:
        domain = parse_scenario(self.files[name])
        self[name] = domain
        return domain


def _launched(domain: DomainSpec, entries: dict[str, Any], servers: str | Path, python: str) -> DomainSpec:
    """The domain with its server's launch config from servers.yaml."""
    mcp = dict(domain.mcp or {})
    server = mcp.get("server", domain.name)
    if server not in entries:
        raise ThinkingBoxFormatError(f"server {server!r} (scenario {domain.name}) has no entry", file=servers)
    mcp["launch"] = server_launch(entries[server], server=server, python=python, file=servers)
    return dataclasses.replace(domain, mcp=mcp)
