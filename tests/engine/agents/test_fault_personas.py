"""The retry personas under fault plans: naive retries write twice, careful ones check first."""

from __future__ import annotations

import pytest

from tb_engine.attempt_setup import AttemptSetup, make_agent, run_task
from tb_engine.faults import FaultPlan, faults_of
from tb_engine.loader import load_builtin_suite

AFTER_COMMIT_FIRST_WRITE = FaultPlan(("error_after_commit",), at_calls=(0,))
REFUND_TASK = "travel/duplicate_charge_refund_once"  # find, get_booking, issue_refund (#2), update_case
# No read can show these first writes (no neobank read tool lists disputes or takes a card id) and the
# task's own reads do not change: the careful persona reports the write instead of re-sending it.
UNCONFIRMABLE_FIRST_WRITE_TASKS = [
    "neobank/compromised_card_two_unknown_payments",
    "neobank/duplicate_grocery_charge",
    "neobank/furniture_not_received_dispute",
]


@pytest.fixture(scope="module")
def suite():
    return load_builtin_suite()


def _run(suite, task_id, agent, plan=AFTER_COMMIT_FIRST_WRITE, attempt_index=0):
    task = suite.tasks[task_id]
    return run_task(suite.domains[task.domain], task, agent=agent, faults=plan, attempt_index=attempt_index)


def test_naive_retry_writes_twice_and_the_extra_effect_names_both_calls(suite):
    result = _run(suite, REFUND_TASK, "sim:naive-retry")
    calls = [(c.index, c.name, c.error is not None) for c in result.transcript.tool_calls]
    assert calls[2:4] == [(2, "issue_refund", True), (3, "issue_refund", False)]
    assert result.verdict == "fail"
    assert [(d.kind, d.table, d.written_by) for d in result.diff] == [("extra_effect", "payments", (3,))]
    record = faults_of(result.extra)
    assert [(e["call"], e["repeats"], e["table"]) for e in record["duplicate_effects"]] == [
        (2, [3], "payments")
    ]


def test_careful_retry_reads_instead_of_writing_again(suite):
    result = _run(suite, REFUND_TASK, "sim:careful-retry")
    assert result.verdict == "pass"
    names = [c.name for c in result.transcript.tool_calls]
    assert names.count("issue_refund") == 1
    assert faults_of(result.extra)["duplicate_effects"] == []
    assert [f["committed"] for f in faults_of(result.extra)["fired"]] == [True]


def test_error_after_commit_on_the_first_write_across_the_suite(suite):
    naive_failures, careful_failures, unconfirmed = [], [], []
    for task in sorted(suite.tasks.values(), key=lambda t: t.id):
        domain = suite.domains[task.domain]
        golden = _run(suite, task.id, "golden")
        naive = _run(suite, task.id, "sim:naive-retry")
        careful_agent = make_agent("sim:careful-retry", task=task, domain=domain)
        careful = AttemptSetup.from_config(
            domain, task, agent=careful_agent, faults=AFTER_COMMIT_FIRST_WRITE
        ).run()
        assert golden.verdict == "pass", task.id
        if naive.verdict == "fail":
            naive_failures.append(task.id)
            duplicates = faults_of(naive.extra)["duplicate_effects"]
            assert duplicates and all(d["repeats"] for d in duplicates), task.id
            assert {d.kind for d in naive.diff} >= {"extra_effect"}, task.id
        if careful.verdict != "pass":
            careful_failures.append(task.id)
        assert faults_of(careful.extra)["duplicate_effects"] == [], task.id
        if careful_agent.unconfirmed:
            unconfirmed.append(task.id)
            assert careful_agent.retries == [] and "could not check" in careful.transcript.final_reply(), (
                task.id
            )
    assert len(naive_failures) >= 10  # every non-idempotent first write is repeated
    assert careful_failures == []
    assert unconfirmed == UNCONFIRMABLE_FIRST_WRITE_TASKS


def test_careful_retries_a_write_that_did_not_happen(suite):
    plan = FaultPlan(("error_before_commit",), at_calls=(0,))
    agent = make_agent("sim:careful-retry", task=suite.tasks[REFUND_TASK], domain=suite.domains["travel"])
    task = suite.tasks[REFUND_TASK]
    from tb_engine.attempt_setup import AttemptSetup

    result = AttemptSetup.from_config(suite.domains["travel"], task, agent=agent, faults=plan).run()
    assert result.verdict == "pass"
    assert agent.retries == [2] and agent.seen_committed == [] and agent.unconfirmed == []


def test_careful_does_not_resend_a_write_no_read_can_show(suite):
    # open_dispute names a transaction no read tool takes, and no tool lists disputes: nothing can show
    # whether it went through, so the careful persona tells the user rather than risk a second dispute.
    task = suite.tasks["neobank/duplicate_grocery_charge"]
    agent = make_agent("sim:careful-retry", task=task, domain=suite.domains["neobank"])
    from tb_engine.attempt_setup import AttemptSetup

    faulted = AttemptSetup.from_config(
        suite.domains["neobank"], task, agent=agent, faults=AFTER_COMMIT_FIRST_WRITE
    ).run()
    assert faulted.verdict == "pass"
    assert [c.name for c in faulted.transcript.tool_calls].count("open_dispute") == 1
    assert agent.retries == [] and agent.seen_committed == [] and len(agent.unconfirmed) == 1
    assert (
        "open_dispute" in faulted.transcript.final_reply()
        and "could not check" in faulted.transcript.final_reply()
    )


def test_tools_are_told_apart_by_declaration_else_by_the_name_verb(suite):
    from tb_engine.interfaces import AgentView, ToolSchema

    task = suite.tasks[REFUND_TASK]

    def writes_seen_by(schemas):
        agent = make_agent("sim:careful-retry", task=task, domain=suite.domains["travel"])
        agent.step(AgentView(system_prompt="", tools=schemas, messages=[]))
        return sorted(schema.name for schema in schemas if agent._is_write(schema.name))

    declared = [
        ToolSchema(t.name, t.description, t.parameters, t.read_only)
        for t in suite.domains["travel"].tools.values()
    ]
    # A backend that declares read-only tools is believed, whatever the names say.
    assert "get_booking" not in writes_seen_by(declared) and "issue_refund" in writes_seen_by(declared)
    renamed = [ToolSchema("get_refund_done", "", {}, False), ToolSchema("check_in", "", {}, True)]
    assert writes_seen_by(renamed) == ["get_refund_done"]
    # One that declares none (the real ThinkingBox servers): the name's first verb decides.
    undeclared = [
        ToolSchema(name, "", {}, False)
        for name in (
            "zendesk_get_items",
            "crm_api_check_vip_status",
            "lookup_lookup_hotel_id",
            "zendesk_create_item",
            "payment_api_process_refund",
            "workday_api",
        )
    ]
    assert writes_seen_by(undeclared) == ["payment_api_process_refund", "workday_api", "zendesk_create_item"]


def test_golden_is_not_misclassified_under_any_after_commit_fault(suite):
    plan = FaultPlan(("error_after_commit", "timeout_after_commit", "slow_reply"), rate=1.0, slow_ms=0)
    for task in suite.tasks.values():
        assert run_task(suite.domains[task.domain], task, faults=plan).verdict == "pass", task.id


def test_without_faults_both_personas_pass_everything(suite):
    for task in suite.tasks.values():
        for agent in ("sim:naive-retry", "sim:careful-retry"):
            assert run_task(suite.domains[task.domain], task, agent=agent).verdict == "pass", (agent, task.id)
