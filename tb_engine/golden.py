"""Golden replay: run a task's golden trajectory on a fresh copy of S0 to get SG (cached per task hash)."""

from __future__ import annotations

from dataclasses import dataclass

from tb_engine.sandbox import domain_runtime, task_hash_of
from tb_engine.snapshot import Snapshot
from tb_engine.spec import DomainSpec, TaskSpec


class GoldenReplayError(Exception):
    """The golden trajectory raised a tool error: the task is invalid and must not be graded."""


@dataclass(frozen=True)
class GoldenReplay:
    snapshot: Snapshot
    errors: tuple[str, ...]  # "call #i (tool): message" for every failing golden call
    results: tuple[object, ...]  # each golden call's result (None where it failed)


def replay_golden(domain: DomainSpec, task: TaskSpec) -> GoldenReplay:
    """Replay the golden trajectory on a fresh sandbox (never cached)."""
    sandbox = domain_runtime(domain).task_template(task).new_sandbox()
    try:
        errors, results = [], []
        for index, call in enumerate(task.golden):
            outcome = sandbox.call_tool(call.tool, call.arguments, index=index)
            results.append(outcome.result)
            if outcome.error is not None:
                errors.append(f"call #{index} ({call.tool}): {outcome.error}")
        return GoldenReplay(sandbox.snapshot(), tuple(errors), tuple(results))
    finally:
        sandbox.close()


def golden_snapshot(domain: DomainSpec, task: TaskSpec) -> Snapshot:
    """SG for the task, replayed once per task content hash; raises GoldenReplayError if the replay errs."""
    runtime = domain_runtime(domain)
    task_hash = task_hash_of(task)
    cached = runtime.golden_cache.get(task_hash)
    if cached is None:
        replay = replay_golden(domain, task)
        if replay.errors:
            raise GoldenReplayError(f"task {task.id}: golden replay failed: " + "; ".join(replay.errors))
        cached = runtime.golden_cache[task_hash] = replay.snapshot
    return cached
