"""Task validation: valid, invalid, non-discriminating."""

from __future__ import annotations

from tb_engine.spec import GoldenCall
from tb_engine.validation import validate_task
from tests.engine.engine_support import with_changes


def test_validate_task_every_retail_task_is_valid(retail_domain, retail_tasks):
    statuses = {tid: validate_task(retail_domain, task).status for tid, task in retail_tasks.items()}
    assert statuses == dict.fromkeys(retail_tasks, "valid")


def test_validate_task_golden_tool_error_is_invalid(retail_domain, retail_task):
    task = retail_task("address_change_after_shipment_refused")
    broken = with_changes(task, golden=(GoldenCall("cancel_order", {"order_id": "ORD-51"}),))
    result = validate_task(retail_domain, broken)
    assert (result.status, result.problems) == (
        "invalid",
        (
            "golden replay error: call #0 (cancel_order): order ORD-51 is shipped; only orders not yet shipped can be cancelled",
        ),
    )


def test_validate_task_read_only_golden_without_checks_is_non_discriminating(retail_domain, retail_task):
    task = retail_task("address_change_before_shipment")
    idle = with_changes(task, golden=task.golden[:2], checks=())
    assert validate_task(retail_domain, idle).status == "non_discriminating"


def test_validate_task_golden_state_failing_its_own_check_is_invalid(retail_domain, retail_task):
    task = retail_task("ticket_hold_carrier_exception")
    contradictory = with_changes(
        task,
        checks=task.checks[1:]
        + (with_changes(task.checks[0], params={**task.checks[0].params, "fields": {"status": "solved"}}),),
    )
    result = validate_task(retail_domain, contradictory)
    assert result.status == "invalid"
    assert result.problems[0].startswith(
        "golden agent fails: check failed: Ticket 20 is on hold while the carrier investigates"
    )
