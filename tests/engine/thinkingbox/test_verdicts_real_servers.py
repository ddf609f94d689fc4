"""Our verdict agrees with the real ThinkingBox servers' hash verdict (engine level, real servers).

Six run kinds (golden, do-nothing, skip-last-write, changed-argument, duplicate-create,
unstable-text-edit) on the five benchmark domains: the shared retail and booking tasks and our
own tasks for the three held-back domains (fixtures/thinkingbox/test_case). bench/
thinkingbox_verdicts.py runs the same over every task and prints the counts.
"""

from __future__ import annotations

import pytest

from tb_engine.agents.harness_checks import RUN_KINDS
from tb_engine.attempt_setup import AttemptSetup, golden_writes
from tb_engine.spec import GoldenCall, TaskSpec
from tb_engine.thinkingbox.dataset import parse_test_file
from tb_engine.thinkingbox.mcp_pool import close_pools
from tests.support.real_servers import DOMAINS, OWN_DOMAINS, real_domain, servers_python, task_files
from tests.support.run_kinds import run_kinds

# Two tasks per domain keep this under a few minutes on two cores; the bench covers every task.
SAMPLE = {
    "sandbox_external_retail": [
        "sandbox_external_retail_group1.py:test_case_ST002_001",
        "sandbox_external_retail_group1.py:test_case_ST003_006",
    ],
    "external_booking_v1": [
        "external_booking_v1_group1.py:test_bmd_001",
        "external_booking_v1_group1_rubrics_yesno.py:test_bmd_004",
    ],
    "sandbox_auto_insurance": [
        "sandbox_auto_insurance_tbw.py:test_tbw_ai_add_vehicle_backdated_tx",
        "sandbox_auto_insurance_tbw.py:test_tbw_ai_billing_extension_past_due_fl",
    ],
    "sandbox_consulting": [
        "sandbox_consulting_tbw.py:test_tbw_cs_software_license_standard_pool",
        "sandbox_consulting_tbw.py:test_tbw_cs_expense_override_request_pending",
    ],
    "sandbox_neobank_support_v1": [
        "sandbox_neobank_support_v1_tbw.py:test_tbw_nb_slack_access_standard",
        "sandbox_neobank_support_v1_tbw.py:test_tbw_nb_assign_available_laptop_sf",
    ],
}
# What a sound grader says for each kind, when it applies (harness_checks module docstring).
EXPECTED_PASS = {
    "golden": True,
    "do-nothing": False,
    "skip-last-write": False,
    "changed-argument": False,
    "duplicate-create": False,
    "unstable-text-edit": True,
}


@pytest.fixture(autouse=True, scope="module")
def _close_pools():
    yield
    close_pools()


def _tasks(domain: str) -> list[TaskSpec]:
    return [task for path in task_files(domain) for task in parse_test_file(path)]


@pytest.mark.parametrize("name", DOMAINS)
def test_six_run_kinds_our_verdict_and_the_server_hash_agree(name):
    python = servers_python()
    domain = real_domain(name, python)
    tasks = [task for task in _tasks(name) if task.id in SAMPLE[name]]
    assert sorted(t.id for t in tasks) == sorted(SAMPLE[name])

    outcomes = run_kinds(domain, tasks, RUN_KINDS)

    ran = [o for o in outcomes if o.applicable]
    assert [(o.task_id, o.kind, o.status, o.error) for o in ran if o.status != "done"] == []
    assert [(o.task_id, o.kind, o.our_pass, o.hash_pass) for o in ran if o.disagree] == []
    assert [(o.task_id, o.kind) for o in ran if o.declarations_verified is not True] == []
    assert [(o.task_id, o.kind, o.hash_pass) for o in ran if o.hash_pass != EXPECTED_PASS[o.kind]] == []
    # The first four kinds apply to every sampled task (each writes); a task that creates no row, or
    # writes no free text, leaves the last two out, but each domain's sample exercises both.
    always = {"golden", "do-nothing", "skip-last-write", "changed-argument"}
    assert [(o.task_id, o.kind) for o in outcomes if o.kind in always and not o.applicable] == []
    assert {o.kind for o in ran} == set(RUN_KINDS)


@pytest.mark.parametrize("name", OWN_DOMAINS)
def test_own_tasks_replay_golden_without_tool_errors_and_pass_the_server_hash(name):
    python = servers_python()
    domain = real_domain(name, python)
    tasks = _tasks(name)
    assert len(tasks) >= 4
    for task in tasks:
        result = AttemptSetup.from_config(domain, task, agent="golden", judge=None).run()
        evidence = result.extra["thinkingbox"]["effects"][name]
        calls = result.transcript.tool_calls
        assert (task.id, result.status, [c.error for c in calls if c.error]) == (task.id, "done", [])
        assert (task.id, evidence["their_hash_pass"], evidence["our_state_pass"]) == (task.id, True, True)
        # Each own task changes state, and creates at least one row (a ticket at least).
        writes = golden_writes(domain, task)
        assert (task.id, writes.errors, bool(writes.writes), bool(writes.creates)) == (
            task.id,
            (),
            True,
            True,
        )
        assert any(c.name == "zendesk_create_item" for c in calls)


def test_clock_field_the_server_hashes_makes_do_nothing_fail_for_both_verdicts():
    # The golden call only re-saves a ticket with its current status: the one change is the
    # ticket's updated_at, a clock stamp this server hashes (its Ticket model leaves it stable).
    # A hand table that treated every clock field as unstable let a do-nothing agent pass here
    # while the server's own hash failed it.
    python = servers_python()
    domain = real_domain("sandbox_auto_insurance", python)
    golden = (GoldenCall("zendesk_update_item", {"table": "tickets", "id": "1", "item": {"status": "open"}}),)
    interactions = [{"tool": c.tool, "parameters": c.arguments} for c in golden]
    task = TaskSpec(
        id="clock.py:test_resave_ticket",
        domain=domain.name,
        query="Please make sure my ticket is still open.",
        user_context="",
        data_patch={},
        golden=golden,
        extra={"init": {"data_patch": {}, "golden_test_case": {"tool_interactions": interactions}}},
    )
    idle = AttemptSetup.from_config(domain, task, agent="check:do-nothing", judge=None).run()
    evidence = idle.extra["thinkingbox"]["effects"][domain.name]
    assert (evidence["our_state_pass"], evidence["their_hash_pass"], idle.verdict) == (False, False, "fail")
    assert [(d.kind, d.table, d.key, d.field) for d in idle.diff] == [
        ("missing_effect", "zendesk_tickets", "1", "updated_at")
    ]
