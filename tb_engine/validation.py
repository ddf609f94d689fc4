"""Task validation: the golden replay must succeed and be deterministic, the golden agent must pass,
and a do-nothing attempt must fail (otherwise the task is *non-discriminating*)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tb_engine.attempt_setup import AttemptSetup
from tb_engine.diff import describe_item, diff_states
from tb_engine.golden import replay_golden
from tb_engine.interfaces import AgentStep, AgentView
from tb_engine.sandbox import domain_runtime
from tb_engine.spec import DomainSpec, SuiteSpec, TaskSpec

ValidationStatus = Literal["valid", "invalid", "non_discriminating"]


@dataclass(frozen=True)
class TaskValidation:
    task_id: str
    status: ValidationStatus
    problems: tuple[str, ...] = ()


class DoNothingAgent:
    """Says nothing and calls nothing: the baseline every discriminating task must fail."""

    name = "do-nothing"

    def step(self, view: AgentView) -> AgentStep:
        return AgentStep(text="", done=True)


def _attempt_problems(result) -> list[str]:
    problems = [describe_item(item) for item in result.diff]
    problems += [f"check failed: {c.description}: {c.detail}" for c in result.checks if not c.passed]
    problems += [
        f"rubric not met: {r.question} ({r.explanation})" for r in result.rubrics if r.answer is not True
    ]
    if result.status != "done":
        problems.append(result.error)
    return problems


def validate_task(domain: DomainSpec, task: TaskSpec) -> TaskValidation:
    """Classify one task as valid, invalid (with reasons) or non-discriminating."""
    first = replay_golden(domain, task)
    if first.errors:
        return TaskValidation(task.id, "invalid", tuple(f"golden replay error: {e}" for e in first.errors))
    second = replay_golden(domain, task)
    initial = domain_runtime(domain).task_template(task).initial
    drift = diff_states(initial, second.snapshot, first.snapshot)
    if drift:
        return TaskValidation(
            task.id, "invalid", tuple(f"golden replay not deterministic: {describe_item(i)}" for i in drift)
        )
    # Rubrics by the offline keyword judge (the default configuration).
    golden_run = AttemptSetup.from_config(domain, task, agent="golden").run()
    if golden_run.verdict != "pass":
        return TaskValidation(
            task.id, "invalid", tuple(f"golden agent fails: {p}" for p in _attempt_problems(golden_run))
        )
    idle_run = AttemptSetup.from_config(domain, task, agent=DoNothingAgent()).run()
    if idle_run.verdict == "pass":
        return TaskValidation(task.id, "non_discriminating", ("a do-nothing attempt passes",))
    return TaskValidation(task.id, "valid")


def validate_suite(suite: SuiteSpec) -> list[TaskValidation]:
    """Validate every task of a suite, in task-id order."""
    return [validate_task(suite.domains[task.domain], task) for _, task in sorted(suite.tasks.items())]
