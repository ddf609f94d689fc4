"""Starter suite domains travel, insurance, neobank and servicedesk, checked with the real engine.

Every task must validate (golden replay without tool error and deterministic, golden agent
passes, a do-nothing attempt fails), and per domain hand-written wrong trajectories must show
the diff classes their mistake stands for (wrong value, missing effect, extra effect).
"""

from __future__ import annotations

import pytest

from tb_engine.agents.golden import GoldenAgent
from tb_engine.attempt_setup import run_task
from tb_engine.golden import replay_golden
from tb_engine.loader import load_builtin_suite
from tb_engine.spec import GoldenCall
from tb_engine.validation import validate_task

DOMAINS = ("travel", "insurance", "neobank", "servicedesk")
SUITE = load_builtin_suite()
TASK_IDS = sorted(task_id for task_id, task in SUITE.tasks.items() if task.domain in DOMAINS)


def _task(task_id):
    return SUITE.tasks[task_id]


def run_plan(task_id: str, calls: list[tuple[str, dict]], reply: str | None = None):
    """One attempt of a task by an agent that makes exactly ``calls`` and then replies."""
    task = _task(task_id)
    plan = tuple(GoldenCall(tool, arguments) for tool, arguments in calls)
    agent = GoldenAgent(plan, reply or task.extra.get("golden_reply") or "Done.")
    return run_task(SUITE.domains[task.domain], task, agent=agent)


def diff_cells(result) -> set[tuple[str, str, str, str | None]]:
    """(kind, table, row key, field) of every diff item; field None for a whole row."""
    return {(item.kind, item.table, item.key, item.field) for item in result.diff}


def golden_calls(task_id: str) -> list[tuple[str, dict]]:
    return [(call.tool, dict(call.arguments)) for call in _task(task_id).golden]


# ---------------------------------------------------------------- suite shape


@pytest.mark.parametrize("domain_name", DOMAINS)
def test_domain_has_ten_or_more_tasks_and_six_to_ten_tools(domain_name):
    domain = SUITE.domains[domain_name]
    tasks = [t for t in SUITE.tasks.values() if t.domain == domain_name]

    assert len(tasks) >= 10
    assert 6 <= len(domain.tools) <= 10
    assert any(tool.read_only for tool in domain.tools.values())
    assert any(not tool.read_only for tool in domain.tools.values())


@pytest.mark.parametrize("domain_name", DOMAINS)
def test_domain_status_arguments_are_enums(domain_name):
    domain = SUITE.domains[domain_name]
    status_arguments = [
        (tool.name, name, schema)
        for tool in domain.tools.values()
        for name, schema in tool.parameters["properties"].items()
        if name in ("status", "decision", "condition")
    ]

    assert status_arguments != []
    assert [(tool, name) for tool, name, schema in status_arguments if "enum" not in schema] == []


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_golden_mixes_lookups_and_writes(task_id):
    domain = SUITE.domains[_task(task_id).domain]
    golden = _task(task_id).golden
    read_only = [domain.tools[call.tool].read_only for call in golden]

    assert 3 <= len(golden) <= 9
    assert read_only[0] is True
    assert False in read_only
    assert _task(task_id).tags != ()


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_validates_as_valid(task_id):
    task = _task(task_id)

    validation = validate_task(SUITE.domains[task.domain], task)

    assert (validation.status, validation.problems) == ("valid", ())


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_golden_replay_is_error_free_and_deterministic(task_id):
    task = _task(task_id)
    domain = SUITE.domains[task.domain]

    first, second = replay_golden(domain, task), replay_golden(domain, task)

    assert first.errors == ()
    assert first.snapshot == second.snapshot


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_golden_agent_passes_without_diff(task_id):
    result = run_plan(task_id, golden_calls(task_id))

    assert (result.verdict, result.diff, result.categories) == ("pass", [], [])


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_do_nothing_attempt_fails_with_missing_effects(task_id):
    result = run_plan(task_id, [], reply="Sorry, I cannot help with that.")

    assert result.verdict == "fail"
    assert {item.kind for item in result.diff} == {"missing_effect"}


# ---------------------------------------------------------------- travel


def test_travel_downgrade_without_approval_is_extra_effect_on_booking_and_refund():
    result = run_plan(
        "travel/downgrade_suite_pending_manager",
        [
            ("find_traveller", {"email": "claire.dubois@example.com"}),
            ("get_booking", {"booking_id": "BK-2050"}),
            ("change_room_type", {"booking_id": "BK-2050", "room_type_id": "RT-PAR-SUP"}),
            ("issue_refund", {"booking_id": "BK-2050", "amount": 1295, "reason": "downgrade"}),
        ],
    )

    cells = diff_cells(result)
    assert {(kind, table, field) for kind, table, _key, field in cells} == {
        ("extra_effect", "bookings", "room_type_id"),
        ("extra_effect", "bookings", "total_price"),
        ("extra_effect", "payments", None),
        ("missing_effect", "approvals", None),
    }
    assert [c.passed for c in result.checks if c.forbidden] == [False, False]


def test_travel_approved_downgrade_skipping_approval_is_missing_effect():
    calls = [
        c
        for c in golden_calls("travel/downgrade_junior_suite_approved")
        if c[0] != "request_manager_approval"
    ]

    result = run_plan("travel/downgrade_junior_suite_approved", calls)

    assert {(kind, table, field) for kind, table, _key, field in diff_cells(result)} == {
        ("missing_effect", "approvals", None)
    }


def test_travel_late_cancellation_full_refund_is_wrong_value():
    calls = golden_calls("travel/cancel_inside_window_one_night_fee")
    calls[-1] = ("issue_refund", {"booking_id": "BK-2061", "amount": 360, "reason": "full refund"})

    result = run_plan("travel/cancel_inside_window_one_night_fee", calls)

    assert [(i.kind, i.table, i.field, i.result, i.golden) for i in result.diff] == [
        ("wrong_value", "payments", "amount", 360.0, 240.0)
    ]


def test_travel_duplicate_refund_is_extra_effect():
    calls = golden_calls("travel/duplicate_charge_refund_once")
    calls.insert(3, calls[2])

    result = run_plan("travel/duplicate_charge_refund_once", calls)

    assert [(i.kind, i.table, i.field) for i in result.diff] == [("extra_effect", "payments", None)]
    assert result.diff[0].written_by == (3,)


def test_travel_resolving_case_before_hotel_answers_is_wrong_value():
    calls = golden_calls("travel/minibar_dispute_awaiting_hotel")
    calls[-1] = ("update_case", {"case_id": "CS-3002", "status": "resolved", "note": "closed"})

    result = run_plan("travel/minibar_dispute_awaiting_hotel", calls)

    assert diff_cells(result) == {("wrong_value", "support_cases", "CS-3002", "status")}


def test_travel_cancelling_the_other_travellers_booking_touches_other_record():
    calls = golden_calls("travel/cancel_flexible_full_refund")
    calls[2] = ("cancel_booking", {"booking_id": "BK-2062", "reason": "guest_request"})

    result = run_plan("travel/cancel_flexible_full_refund", calls)

    assert diff_cells(result) == {
        ("extra_effect", "bookings", "BK-2062", "status"),
        ("extra_effect", "bookings", "BK-2062", "cancel_reason"),
        ("missing_effect", "bookings", "BK-2060", "status"),
        ("missing_effect", "bookings", "BK-2060", "cancel_reason"),
    }


# ---------------------------------------------------------------- insurance


def test_insurance_payout_ignoring_deductible_is_wrong_value():
    calls = golden_calls("insurance/collision_pay_repair_shop")
    calls[3] = ("issue_payout", {"claim_id": "CLM-9001", "payee": "repair_shop", "amount": 2400})

    result = run_plan("insurance/collision_pay_repair_shop", calls)

    assert [(i.kind, i.table, i.field, i.result, i.golden) for i in result.diff] == [
        ("wrong_value", "payouts", "amount", 2400.0, 1900.0)
    ]


def test_insurance_closing_theft_claim_without_documents_is_wrong_value():
    calls = golden_calls("insurance/theft_claim_needs_police_reference")
    calls[3] = ("update_claim_status", {"claim_id": "CLM-9003", "status": "closed"})

    result = run_plan("insurance/theft_claim_needs_police_reference", calls)

    assert diff_cells(result) == {("wrong_value", "claims", "CLM-9003", "status")}


def test_insurance_second_payout_to_chasing_shop_is_extra_effect():
    calls = golden_calls("insurance/shop_says_unpaid_no_second_payout")
    calls.insert(2, ("issue_payout", {"claim_id": "CLM-9010", "payee": "repair_shop", "amount": 1100}))

    result = run_plan("insurance/shop_says_unpaid_no_second_payout", calls)

    assert [(i.kind, i.table, i.field) for i in result.diff] == [("extra_effect", "payouts", None)]
    assert [c.kind for c in result.checks if not c.passed] == ["no_new_rows"]


def test_insurance_rental_reimbursement_without_note_is_missing_effect():
    calls = golden_calls("insurance/rental_car_reimbursement_capped")[:-1]

    result = run_plan("insurance/rental_car_reimbursement_capped", calls)

    assert [(i.kind, i.table, i.field) for i in result.diff] == [("missing_effect", "adjuster_notes", None)]


def test_insurance_settling_the_neighbours_claim_touches_other_record():
    calls = golden_calls("insurance/hail_damage_neighbour_untouched")
    calls[4] = ("update_claim_status", {"claim_id": "CLM-9012", "status": "paid"})

    result = run_plan("insurance/hail_damage_neighbour_untouched", calls)

    assert diff_cells(result) == {
        ("extra_effect", "claims", "CLM-9012", "status"),
        ("missing_effect", "claims", "CLM-9011", "status"),
    }


# ---------------------------------------------------------------- neobank


def test_neobank_blocking_and_replacing_a_misplaced_card_is_wrong_value_and_extra_effect():
    calls = golden_calls("neobank/freeze_misplaced_card")
    calls[-1] = ("set_card_status", {"card_id": "CRD-704", "status": "blocked"})
    calls.append(("order_replacement_card", {"card_id": "CRD-704", "delivery": "express"}))

    result = run_plan("neobank/freeze_misplaced_card", calls)

    assert {(kind, table, field) for kind, table, _key, field in diff_cells(result)} == {
        ("wrong_value", "cards", "status"),
        ("extra_effect", "card_orders", None),
    }


def test_neobank_disputing_only_one_unknown_payment_is_missing_effect():
    calls = [
        c
        for c in golden_calls("neobank/compromised_card_two_unknown_payments")
        if c[1].get("transaction_id") != "TX-9022"
    ]

    result = run_plan("neobank/compromised_card_two_unknown_payments", calls)

    assert {(kind, table, field) for kind, table, _key, field in diff_cells(result)} == {
        ("missing_effect", "disputes", None),
        ("wrong_value", "accounts", "balance"),
    }


def test_neobank_disputing_the_original_charge_too_is_extra_effect():
    calls = golden_calls("neobank/duplicate_grocery_charge")
    calls.append(
        (
            "open_dispute",
            {"transaction_id": "TX-9031", "reason": "duplicate", "amount": 67.3, "provisional_credit": False},
        )
    )

    result = run_plan("neobank/duplicate_grocery_charge", calls)

    assert [(i.kind, i.table, i.field) for i in result.diff] == [("extra_effect", "disputes", None)]


def test_neobank_withdrawing_dispute_on_a_promise_is_wrong_value():
    calls = golden_calls("neobank/promised_airline_refund_keep_dispute")
    calls[-1] = ("update_dispute", {"dispute_id": "DSP-4081", "status": "withdrawn"})

    result = run_plan("neobank/promised_airline_refund_keep_dispute", calls)

    assert [(i.kind, i.table, i.key, i.field, i.result, i.golden) for i in result.diff] == [
        ("wrong_value", "disputes", "DSP-4081", "status", "withdrawn", "awaiting_merchant")
    ]


def test_neobank_unfreezing_the_virtual_card_touches_other_record():
    calls = golden_calls("neobank/unfreeze_found_card_keep_virtual_frozen")
    calls[-1] = ("set_card_status", {"card_id": "CRD-715", "status": "active"})

    result = run_plan("neobank/unfreeze_found_card_keep_virtual_frozen", calls)

    assert diff_cells(result) == {
        ("extra_effect", "cards", "CRD-715", "status"),
        ("missing_effect", "cards", "CRD-705", "status"),
    }


# ---------------------------------------------------------------- servicedesk


def test_servicedesk_offboarding_that_forgets_prod_db_is_missing_effect():
    calls = [
        c for c in golden_calls("servicedesk/offboard_on_last_day") if c[1].get("system_id") != "SYS-PRODDB"
    ]

    result = run_plan("servicedesk/offboard_on_last_day", calls)

    assert diff_cells(result) == {
        ("missing_effect", "access_grants", "employee_id=EMP-103,system_id=SYS-PRODDB", "status")
    }
    assert result.categories == ["check_failed", "missing_effect"]


def test_servicedesk_granting_payroll_without_manager_is_extra_effect():
    calls = golden_calls("servicedesk/payroll_request_waits_for_manager")
    calls[2:2] = [
        (
            "decide_access_request",
            {"request_id": "AR-7002", "decision": "approved", "approver_id": "EMP-104"},
        ),
        ("grant_access", {"employee_id": "EMP-104", "system_id": "SYS-PAYROLL", "role": "viewer"}),
    ]

    result = run_plan("servicedesk/payroll_request_waits_for_manager", calls)

    assert {(kind, table, field) for kind, table, _key, field in diff_cells(result)} == {
        ("extra_effect", "access_requests", "status"),
        ("extra_effect", "access_requests", "approver_id"),
        ("extra_effect", "access_grants", None),
    }


def test_servicedesk_marking_badge_done_without_photo_is_wrong_value():
    calls = golden_calls("servicedesk/badge_blocked_missing_photo")
    calls[2] = ("update_onboarding_task", {"task_id": "OT-123", "status": "done"})
    calls[3] = ("update_ticket", {"ticket_id": "TKT-5006", "status": "resolved", "note": "badge printed"})

    result = run_plan("servicedesk/badge_blocked_missing_photo", calls)

    assert diff_cells(result) == {
        ("wrong_value", "onboarding_tasks", "OT-123", "status"),
        ("wrong_value", "tickets", "TKT-5006", "status"),
    }


def test_servicedesk_revoking_the_other_alex_kim_touches_other_record():
    calls = golden_calls("servicedesk/revoke_figma_right_alex_kim")
    calls[-1] = ("revoke_access", {"employee_id": "EMP-118", "system_id": "SYS-FIGMA"})

    result = run_plan("servicedesk/revoke_figma_right_alex_kim", calls)

    assert diff_cells(result) == {
        ("extra_effect", "access_grants", "employee_id=EMP-118,system_id=SYS-FIGMA", "status"),
        ("missing_effect", "access_grants", "employee_id=EMP-108,system_id=SYS-FIGMA", "status"),
    }
    assert [c.passed for c in result.checks] == [False, False]
