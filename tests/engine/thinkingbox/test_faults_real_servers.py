"""Commit-point faults on the real ThinkingBox servers (engine level, real servers; issue 28).

With *error after commit* on a task's first row-creating call, the server keeps the call's effect
and the agent sees an error: the fault record must say the effect was committed (observed on the
server, not assumed), the naive persona's blind retry must fail the attempt with the extra row laid
at the door of the faulted call and its retry, the careful persona — which reads the collection the
row goes into (these servers mark no tool read-only: it tells reads by their names) — must see the
row and pass without a second one, the golden agent must still pass, and our verdict must agree with
the server's hash on every faulted attempt.
"""

from __future__ import annotations

import pytest

from tb_engine.attempt_setup import AttemptSetup, golden_writes, make_agent
from tb_engine.faults import ERROR_AFTER_COMMIT, FaultPlan, faults_of
from tb_engine.spec import TaskSpec
from tb_engine.thinkingbox.dataset import parse_test_file
from tb_engine.thinkingbox.mcp_pool import close_pools
from tests.support.real_servers import real_domain, servers_python, task_files

# One create task per domain (the shared retail and booking tasks, and our own for the three
# held-back domains) keeps this to a few server sessions.
TASKS = {
    "sandbox_external_retail": "sandbox_external_retail_group1.py:test_case_ST002_001",
    "external_booking_v1": "external_booking_v1_group1.py:test_bmd_001",
    "sandbox_auto_insurance": "sandbox_auto_insurance_tbw.py:test_tbw_ai_add_vehicle_backdated_tx",
    "sandbox_consulting": "sandbox_consulting_tbw.py:test_tbw_cs_software_license_standard_pool",
    "sandbox_neobank_support_v1": "sandbox_neobank_support_v1_tbw.py:test_tbw_nb_slack_access_standard",
}


@pytest.fixture(autouse=True, scope="module")
def _close_pools():
    yield
    close_pools()


def _task(name: str) -> TaskSpec:
    tasks = [task for path in task_files(name) for task in parse_test_file(path) if task.id == TASKS[name]]
    assert len(tasks) == 1
    return tasks[0]


def _plan_on_first_create(domain, task) -> tuple[FaultPlan, int]:
    """A plan faulting the golden trajectory's first row-creating call, and that call's index."""
    creates = golden_writes(domain, task).creates
    assert creates, f"{task.id}: the golden trajectory creates no row"
    first = creates[0]
    tool = task.golden[first].tool
    ordinal = sum(1 for call in task.golden[:first] if call.tool == tool)
    plan = FaultPlan(
        kinds=(ERROR_AFTER_COMMIT,), at_calls=(ordinal,), tools="named", tool_names=(tool,), seed=7
    )
    return plan, first


def _state_verdicts(result, name: str) -> tuple[bool | None, bool | None]:
    """(our state verdict, the server's hash verdict) of an attempt."""
    evidence = ((result.extra.get("thinkingbox") or {}).get("effects") or {}).get(name) or {}
    return evidence.get("our_state_pass"), evidence.get("their_hash_pass")


@pytest.mark.parametrize("name", sorted(TASKS))
def test_error_after_commit_on_a_create_naive_retry_duplicates_careful_and_golden_pass(name):
    domain = real_domain(name, servers_python())
    task = _task(name)
    plan, faulted = _plan_on_first_create(domain, task)

    golden = AttemptSetup.from_config(domain, task, agent="golden", judge=None, faults=plan).run()
    naive = AttemptSetup.from_config(domain, task, agent="sim:naive-retry", judge=None, faults=plan).run()
    careful_agent = make_agent("sim:careful-retry", task=task, domain=domain)
    careful = AttemptSetup.from_config(domain, task, agent=careful_agent, judge=None, faults=plan).run()

    for result in (golden, naive, careful):
        assert result.status == "done", result.error
        record = faults_of(result.extra)
        assert record is not None
        assert [(f["kind"], f["committed"]) for f in record["fired"]] == [(ERROR_AFTER_COMMIT, True)]
    # golden and naive make the golden calls in order; the careful persona reads before its writes
    assert [faults_of(r.extra)["fired"][0]["call"] for r in (golden, naive)] == [faulted, faulted]
    assert _state_verdicts(golden, name) == (True, True)
    assert _state_verdicts(naive, name) == (False, False)
    # The golden agent replays its trajectory without looking at errors: the effect was kept, it passes
    # (a task with a reply rubric stays unjudged here: no judge is run).
    assert golden.verdict in ("pass", "unjudged") and golden.diff == []
    assert faults_of(golden.extra)["duplicate_effects"] == []
    # The naive persona re-sends the failed create: a second row, attributed to the call and its retry.
    assert naive.verdict == "fail"
    duplicates = faults_of(naive.extra)["duplicate_effects"]
    assert duplicates != []
    retry = faulted + 1
    assert {(d["call"], tuple(d["repeats"])) for d in duplicates} == {(faulted, (retry,))}
    assert all(retry in d["written_by"] for d in duplicates)
    # The careful persona reads the collection again, sees the created row and does not re-send it.
    assert _state_verdicts(careful, name) == (True, True)
    assert careful.verdict in ("pass", "unjudged") and careful.diff == []
    assert faults_of(careful.extra)["duplicate_effects"] == []
    create = task.golden[faulted]
    calls = careful.transcript.tool_calls
    assert [c.arguments for c in calls if c.name == create.tool].count(create.arguments) == 1
    assert careful_agent.seen_committed == [faulted] and careful_agent.retries == []
