"""Re-grading ThinkingBox attempts on the real servers (issue 29), engine level.

Seeded attempts run on a shared retail and a shared booking task; their stored results (through a
sorted-key JSON round trip, as a jsonb column gives them back) are re-graded against the task as
now defined: unchanged, every grading is reproduced exactly; with the golden trajectory's last write
dropped (the server's golden replay in a fresh process gives the new SG), the re-graded verdicts
equal those of a full re-run of the same seeded agents against the new definition. A record
without the state record, or one that does not rebuild the attempt's SR, is not re-gradable.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from tb_engine.attempt_setup import AttemptSetup, golden_writes
from tb_engine.regrade import regrade_stored, task_basis
from tb_engine.spec import TaskSpec
from tb_engine.thinkingbox.dataset import parse_test_file
from tb_engine.thinkingbox.mcp_pool import close_pools
from tb_engine.thinkingbox.regrade_mcp import NO_RECORD
from tests.support.real_servers import real_domain, servers_python, task_files

TASKS = {
    "sandbox_external_retail": "sandbox_external_retail_group1.py:test_case_ST002_001",
    "external_booking_v1": "external_booking_v1_group1.py:test_bmd_001",
}
AGENTS = (
    [("golden", 0)]
    + [("sim:careless", seed) for seed in range(1, 9)]
    + [("sim:explorer", seed) for seed in range(9, 12)]
    + [("sim:write-revert", 0)]
)


@pytest.fixture(autouse=True, scope="module")
def _close_pools():
    yield
    close_pools()


def _task(name: str) -> TaskSpec:
    tasks = [task for path in task_files(name) for task in parse_test_file(path) if task.id == TASKS[name]]
    assert len(tasks) == 1
    return tasks[0]


def without_golden_call(task: TaskSpec, index: int) -> TaskSpec:
    """The task with golden call ``index`` dropped: from the trajectory the server replays for SG
    (``init.golden_test_case``) and from our parsed copy of it."""
    init = copy.deepcopy(task.extra["init"])
    del init["golden_test_case"]["tool_interactions"][index]
    golden = task.golden[:index] + task.golden[index + 1 :]
    return dataclasses.replace(task, golden=golden, extra={**task.extra, "init": init})


def _stored(result) -> dict:
    assert result.status == "done", result.error
    return json.loads(json.dumps(result.to_dict(), sort_keys=True))


def _graded(stored: dict) -> tuple:
    return (stored["verdict"], stored["diff"], stored["checks"])


def _regraded(outcome) -> tuple:
    assert outcome.regradable, outcome.reason
    return (outcome.verdict, [d.to_dict() for d in outcome.diff], [c.to_dict() for c in outcome.checks])


@pytest.mark.parametrize("name", sorted(TASKS))
def test_regrade_of_a_changed_golden_flips_exactly_what_a_full_rerun_flips(name):
    domain = real_domain(name, servers_python())
    task = _task(name)

    def setups():  # the seeded agents, built from the task they saw (an agent is used up by its run)
        return [
            AttemptSetup.from_config(domain, task, agent=agent, seed=seed, judge=None)
            for agent, seed in AGENTS
        ]

    stored = [_stored(setup.run()) for setup in setups()]

    # Unchanged definition: every verdict, diff and check is reproduced from the stored record.
    basis = task_basis(domain, task)
    assert basis.not_regradable == ""
    assert [_regraded(regrade_stored(basis, s)) for s in stored] == [_graded(s) for s in stored]

    # The golden trajectory loses its last write: a new SG from the server's replay in a fresh process.
    changed = without_golden_call(task, golden_writes(domain, task).writes[-1])
    new_basis = task_basis(domain, changed)
    assert new_basis.not_regradable == "" and new_basis.golden != basis.golden
    regraded = [regrade_stored(new_basis, s) for s in stored]
    rerun = [dataclasses.replace(setup, task=changed).run() for setup in setups()]
    assert all(r.status == "done" for r in rerun)
    assert [r.verdict for r in regraded] == [r.verdict for r in rerun]

    # Our diff too: the same items the re-run finds (call attribution aside, which a re-grade keeps
    # from the stored effects).
    def items(diff):
        return [(d.kind, d.table, d.key, d.field, d.result, d.golden) for d in diff]

    assert [items(r.diff) for r in regraded] == [items(r.diff) for r in rerun]
    flips = [
        (s["verdict"], r.verdict) for s, r in zip(stored, rerun, strict=True) if s["verdict"] != r.verdict
    ]
    assert ("pass", "fail") in flips, "the change must flip an attempt, or the comparison proves nothing"


def test_an_attempt_without_an_exact_record_is_not_regradable():
    name = "sandbox_external_retail"
    domain = real_domain(name, servers_python())
    task = _task(name)
    stored = _stored(AttemptSetup.from_config(domain, task, agent="sim:careless", seed=1, judge=None).run())
    basis = task_basis(domain, task)
    assert regrade_stored(basis, stored).regradable

    older = json.loads(json.dumps(stored))
    del older["extra"]["thinkingbox"]["state_record"]
    assert regrade_stored(basis, older).reason == NO_RECORD

    tampered = json.loads(json.dumps(stored))
    table, rows = next(iter(tampered["extra"]["thinkingbox"]["state_record"]["tables"].items()))
    rows.append(0)  # one more row than the attempt's SR had
    outcome = regrade_stored(basis, tampered)
    assert (outcome.regradable, outcome.verdict) == (False, "")
    assert outcome.reason == (
        "SR cannot be rebuilt from the stored state record: the SR rebuilt from S0 and the stored effects "
        "differs from the attempt's SR"
    )

    other_s0 = json.loads(json.dumps(stored))
    other_s0["extra"]["thinkingbox"]["state_record"]["initial_digest"] = "0" * 64
    assert regrade_stored(basis, other_s0).reason.startswith(
        "SR cannot be rebuilt from the stored state record: S0 from the server now differs"
    )
