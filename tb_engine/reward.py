"""The reward API for RL trainers: the executable verdict as 1/0 plus diagnostics (SPEC §6).

Nothing here grades on its own. ``grade_finished`` chains the runner's own phases
(take_result_snapshot -> take_golden_snapshot -> compute_diff -> grade_attempt -> record), so a
reward is the grader's verdict by construction, never a re-implementation of it. Diagnostics
name what went wrong (diff classes and counts, where, checks, rubrics) but carry no golden
values, so a trainer that logs them next to rollouts cannot leak the golden state (SPEC §7).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tb_engine.backend import Backend
from tb_engine.golden import GoldenReplayError
from tb_engine.interfaces import Judge
from tb_engine.results import DIFF_KINDS, TERMINATIONS, AttemptResult, is_termination
from tb_engine.runner import (
    Dialogue,
    compute_diff,
    grade_attempt,
    record,
    take_golden_snapshot,
    take_result_snapshot,
)
from tb_engine.sandbox import task_hash_of
from tb_engine.spec import TaskSpec
from tb_engine.transcript import Transcript


class RewardUnavailable(Exception):
    """The attempt has no verdict (infrastructure error or invalid task): it must not become a 0 reward."""


@dataclass(frozen=True)
class Reward:
    """A verdict as a scalar reward (1.0 pass, 0.0 fail) with diagnostics that never change it."""

    task_id: str
    reward: float
    verdict: str
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "reward": self.reward,
            "verdict": self.verdict,
            "diagnostics": self.diagnostics,
        }


def diagnostics_of(result: AttemptResult) -> dict[str, Any]:
    """Diff classes and counts, diff locations, checks and rubrics of a graded attempt (no golden values)."""
    counts = Counter(item.kind for item in result.diff)
    return {
        "termination": result.termination,
        "categories": list(result.categories),
        "diff_counts": {kind: counts.get(kind, 0) for kind in DIFF_KINDS},
        "diff": [
            {
                "kind": item.kind,
                "table": item.table,
                "key": item.key,
                "field": item.field,
                "written_by": list(item.written_by),
            }
            for item in result.diff
        ],
        "checks": [{"kind": c.kind, "description": c.description, "passed": c.passed} for c in result.checks],
        "rubrics": [{"question": r.question, "answer": r.answer} for r in result.rubrics],
        "clean_looking": result.clean_looking,
        "tool_calls": len(result.transcript.tool_calls),
    }


def reward_of(result: AttemptResult) -> Reward:
    """The reward of an already graded attempt; raises RewardUnavailable when it has no verdict."""
    if result.status != "done" or result.verdict not in ("pass", "fail"):
        detail = result.error or f"status {result.status!r}"
        raise RewardUnavailable(f"task {result.task_id}: attempt has no verdict ({detail})")
    return Reward(
        result.task_id, 1.0 if result.verdict == "pass" else 0.0, result.verdict, diagnostics_of(result)
    )


def grade_finished(
    task: TaskSpec,
    backend: Backend,
    transcript: Transcript,
    *,
    termination: str,
    judge: Judge | None = None,
    error: str = "",
) -> AttemptResult:
    """Grade a finished dialogue on its backend through the runner's phases 3-7 (same path as run_attempt)."""
    if not is_termination(termination):
        raise ValueError(
            f"task {task.id}: termination: {termination!r} is not one of {', '.join(TERMINATIONS)}"
        )
    started = time.perf_counter()
    phase_ms: dict[str, float] = {}

    class _Clock:
        def ms(self) -> float:
            return (time.perf_counter() - started) * 1000.0

    clock = _Clock()
    initial = backend.initial_snapshot()
    result, writes = take_result_snapshot(backend)
    try:
        golden = take_golden_snapshot(backend)
    except GoldenReplayError as exc:
        raise RewardUnavailable(f"task {task.id}: invalid task, its golden replay fails: {exc}") from exc
    diff, effect_list = compute_diff(initial, result, golden, writes)
    dialogue = Dialogue(transcript, termination, error)
    graded = grade_attempt(
        task, dialogue, initial=initial, result=result, diff=diff, effect_list=effect_list, judge=judge
    )
    phase_ms["grade"] = clock.ms()
    return record(task, task_hash_of(task), dialogue, graded, phase_ms, clock)


def reward(
    task: TaskSpec,
    backend: Backend,
    transcript: Transcript,
    *,
    termination: str,
    judge: Judge | None = None,
) -> Reward:
    """Reward 1/0 and diagnostics for a finished attempt (transcript + the backend it ran on)."""
    return reward_of(grade_finished(task, backend, transcript, termination=termination, judge=judge))
