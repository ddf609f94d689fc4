"""The reward API is the grader's verdict: same phases, every built-in task, golden / no-op / personas."""

from __future__ import annotations

import pytest

from tb_engine.attempt_setup import AttemptSetup, make_agent, run_task
from tb_engine.backend import SqliteBackend
from tb_engine.interfaces import AgentStep
from tb_engine.loader import load_builtin_suite
from tb_engine.results import AttemptResult
from tb_engine.reward import RewardUnavailable, grade_finished, reward, reward_of
from tb_engine.runner import prepare, run_dialogue

AGENTS = ("golden", "noop", "sim:steady", "sim:explorer", "sim:careless", "sim:cautious")
SUITE = load_builtin_suite()


class NoOpAgent:
    """Says it is done without doing anything."""

    name = "noop"

    def step(self, view):
        return AgentStep(text="Done.", done=True)


def _agent(spec: str, task, seed: int):
    if spec == "noop":
        return NoOpAgent()
    return make_agent(spec, task=task, domain=SUITE.domains[task.domain], seed=seed)


def _reward_by_hand(task, spec: str, seed: int):
    """Drive the dialogue ourselves (as the environment server does), then ask the reward API."""
    setup = AttemptSetup.from_config(SUITE.domains[task.domain], task, agent=_agent(spec, task, seed))
    backend = SqliteBackend(SUITE.domains[task.domain], task)
    try:
        prepared = prepare(task, backend)
        dialogue = run_dialogue(
            task, backend, prepared, agent=setup.agent, user=setup.user, limits=setup.limits
        )
        return reward(task, backend, dialogue.transcript, termination=dialogue.termination, judge=setup.judge)
    finally:
        backend.close()


@pytest.mark.parametrize("spec", AGENTS)
def test_reward_equals_grader_verdict_on_every_builtin_task(spec):
    mismatches, verdicts = [], set()
    for seed, task in enumerate(sorted(SUITE.tasks.values(), key=lambda t: t.id)):
        graded = run_task(
            SUITE.domains[task.domain],
            task,
            agent=_agent(spec, task, seed),
        )
        result = _reward_by_hand(task, spec, seed)
        expected = 1.0 if graded.verdict == "pass" else 0.0
        verdicts.add(graded.verdict)
        if (result.reward, result.verdict, result.diagnostics["categories"]) != (
            expected,
            graded.verdict,
            graded.categories,
        ):
            mismatches.append((task.id, result.reward, graded.verdict))
    assert mismatches == []
    if spec == "golden":
        assert verdicts == {"pass"}
    if spec == "noop":
        assert verdicts == {"fail"}


def test_reward_diagnostics_count_diff_classes_without_golden_values():
    task = SUITE.tasks["retail/ticket_hold_carrier_exception"]
    result = _reward_by_hand(task, "noop", 0)
    assert result.reward == 0.0
    assert result.verdict == "fail"
    counts = result.diagnostics["diff_counts"]
    assert sum(counts.values()) == len(result.diagnostics["diff"])
    assert counts["missing_effect"] >= 1
    assert all(
        set(item) == {"kind", "table", "key", "field", "written_by"} for item in result.diagnostics["diff"]
    )


def test_reward_is_deterministic_for_the_same_attempt():
    task = SUITE.tasks["retail/ticket_hold_carrier_exception"]
    assert _reward_by_hand(task, "sim:careless", 3) == _reward_by_hand(task, "sim:careless", 3)


def test_reward_of_infra_error_raises_instead_of_zero():
    broken = AttemptResult(task_id="retail/x", task_hash="h", status="infra_error", error="endpoint down")
    with pytest.raises(RewardUnavailable) as caught:
        reward_of(broken)
    assert str(caught.value) == "task retail/x: attempt has no verdict (endpoint down)"


def test_grade_finished_rejects_unknown_termination():
    task = SUITE.tasks["retail/ticket_hold_carrier_exception"]
    backend = SqliteBackend(SUITE.domains[task.domain], task)
    try:
        with pytest.raises(ValueError) as caught:
            grade_finished(
                task, backend, run_task(SUITE.domains[task.domain], task).transcript, termination="bored"
            )
    finally:
        backend.close()
    assert str(caught.value).startswith("task retail/ticket_hold_carrier_exception: termination: 'bored'")
