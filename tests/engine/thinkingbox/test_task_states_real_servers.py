"""Reusing a task's S0/SG snapshots (``task_states``) grades exactly as building them again (real servers).

For passing and failing run kinds on two held-back domains, the grade from a cold cache (every
snapshot built from this attempt's own effects answer, full evidence: the campaign's grader) is
compared with the grade of a second attempt that takes S0, SG, the specs and SR's unchanged tables
from the cache, as a training episode does (verdict-only evidence). The reward and everything
that decides it must be equal, and the second attempt must really have reused the entry.
"""

from __future__ import annotations

import dataclasses

import pytest

from tb_engine.attempt_setup import AttemptSetup
from tb_engine.results import AttemptResult
from tb_engine.reward import reward_of
from tb_engine.thinkingbox import mcp_backend, task_states
from tb_engine.thinkingbox.dataset import parse_test_file
from tb_engine.thinkingbox.mcp_pool import close_pools
from tests.support.real_servers import real_domain, servers_python, task_files

TASKS = {
    "sandbox_auto_insurance": "sandbox_auto_insurance_tbw.py:test_tbw_ai_add_vehicle_backdated_tx",
    "sandbox_consulting": "sandbox_consulting_tbw.py:test_tbw_cs_expense_override_request_pending",
}
KINDS = ("golden", "do-nothing", "skip-last-write", "changed-argument")


@pytest.fixture(autouse=True, scope="module")
def _close_pools():
    yield
    close_pools()
    task_states.clear()


def _grade(result: AttemptResult) -> dict:
    return {
        "status": result.status,
        "verdict": result.verdict,
        "reward": reward_of(result).reward,
        "categories": list(result.categories),
        "diff": [(d.kind, d.table, d.key, d.field, d.initial, d.result, d.golden) for d in result.diff],
        "effects": [(e.op, e.table, e.key, e.field, e.before, e.after) for e in result.effects],
        "checks": [(c.kind, c.passed, c.detail) for c in result.checks],
    }


def _run(domain, task, kind: str) -> AttemptResult:
    agent = "golden" if kind == "golden" else f"check:{kind}"
    return AttemptSetup.from_config(domain, task, agent=agent, judge=None).run()


@pytest.mark.parametrize("name", sorted(TASKS))
def test_cached_snapshots_grade_like_the_full_grader_for_passing_and_failing_attempts(name, monkeypatch):
    python = servers_python()
    domain = real_domain(name, python)
    task = next(t for path in task_files(name) for t in parse_test_file(path) if t.id == TASKS[name])
    trained = dataclasses.replace(domain, mcp={**(domain.mcp or {}), "evidence": "verdict"})
    built = []
    original = mcp_backend.build_task_states

    def counting(*args, **kwargs):
        built.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(mcp_backend, "build_task_states", counting)
    rewards = {}
    for kind in KINDS:
        task_states.clear()
        cold = _run(domain, task, kind)  # the full grader: every snapshot from this attempt's answer
        assert len(built) == 1, kind
        cached = _run(trained, task, kind)  # S0, SG, specs and unchanged SR tables from the cache
        assert len(built) == 1, f"{kind}: the second attempt built its snapshots again"
        assert _grade(cached) == _grade(cold), kind
        assert "effects" in cold.extra["thinkingbox"] and "effects" not in cached.extra["thinkingbox"]
        rewards[kind] = _grade(cached)["reward"]
        built.clear()
    assert rewards == {"golden": 1.0, "do-nothing": 0.0, "skip-last-write": 0.0, "changed-argument": 0.0}
