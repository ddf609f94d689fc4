"""Sandboxes: isolation, argument validation as tool results, rollback on error, effect attribution."""

from __future__ import annotations

from tb_engine.backend import SqliteBackend
from tb_engine.sandbox import new_sandbox
from tb_engine.transcript import ToolCallRequest


def test_sandbox_attempts_share_nothing(retail_domain, retail_task):
    task = retail_task("ticket_hold_carrier_exception")
    first, second = new_sandbox(retail_domain, task), new_sandbox(retail_domain, task)
    first.call_tool("update_ticket", {"ticket_id": "20", "status": "solved"}, index=0)
    status_first = first.db.execute("SELECT status FROM tickets WHERE id = '20'").fetchone()[0]
    status_second = second.db.execute("SELECT status FROM tickets WHERE id = '20'").fetchone()[0]
    assert (status_first, status_second) == ("solved", "open")
    assert second.snapshot().tables["tickets"].rows["20"]["status"] == "open"


def test_sandbox_schema_violation_is_a_tool_error_not_an_exception(retail_domain, retail_task):
    sandbox = new_sandbox(retail_domain, retail_task("ticket_hold_carrier_exception"))
    outcome = sandbox.call_tool("update_ticket", {"ticket_id": "20", "status": "closed"}, index=0)
    assert (
        outcome.error
        == "invalid arguments for update_ticket at status: 'closed' is not one of ['open', 'pending', 'hold', 'solved']"
    )
    assert outcome.changed_state is False


def test_sandbox_bad_json_and_unknown_tool_are_tool_errors(retail_domain, retail_task):
    sandbox = new_sandbox(retail_domain, retail_task("ticket_hold_carrier_exception"))
    bad_json = sandbox.call_tool("get_ticket", '{"ticket_id": ', index=0)
    unknown = sandbox.call_tool("drop_tables", {}, index=1)
    assert bad_json.error.startswith("arguments are not valid JSON:")
    assert unknown.error == "unknown tool 'drop_tables'"


def test_sandbox_json_string_arguments_are_parsed(retail_domain, retail_task):
    sandbox = new_sandbox(retail_domain, retail_task("ticket_hold_carrier_exception"))
    outcome = sandbox.call_tool("get_ticket", '{"ticket_id": "20"}', index=0)
    assert (outcome.error, outcome.result["status"]) == (None, "open")


def test_sandbox_tool_error_rolls_back_partial_writes(retail_domain, retail_task):
    sandbox = new_sandbox(retail_domain, retail_task("damaged_replacement_not_refund"))
    outcome = sandbox.call_tool("create_replacement", {"order_id": "ORD-31", "sku": "SKU-NOPE"}, index=0)
    assert outcome.error == "sku SKU-NOPE is not part of order ORD-31"
    assert (outcome.changed_state, sandbox.writes()) == (False, {})


def test_sandbox_effect_log_attributes_cells_and_rows_to_calls(retail_domain, retail_task):
    sandbox = new_sandbox(retail_domain, retail_task("missing_item_partial_refund"))
    read = sandbox.call_tool("get_order", {"order_id": "ORD-60"}, index=0)
    refund = sandbox.call_tool(
        "issue_refund",
        {"order_id": "ORD-60", "amount": 24.99, "method": "original_payment", "reason": "x"},
        index=1,
    )
    ticket = sandbox.call_tool("update_ticket", {"ticket_id": "60", "status": "solved"}, index=2)
    assert (read.changed_state, refund.changed_state, ticket.changed_state) == (False, True, True)
    assert sandbox.writes() == {
        ("refunds", "RF-1002", None): (1,),
        ("tickets", "60", "status"): (2,),
        ("tickets", "60", "updated_at"): (2,),
    }


def test_sandbox_update_to_same_value_is_not_a_write(retail_domain, retail_task):
    sandbox = new_sandbox(retail_domain, retail_task("ticket_hold_carrier_exception"))
    sandbox.call_tool("update_ticket", {"ticket_id": "21", "status": "open", "note": ""}, index=0)
    assert sandbox.writes() == {("tickets", "21", "updated_at"): (0,)}


def test_sqlite_backend_call_tool_records_read_only_and_changed_state(retail_domain, retail_task):
    backend = SqliteBackend(retail_domain, retail_task("address_change_before_shipment"))
    read = backend.call_tool(ToolCallRequest("a", "get_order", {"order_id": "ORD-50"}), index=0, turn=1)
    write = backend.call_tool(
        ToolCallRequest("b", "update_shipping_address", {"order_id": "ORD-50", "address": "1 New St"}),
        index=1,
        turn=1,
    )
    assert (read.read_only, read.changed_state, write.read_only, write.changed_state) == (
        True,
        False,
        False,
        True,
    )
    assert backend.result_snapshot().tables["orders"].rows["ORD-50"]["shipping_address"] == "1 New St"
    assert (
        backend.initial_snapshot().tables["orders"].rows["ORD-50"]["shipping_address"]
        == "5 Old Rd, Portland, OR 97202"
    )
    backend.close()


def test_sandbox_result_snapshot_shares_untouched_tables_with_initial(retail_domain, retail_task):
    sandbox = new_sandbox(retail_domain, retail_task("address_change_before_shipment"))
    sandbox.call_tool("update_shipping_address", {"order_id": "ORD-50", "address": "1 New St"}, index=0)
    result = sandbox.snapshot()
    assert result.tables["tickets"] is sandbox.initial.tables["tickets"]
    assert result.tables["orders"] is not sandbox.initial.tables["orders"]


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from jsonschema import Draft202012Validator  # noqa: E402

from tb_engine.sandbox import fast_argument_check  # noqa: E402

ARGUMENT_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(-2, 50, allow_nan=False),
    st.sampled_from(["", "hold", "solved", "closed", "ORD-20", "original_payment", "12 Long Street"]),
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fast_argument_check_agrees_with_jsonschema_on_retail_tools(retail_domain, data):
    tool = data.draw(st.sampled_from(sorted(retail_domain.tools)))
    schema = retail_domain.tools[tool].parameters
    names = sorted(schema.get("properties", {})) + ["unexpected"]
    arguments = data.draw(st.dictionaries(st.sampled_from(names), ARGUMENT_VALUES, max_size=5))
    fast = fast_argument_check(schema)
    assert fast is not None
    assert fast(arguments) == Draft202012Validator(schema).is_valid(arguments)


def test_sandbox_reused_copy_starts_again_from_initial_state(retail_domain, retail_task):
    task = retail_task("missing_item_partial_refund")
    first = new_sandbox(retail_domain, task)
    connection = first.db
    first.call_tool(
        "issue_refund",
        {"order_id": "ORD-60", "amount": 1.0, "method": "store_credit", "reason": "x"},
        index=0,
    )
    first.call_tool("update_ticket", {"ticket_id": "60", "status": "solved"}, index=1)
    first.close()
    second = new_sandbox(retail_domain, task)
    assert second.db is connection  # the pooled copy is reused ...
    assert second.writes() == {}  # ... with nothing left of the previous attempt
    assert second.snapshot() is second.initial
    assert second.db.execute("SELECT status FROM tickets WHERE id = '60'").fetchone()[0] == "open"
    assert second.db.execute("SELECT COUNT(*) FROM refunds WHERE order_id = 'ORD-60'").fetchone()[0] == 0
    second.close()


COMMITTING_DOMAIN = """
name: rogue
title: Rogue
policy: p
tables:
  items:
    primary_key: [id]
    columns: {id: text, state: text}
tools:
  - name: set_and_commit
    description: A badly written tool that commits by itself.
    parameters: {type: object, properties: {state: {type: string}}, required: [state]}
data:
  items:
    - {id: a, state: new}
"""
COMMITTING_TOOLS = """
def set_and_commit(db, state):
    db.execute("UPDATE items SET state = ?", (state,))
    db.commit()
    return state
"""


def test_sandbox_copy_whose_transaction_a_tool_committed_is_never_reused(tmp_path):
    from tb_engine.loader import load_domain
    from tb_engine.spec import TaskSpec
    from tests.engine.engine_support import write_domain

    domain = load_domain(write_domain(tmp_path, COMMITTING_DOMAIN, COMMITTING_TOOLS))
    task = TaskSpec("rogue/t", "rogue", "q", "c", {}, ())
    first = new_sandbox(domain, task)
    connection = first.db
    outcome = first.call_tool("set_and_commit", {"state": "done"}, index=0)
    assert (outcome.error, outcome.changed_state, first.writes()) == (
        None,
        True,
        {("items", "a", "state"): (0,)},
    )
    first.close()
    second = new_sandbox(domain, task)
    assert second.db is not connection
    assert second.db.execute("SELECT state FROM items").fetchone()[0] == "new"
    second.close()


def test_domain_runtime_is_built_once_when_threads_race_for_it(retail_domain, monkeypatch):
    import copy
    import threading

    from tb_engine import sandbox

    domain = copy.copy(retail_domain)  # a domain object no other test has a runtime for
    builds = []
    real_init = sandbox.DomainRuntime.__init__

    def counting_init(self, spec):
        builds.append(threading.get_ident())
        real_init(self, spec)

    monkeypatch.setattr(sandbox.DomainRuntime, "__init__", counting_init)
    start = threading.Barrier(8)
    runtimes = []

    def get():
        start.wait()
        runtimes.append(sandbox.domain_runtime(domain))

    threads = [threading.Thread(target=get) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1
    assert len({id(runtime) for runtime in runtimes}) == 1
