"""Task validation on the task's own backend (a SQLite sandbox or a real MCP tool server).

A task is checked by three kinds of run (SPEC §3):

1. the golden trajectory, replayed on a fresh backend: its calls must raise no tool error and
   its end state must pass — for a ThinkingBox suite, by the server's own hash (the verdict of
   record); otherwise the task is *invalid*;
2. the golden trajectory again: both runs must end in the same state (determinism), else *invalid*;
3. a do-nothing run: if it passes, the task cannot tell acting from not acting — *non-discriminating*.

Rubrics are judged by ``judge`` (default the offline keyword judge). A rubric it cannot answer is
unjudged, so such a task is validated on its state part only, and the result says so
(``rubrics_note``). A backend that cannot run at all (server will not start) leaves the task
``unknown``: an infrastructure problem is never the task's fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tb_engine.agents.harness_checks import DoNothingAgent
from tb_engine.attempt_setup import KEYWORD_JUDGE, AttemptSetup, JudgeConfig
from tb_engine.diff import describe_item, diff_states
from tb_engine.golden import replay_golden
from tb_engine.results import AttemptResult
from tb_engine.sandbox import domain_runtime
from tb_engine.spec import DomainSpec, SuiteSpec, TaskSpec

ValidationStatus = Literal["valid", "invalid", "non_discriminating", "unknown"]
STATE_ONLY_NOTE = "rubrics unjudged by the validation judge: state part only"


@dataclass(frozen=True)
class RunRecord:
    """One validation run: its outcome, our state verdict beside the server's hash, both diffs."""

    kind: str  # golden | golden (again) | do-nothing
    status: str
    verdict: str | None
    state_pass: bool | None  # the state part of record (the server's hash where there is one)
    our_state_pass: bool | None
    their_hash_pass: bool | None
    tool_errors: tuple[str, ...] = ()
    error: str = ""
    diff: tuple[dict[str, Any], ...] = ()  # our classified diff items
    positional_diff: tuple[Any, ...] = ()  # the server's own diff, where it has one
    result_hash: str = ""  # the server's result-state hash, where it has one
    effects: tuple[dict[str, Any], ...] = ()  # S0 -> SR changes, for the determinism check

    @property
    def disagree(self) -> bool:
        return (
            None not in (self.our_state_pass, self.their_hash_pass)
            and self.our_state_pass != self.their_hash_pass
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "status": self.status,
            "verdict": self.verdict,
            "state_pass": self.state_pass,
            "our_state_pass": self.our_state_pass,
            "their_hash_pass": self.their_hash_pass,
            "disagree": self.disagree,
            "tool_errors": list(self.tool_errors),
            "error": self.error,
            "diff": list(self.diff),
            "positional_diff": list(self.positional_diff),
            "result_hash": self.result_hash,
        }


@dataclass(frozen=True)
class TaskValidation:
    task_id: str
    status: ValidationStatus
    problems: tuple[str, ...] = ()
    runs: tuple[RunRecord, ...] = field(default=(), compare=False)
    rubrics_note: str = ""

    @property
    def disagreements(self) -> int:
        return sum(run.disagree for run in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "status": self.status,
            "problems": list(self.problems),
            "rubrics_note": self.rubrics_note,
            "runs": [run.to_dict() for run in self.runs],
        }


def _server_evidence(result: AttemptResult) -> Mapping[str, Any]:
    effects = (result.extra.get("thinkingbox") or {}).get("effects") or {}
    return next(iter(effects.values()), {}) if len(effects) == 1 else {}


def run_record(kind: str, result: AttemptResult) -> RunRecord:
    """What validation keeps of one run (see RunRecord)."""
    evidence = _server_evidence(result)
    done = result.status == "done"
    failed_checks = any(not c.passed for c in result.checks)
    return RunRecord(
        kind=kind,
        status=result.status,
        verdict=result.verdict,
        state_pass=(result.verdict in ("pass", "unjudged")) if done else None,
        our_state_pass=(not result.diff and not failed_checks) if done else None,
        their_hash_pass=evidence.get("their_hash_pass") if done else None,
        tool_errors=tuple(
            f"call {c.index} ({c.name}): {c.error}"
            for c in result.transcript.tool_calls
            if c.error is not None
        ),
        error=result.error,
        diff=tuple(item.to_dict() for item in result.diff),
        positional_diff=tuple(evidence.get("positional_diff") or ()),
        result_hash=str(evidence.get("result_db_hash") or ""),
        effects=tuple(
            {k: v for k, v in effect.to_dict().items() if k != "written_by"} for effect in result.effects
        ),
    )


def golden_problems(result: AttemptResult) -> list[str]:
    """Why a golden run does not pass: diff items, the server's hash, failed checks and rubrics, tool errors."""
    problems = [describe_item(item) for item in result.diff]
    evidence = _server_evidence(result)
    if evidence.get("their_hash_pass") is False:
        problems.append("the server's result-state hash differs from its golden-state hash")
    problems += [f"check failed: {c.description}: {c.detail}" for c in result.checks if not c.passed]
    problems += [
        f"rubric not met: {r.question} ({r.explanation})" for r in result.rubrics if r.answer is False
    ]
    problems += [
        f"tool error: call {c.index} ({c.name}): {c.error}" for c in result.transcript.tool_calls if c.error
    ]
    return problems or [f"verdict {result.verdict}"]


def _sqlite_golden_problems(domain: DomainSpec, task: TaskSpec) -> list[str]:
    """The SQLite golden replay: no tool error, and a second replay ends in the same state."""
    first = replay_golden(domain, task)
    if first.errors:
        return [f"golden replay error: {e}" for e in first.errors]
    second = replay_golden(domain, task)
    initial = domain_runtime(domain).task_template(task).initial
    drift = diff_states(initial, second.snapshot, first.snapshot)
    return [f"golden replay not deterministic: {describe_item(i)}" for i in drift]


def validate_task(
    domain: DomainSpec, task: TaskSpec, *, judge: JudgeConfig = KEYWORD_JUDGE
) -> TaskValidation:
    """Classify one task as valid, invalid, non-discriminating or unknown (see the module docstring)."""
    if domain.backend != "mcp":
        problems = _sqlite_golden_problems(domain, task)
        if problems:
            return TaskValidation(task.id, "invalid", tuple(problems))
    runs: list[RunRecord] = []
    golden_results = []
    for kind in ("golden", "golden (again)"):
        result = AttemptSetup.from_config(domain, task, agent="golden", judge=judge).run()
        golden_results.append(result)
        runs.append(run_record(kind, result))
    note = STATE_ONLY_NOTE if any(r.answer is None for r in golden_results[0].rubrics) else ""
    first, second = runs
    for record, result in zip(runs, golden_results, strict=True):
        if record.status != "done":
            status: ValidationStatus = "invalid" if result.extra.get("invalid_task") else "unknown"
            return TaskValidation(task.id, status, (f"{record.kind}: {record.error}",), tuple(runs), note)
    if first.tool_errors or not first.state_pass:
        failures = tuple(f"golden agent fails: {p}" for p in golden_problems(golden_results[0]))
        return TaskValidation(task.id, "invalid", failures, tuple(runs), note)
    if (first.effects, first.result_hash, first.state_pass) != (
        second.effects,
        second.result_hash,
        second.state_pass,
    ):
        return TaskValidation(
            task.id,
            "invalid",
            ("golden replay not deterministic: two golden runs ended in different states",),
            tuple(runs),
            note,
        )
    idle = AttemptSetup.from_config(domain, task, agent=DoNothingAgent(), judge=judge).run()
    idle_record = run_record("do-nothing", idle)
    runs.append(idle_record)
    if idle_record.status != "done":
        return TaskValidation(task.id, "unknown", (f"do-nothing: {idle_record.error}",), tuple(runs), note)
    if idle_record.state_pass:
        return TaskValidation(
            task.id, "non_discriminating", ("a do-nothing attempt passes",), tuple(runs), note
        )
    return TaskValidation(task.id, "valid", (), tuple(runs), note)


def validate_suite(suite: SuiteSpec, *, judge: JudgeConfig = KEYWORD_JUDGE) -> list[TaskValidation]:
    """Validate every task of a suite, in task-id order."""
    return [
        validate_task(suite.domains[task.domain], task, judge=judge)
        for _, task in sorted(suite.tasks.items())
    ]
