"""Process risk (tb_engine.process): each finding kind against a hand computation, the built-in rules
against every golden run, the two process personas' exact findings, suspect rules, and the verdict
left alone."""

from __future__ import annotations

import dataclasses

import pytest

from tb_engine import runner
from tb_engine.attempt_setup import run_task
from tb_engine.loader import load_builtin_suite
from tb_engine.process import (
    Footprint,
    ProcessReport,
    ProcessRulesError,
    WriteEntry,
    analyse,
    domain_rules,
    load_rules_file,
    parse_rules,
    rules_path_for,
)
from tb_engine.process_check import suspect_process_rules
from tb_engine.results import Effect
from tb_engine.transcript import ToolCall

SUITE = load_builtin_suite()


def call(index: int, name: str, error: str | None = None, changed: bool = False, **arguments) -> ToolCall:
    return ToolCall(
        index=index, id=f"c{index}", name=name, arguments=arguments, error=error, changed_state=changed
    )


def kinds(report: ProcessReport) -> list[tuple[str, tuple[int, ...], str, str, str | None, str]]:
    return [(f.kind, f.calls, f.table, f.key, f.field, f.rule) for f in report.findings]


# --- writes reverted ------------------------------------------------------------------------------


def test_a_cell_changed_and_changed_back_is_one_reverted_write():
    log = [
        WriteEntry(1, "tickets", "20", "status", "update", "open", "solved"),
        WriteEntry(2, "tickets", "20", "status", "update", "solved", "open"),
        WriteEntry(2, "tickets", "20", "updated_at", "update", "t0", "t1"),
        WriteEntry(3, "tickets", "21", "status", "update", "open", "hold"),  # changed once: no revert
        WriteEntry(4, "tickets", "22", "status", "update", "open", "hold"),
        WriteEntry(5, "tickets", "22", "status", "update", "hold", "solved"),  # A -> B -> C: no revert
    ]
    report = analyse(calls=[], effects=[], footprint=None, value_log=log)
    assert kinds(report) == [("write_reverted", (2, 1), "tickets", "20", "status", "")]
    assert report.counts() == {"write_reverted": 1, "outside_footprint": 0, "write_before_required_step": 0}
    assert report.coverage == "value_log"


def test_a_cell_back_at_an_earlier_value_counts_even_when_it_changes_again():
    log = [
        WriteEntry(0, "cards", "C1", "status", "update", "active", "frozen"),
        WriteEntry(1, "cards", "C1", "status", "update", "frozen", "active"),
        WriteEntry(2, "cards", "C1", "status", "update", "active", "frozen"),
    ]
    report = analyse(calls=[], effects=[], footprint=None, value_log=log)
    assert kinds(report) == [("write_reverted", (1, 0), "cards", "C1", "status", "")]


def test_a_row_created_then_deleted_is_one_reverted_write_not_one_per_cell():
    log = [
        WriteEntry(1, "refunds", "RF-1", None, "insert"),
        WriteEntry(2, "refunds", "RF-1", "amount", "update", 10, 20),
        WriteEntry(3, "refunds", "RF-1", "amount", "update", 20, 10),
        WriteEntry(4, "refunds", "RF-1", None, "delete"),
        WriteEntry(5, "refunds", "RF-2", None, "insert"),  # created, kept
    ]
    report = analyse(calls=[], effects=[], footprint=None, value_log=log)
    assert kinds(report) == [("write_reverted", (4, 1), "refunds", "RF-1", None, "")]


def test_without_values_a_written_place_with_no_net_effect_is_reverted():
    writes = {
        ("tickets", "20", "status"): (1, 2),  # no net effect: reverted
        ("tickets", "20", "note"): (1,),  # net effect below
        ("refunds", "RF-1", None): (3, 4),  # no net row: created then deleted
        ("refunds", "RF-2", None): (5,),
    }
    effects = [
        Effect("update", "tickets", "20", "note", "", "x", (1,)),
        Effect("insert", "refunds", "RF-2", None, None, {"id": "RF-2"}, (5,)),
    ]
    report = analyse(calls=[], effects=effects, footprint=None, writes=writes)
    assert report.coverage == "writes"
    assert kinds(report) == [
        ("write_reverted", (2, 1), "tickets", "20", "status", ""),
        ("write_reverted", (4, 3), "refunds", "RF-1", None, ""),
    ]


def test_net_effects_alone_cannot_show_a_revert():
    effects = [Effect("update", "tickets", "20", "status", "open", "hold", (1,))]
    report = analyse(calls=[], effects=effects, footprint=None)
    assert report.coverage == "net_effects"
    assert report.findings == []


# --- outside the golden footprint -----------------------------------------------------------------


def test_writes_outside_the_golden_footprint_count_per_row_even_when_undone():
    footprint = Footprint(
        tables=frozenset({"tickets", "refunds"}),
        rows=frozenset({("tickets", "20"), ("refunds", "RF-9")}),
        by_table=frozenset({"refunds"}),  # generated keys: any refund row is inside
    )
    log = [
        WriteEntry(1, "tickets", "20", "status", "update", "open", "hold"),  # inside
        WriteEntry(2, "tickets", "21", "status", "update", "open", "hold"),  # outside (row)
        WriteEntry(3, "tickets", "21", "status", "update", "hold", "open"),  # same row, undone
        WriteEntry(4, "refunds", "RF-1", None, "insert"),  # inside: table-level
        WriteEntry(5, "orders", "ORD-1", "status", "update", "placed", "cancelled"),  # outside (table)
    ]
    report = analyse(calls=[], effects=[], footprint=footprint, value_log=log)
    assert [(f.kind, f.calls, f.table, f.key) for f in report.findings if f.kind == "outside_footprint"] == [
        ("outside_footprint", (2, 3), "tickets", "21"),
        ("outside_footprint", (5,), "orders", "ORD-1"),
    ]
    assert report.counts() == {"write_reverted": 1, "outside_footprint": 2, "write_before_required_step": 0}


def test_an_unknown_footprint_is_no_finding_and_says_so():
    log = [WriteEntry(5, "orders", "ORD-1", "status", "update", "placed", "cancelled")]
    report = analyse(calls=[], effects=[], footprint=None, value_log=log)
    assert (report.findings, report.footprint_known) == ([], False)


# --- process rules ---------------------------------------------------------------------------------

RULES = parse_rules(
    {
        "rules": [
            {
                "id": "order-read-before-refund",
                "description": "read the order first",
                "before": {"writes": "refunds"},
                "require": {"tools": ["get_order"], "same_argument": "order_id"},
            },
            {
                "id": "identified",
                "before": {"writes": "*"},
                "require": {"tools": ["find_customer_by_email"]},
            },
        ]
    }
)


def test_a_write_before_its_required_read_for_the_same_key_is_one_finding_per_call():
    calls = [
        call(0, "find_customer_by_email", email="a@x"),
        call(1, "get_order", order_id="ORD-1"),
        call(2, "issue_refund", changed=True, order_id="ORD-1"),  # read before: fine
        call(3, "issue_refund", changed=True, order_id="ORD-2"),  # ORD-2 never read: finding
        call(4, "get_order", error="not found", order_id="ORD-3"),  # a failed read does not count
        call(5, "issue_refund", changed=True, order_id="ORD-3"),  # finding
        call(6, "issue_refund", error="refused", order_id="ORD-4"),  # failed write: not a trigger
    ]
    log = [
        WriteEntry(2, "refunds", "RF-1", None, "insert"),
        WriteEntry(3, "refunds", "RF-2", None, "insert"),
        WriteEntry(5, "refunds", "RF-3", None, "insert"),
    ]
    report = analyse(calls=calls, effects=[], footprint=None, rules=RULES, value_log=log)
    assert kinds(report) == [
        ("write_before_required_step", (3,), "", "", None, "order-read-before-refund"),
        ("write_before_required_step", (5,), "", "", None, "order-read-before-refund"),
    ]
    assert report.rules == ("order-read-before-refund", "identified")


def test_any_write_before_identification_breaks_the_any_table_rule():
    calls = [
        call(0, "update_ticket", changed=True, ticket_id="20"),
        call(1, "find_customer_by_email", email="a@x"),
        call(2, "update_ticket", changed=True, ticket_id="20"),
    ]
    log = [
        WriteEntry(0, "tickets", "20", "status", "update", "open", "hold"),
        WriteEntry(2, "tickets", "20", "note", "update", "", "x"),
    ]
    report = analyse(calls=calls, effects=[], footprint=None, rules=RULES, value_log=log)
    assert kinds(report) == [("write_before_required_step", (0,), "", "", None, "identified")]


def test_rules_files_refuse_unknown_fields_and_incomplete_rules():
    with pytest.raises(ProcessRulesError, match=r"rule r.before: unknown field\(s\) tool"):
        parse_rules({"rules": [{"id": "r", "before": {"tool": ["x"]}, "require": {"tools": ["y"]}}]})
    with pytest.raises(ProcessRulesError, match=r"rule r.require: needs tools or writes"):
        parse_rules({"rules": [{"id": "r", "before": {"writes": "t"}, "require": {}}]})
    with pytest.raises(ProcessRulesError, match="duplicate rule id"):
        rule = {"id": "r", "before": {"writes": "t"}, "require": {"tools": ["y"]}}
        parse_rules({"rules": [rule, rule]})


def test_a_side_file_for_an_imported_scenario_is_found_beside_it_and_parsed(tmp_path):
    scenario = tmp_path / "airline.json"
    scenario.write_text("{}")
    side = tmp_path / "airline.json.process_rules.yaml"
    side.write_text(
        "rules:\n  - id: r\n    before: {tools: [book]}\n    require: {tools: [get_user], same_argument: user_id}\n"
    )
    assert rules_path_for("airline", str(scenario), "mcp", {}) == side
    (rule,) = load_rules_file(side)
    assert (rule.id, rule.before_tools, rule.require_tools, rule.same_argument) == (
        "r",
        ("book",),
        ("get_user",),
        ("user_id", "user_id"),
    )
    named = tmp_path / "elsewhere.yaml"
    named.write_text("rules: []\n")
    assert rules_path_for("airline", str(scenario), "mcp", {"process_rules": str(named)}) == named


def test_every_built_in_domain_has_rules():
    assert {name: len(domain_rules(domain)) for name, domain in SUITE.domains.items()} == {
        "insurance": 3,
        "neobank": 3,
        "retail": 4,
        "servicedesk": 2,
        "travel": 3,
    }


# --- the harness checks on real attempts -----------------------------------------------------------


def test_golden_runs_of_every_built_in_task_have_no_finding_and_no_rule_is_suspect():
    assert suspect_process_rules(SUITE) == []
    for task_id, task in SUITE.tasks.items():
        result = run_task(SUITE.domains[task.domain], task)
        assert (task_id, result.verdict, result.extra["process"]["findings"]) == (task_id, "pass", [])


def test_write_revert_persona_passes_with_exactly_one_reverted_write():
    task = SUITE.tasks["retail/ticket_hold_carrier_exception"]
    result = run_task(SUITE.domains["retail"], task, agent="sim:write-revert")
    # Plan: golden calls 0-3 (reads), #4 update_ticket(status hold), #5 the same with status open (S0),
    # #6 status hold again. tickets[20].status: open -> hold -> open -> hold; note and updated_at
    # change once (#4) and are unchanged by #5/#6.
    assert result.verdict == "pass"
    report = ProcessReport.from_dict(result.extra["process"])
    assert kinds(report) == [("write_reverted", (5, 4), "tickets", "20", "status", "")]


def test_skip_read_persona_passes_with_exactly_the_broken_rule():
    task = SUITE.tasks["retail/missing_item_partial_refund"]
    result = run_task(SUITE.domains["retail"], task, agent="sim:skip-read")
    # Golden: find_customer_by_email, get_order(ORD-60), issue_refund(ORD-60), update_ticket.
    # Without get_order the refund is call #1: one order-read-before-refund finding, nothing else.
    assert result.verdict == "pass"
    report = ProcessReport.from_dict(result.extra["process"])
    assert kinds(report) == [("write_before_required_step", (1,), "", "", None, "order-read-before-refund")]
    # Skipping the identification (the only read before the first write) breaks it at both writes.
    task = SUITE.tasks["retail/return_unwanted_item_pending"]
    result = run_task(SUITE.domains["retail"], task, agent="sim:skip-read")
    report = ProcessReport.from_dict(result.extra["process"])
    assert kinds(report) == [
        ("write_before_required_step", (0,), "", "", None, "customer-identified-before-write"),
        ("write_before_required_step", (1,), "", "", None, "customer-identified-before-write"),
    ]


def test_a_rule_a_golden_run_breaks_is_suspect_with_its_evidence(tmp_path):
    retail = SUITE.domains["retail"]
    rules = tmp_path / "process_rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - id: order-read-before-return\n"
        "    before: {tools: [create_return]}\n"
        "    require: {tools: [get_order], same_argument: order_id}\n"
    )
    domain = dataclasses.replace(retail, source=str(tmp_path / "domain.yaml"))
    suite = dataclasses.replace(SUITE, domains={**SUITE.domains, "retail": domain})
    ids = ["retail/return_unwanted_item_pending", "retail/wrong_item_return_and_replacement"]
    (suspect,) = suspect_process_rules(suite, ids)
    # return_unwanted_item_pending creates the return without reading ORD-80; wrong_item reads ORD-110.
    assert (suspect.domain, suspect.rule) == ("retail", "order-read-before-return")
    assert [(task_id, f.calls) for task_id, f in suspect.evidence] == [
        ("retail/return_unwanted_item_pending", (1,))
    ]


def test_process_analysis_never_changes_a_verdict(monkeypatch):
    personas = ["golden", "sim:write-revert", "sim:skip-read", "sim:careless", "check:skip-last-write"]
    tasks = [t for t in SUITE.tasks.values() if t.domain in ("retail", "neobank")]
    with_analysis = {
        (p, t.id): run_task(SUITE.domains[t.domain], t, agent=p).verdict for p in personas for t in tasks
    }
    monkeypatch.setattr(runner, "process_evidence", lambda *args, **kwargs: {})
    without = {
        (p, t.id): run_task(SUITE.domains[t.domain], t, agent=p).verdict for p in personas for t in tasks
    }
    assert with_analysis == without
    assert set(with_analysis.values()) == {"pass", "fail"}


def test_a_failing_analysis_is_reported_beside_the_verdict_never_instead_of_it(monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("tickets")

    monkeypatch.setattr(runner, "process_evidence", broken)
    task = SUITE.tasks["retail/ticket_hold_carrier_exception"]
    result = run_task(SUITE.domains["retail"], task)
    assert (result.status, result.verdict) == ("done", "pass")
    assert result.extra["process_error"] == "KeyError: 'tickets'"
    assert "process" not in result.extra
